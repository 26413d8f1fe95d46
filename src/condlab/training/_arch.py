"""Architectures: the shapes of a network and its forward and hand-written backward pass.

An architecture object describes one network of eqs. (1)-(2) -- input dimension, hidden
width and depth, output dimension, one activation per hidden layer -- and computes, for R
runs stacked along a leading axis, the forward pass and the gradient of the loss (no
autograd graph: this is the hot loop of every experiment), in plain torch: the reference that
condlab's fast paths (``condlab._accel``, registered for the exact classes below) are held equal
to. ``model.arch`` names the class through a registry; a new architecture is one subclass
decorated with ``@register_architecture``. Weight layout (docs/conventions.md): layer l is a
(rows, cols) matrix whose LAST column is the bias, acting on ``(x^[l-1], 1)``.

* ``fc`` (:class:`FullyConnected`): ``h_l = D_l(sigma(W_l (h_{l-1}, 1)))``.
* ``residual`` (:class:`Residual`, Fig. 4): ``h_l = D_l(sigma(W_l (h_{l-1}, 1))) + h_{l-1}`` for
  every hidden layer whose input and output widths agree (all but the first).

``D_l`` is dropout in training (``condlab.training._dropout``; identity otherwise), applied to the
activation's output before the skip connection is added.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from ..activations import Activation, get_activation
from ._shapes import layer_names, layer_shapes

if TYPE_CHECKING:
    from ._config import ModelConfig
    from ._dropout import Dropout

ARCHITECTURES: dict[str, type[Architecture]] = {}


def register_architecture(cls: type[Architecture]) -> type[Architecture]:
    """Class decorator: make `cls` available as ``model.arch = cls.name``."""
    ARCHITECTURES[cls.name] = cls
    return cls


def get_architecture(name: str) -> type[Architecture]:
    """The architecture class registered as `name`, or a one-line error listing the accepted ones."""
    if name not in ARCHITECTURES:
        raise ValueError(f"model.arch='{name}' is not accepted: choose one of {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[name]


def augment(h: torch.Tensor) -> torch.Tensor:
    """Append the constant 1 that the folded bias multiplies: (..., k) -> (..., k + 1)."""
    return torch.cat([h, torch.ones_like(h[..., :1])], dim=-1)


@dataclass(frozen=True)
class Architecture:
    """A d-m-...-m-d_out network: shapes, and the forward/backward pass of a stack of dense layers.

    Subclasses decide where a hidden layer adds its input to its output (``skip``).
    """

    name: ClassVar[str]

    d: int
    width: int
    depth: int
    d_out: int
    activations: tuple[Activation, ...]
    output_bias: bool

    @staticmethod
    def from_config(cfg: ModelConfig, d: int) -> Architecture:
        """The architecture `cfg.arch` names, for inputs of dimension d."""
        acts = [get_activation(a) for a in cfg.layer_activations()]
        return get_architecture(cfg.arch)(d, cfg.width, cfg.depth, cfg.d_out, tuple(acts), cfg.output_bias)

    @property
    def names(self) -> list[str]:
        return layer_names(self.depth)

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """(rows, columns) of each weight matrix, bias column included."""
        return layer_shapes(self.d, self.width, self.depth, self.d_out, self.output_bias)

    def skip(self, layer: int) -> bool:
        """Whether hidden layer `layer` (0-based) adds its input to its output."""
        return False

    # ------------------------------------------------------------------ one network, autograd
    def hidden(self, weights: list[torch.Tensor], x: torch.Tensor) -> list[torch.Tensor]:
        """x (n, d) -> the input of every layer, (n, cols_k) with the appended 1 (x^[k-1] of eq. 2)."""
        h, inputs = x, []
        for layer in range(self.depth):
            h_aug = augment(h)
            out = self.activations[layer].fn(h_aug @ weights[layer].T)
            h = out + h if self.skip(layer) else out
            inputs.append(h_aug)
        inputs.append(augment(h) if self.output_bias else h)
        return inputs

    # ------------------------------------------------------------------ R runs, by hand
    def batched_forward(self, weights: list[torch.Tensor], x_aug: torch.Tensor, work: dict,
                        dropout: Dropout | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """x_aug (R, n, d+1) -> f (R, n, d_out) and the layer inputs; sigma' (times the dropout
        mask) is left in work["slope"]. weights[k] (R, rows_k, cols_k).

        The data come with their column of ones (made once), so the first layer is one bmm on
        the full weight; deeper layers add their bias by baddbmm, keeping activations
        contiguous. Returned tensors (f too) are workspace buffers, overwritten by the next call.
        """
        inputs = [x_aug]
        for layer in range(self.depth):
            w, z_out = weights[layer], work["z"][layer]
            if layer == 0:
                z = torch.bmm(x_aug, w.transpose(1, 2), out=z_out)
            else:
                z = torch.baddbmm(w[:, None, :, -1], inputs[-1], w[:, :, :-1].transpose(1, 2), out=z_out)
            h, slope = work["h"][layer], work["slope"][layer]
            self.activations[layer].value_and_grad(z, h, slope)
            if dropout is not None:
                dropout.apply(layer, h, slope)   # the mask scales sigma' too: backward is unchanged
            if self.skip(layer):
                h.add_(inputs[-1])
            inputs.append(h)
        a = weights[-1]
        f = torch.bmm(inputs[-1], a[:, :, :self.width].transpose(1, 2), out=work["f"])
        if self.output_bias:  # a tiny (R, n, d_out) add: cheaper than baddbmm's broadcast copy
            f.add_(a[:, None, :, -1])
        return f, inputs

    def batched_backward(self, weights: list[torch.Tensor], grads: list[torch.Tensor],
                         delta: torch.Tensor, inputs: list[torch.Tensor], work: dict) -> None:
        """Write dR/dW of every layer into grads[k] from delta = dR/df (R, n, d_out).

        `inputs` and work["slope"] come from ``batched_forward`` (slopes are overwritten).
        """
        slopes, buffers, top = work["slope"], work["g"], self.depth - 1
        self._weight_grad(grads[-1], delta, inputs[-1], work["gw"][-1], bias=self.output_bias)
        a_bar = weights[-1][:, :, :self.width]                       # (R, d_out, m)
        if self.d_out == 1 and self.depth == 1 and delta.shape[1] > inputs[0].shape[2]:
            # dR/dW_1[j] = a_j sum_n sigma'(z_nj) delta_n x_n: delta scales the (n, d+1) inputs and
            # a the (m, d+1) product, instead of two passes over the (n, m) slopes (when n > d+1)
            x_delta = torch.mul(inputs[0], delta, out=work["xd"])
            self._weight_grad(grads[0], slopes[0], x_delta, work["gw"][0], bias=True, narrow=work.get("gt"))
            grads[0].mul_(a_bar.transpose(1, 2))
            return
        if self.d_out == 1 and not self.skip(top):
            # dR/dh_L = delta a^T is an outer product: broadcast it instead of a bmm
            g_h, g_z = None, slopes[top].mul_(delta).mul_(a_bar)
        else:
            g_h = torch.bmm(delta, a_bar, out=buffers[0])             # dR/dh_L, (R, n, m)
            g_z = slopes[top].mul_(g_h)                                # dR/dz_L
        for layer in reversed(range(self.depth)):
            self._weight_grad(grads[layer], g_z, inputs[layer], work["gw"][layer], bias=True,
                              narrow=work.get("gt") if layer == 0 else None)
            if layer == 0:
                break
            # dR/dh_{l-1} = dR/dz_l W_l (+ dR/dh_l through the skip connection)
            target = buffers[1] if g_h is buffers[0] else buffers[0]
            torch.bmm(g_z, weights[layer][:, :, :-1], out=target)
            if self.skip(layer):
                target.add_(g_h)
            g_h = target
            g_z = slopes[layer - 1].mul_(g_h)

    @staticmethod
    def _weight_grad(grad: torch.Tensor, g: torch.Tensor, inputs: torch.Tensor, work: torch.Tensor,
                     bias: bool, narrow: torch.Tensor | None = None) -> None:
        """dR/dW of one layer from dR/dz (R, n, rows) and its input (R, n, cols or cols-1), into `grad`.

        `narrow` (R, cols, rows): a workspace for the first layer when its input is narrow
        (d + 1 << m); bmm writes its (cols, rows) transpose 1.2-3.5x faster than (rows, cols).
        """
        if inputs.shape[2] == grad.shape[2]:  # input carries its 1: bias included
            if narrow is not None:
                torch.bmm(inputs.transpose(1, 2), g, out=narrow)
                grad.copy_(narrow.transpose(1, 2))
            else:
                torch.bmm(g.transpose(1, 2), inputs, out=grad)
            return
        torch.bmm(g.transpose(1, 2), inputs, out=work)
        grad[:, :, :work.shape[2]].copy_(work)
        if bias:
            grad[:, :, -1].copy_(g.sum(1))


@register_architecture
@dataclass(frozen=True)
class FullyConnected(Architecture):
    """Eq. (2): a plain stack of dense layers."""

    name: ClassVar[str] = "fc"


@register_architecture
@dataclass(frozen=True)
class Residual(Architecture):
    """Fig. 4: every hidden layer after the first adds its input to its output."""

    name: ClassVar[str] = "residual"

    def skip(self, layer: int) -> bool:
        return layer > 0   # the first layer changes the width: no skip there
