"""Fully connected and residual networks of eqs. (1)-(2), single and batched over runs.

Conventions (docs/conventions.md):

* The bias is folded into each neuron's input weight: layer l has ``W^[l]`` of shape
  (m_l, m_{l-1} + 1) acting on ``(x^[l-1], 1)``; its LAST column is the bias. "Input weight"
  of a neuron always means its full row, bias included. Layers are named ``layer1`` ...
  ``layerL`` (hidden) and ``output``.
* Output: ``f = a^T (x^[L], 1)`` (eq. 2) -- with ``output_bias=False`` the trailing 1 is
  dropped, giving eq. (1)'s ``sum_j a_j sigma(w_j . x)`` for a two-layer net.
* Residual variant (Fig. 4): ``h_{l+1} = sigma(W_l h_l + b_l) + h_l`` for every hidden layer
  whose input and output widths agree (all but the first).
* Every parameter starts from N(0, init_std^2); the draw is made in float64 on the CPU from
  ``torch.Generator().manual_seed(seed)``, layer by layer, so a seed gives the same network in
  float32 or float64, on CPU or GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ._activations import Activation, get_activation
from ._config import ModelConfig


@dataclass(frozen=True)
class Architecture:
    """Shapes of a d-m-...-m-d_out network and the activation of each hidden layer."""

    d: int
    width: int
    depth: int
    d_out: int
    activations: tuple[Activation, ...]
    residual: bool
    output_bias: bool

    @classmethod
    def from_config(cls, cfg: ModelConfig, d: int) -> Architecture:
        acts = [get_activation(a) for a in cfg.activations]
        if len(acts) == 1:
            acts = acts * cfg.depth
        return cls(d, cfg.width, cfg.depth, cfg.d_out, tuple(acts), cfg.arch == "residual",
                   cfg.output_bias)

    @property
    def names(self) -> list[str]:
        return [f"layer{i + 1}" for i in range(self.depth)] + ["output"]

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """(rows, columns) of each weight matrix, bias column included."""
        fan_in = [self.d] + [self.width] * self.depth
        hidden = [(self.width, fan_in[i] + 1) for i in range(self.depth)]
        return hidden + [(self.d_out, self.width + int(self.output_bias))]

    def is_residual(self, layer: int) -> bool:
        """Whether hidden layer `layer` (0-based) adds its input to its output."""
        return self.residual and layer > 0


def init_weights(arch: Architecture, seed: int, std: float) -> list[torch.Tensor]:
    """Draw one network's weights from N(0, std^2) in float64 (the documented order)."""
    gen = torch.Generator().manual_seed(int(seed))
    return [torch.randn(shape, generator=gen, dtype=torch.float64) * std for shape in arch.shapes]


def augment(h: torch.Tensor) -> torch.Tensor:
    """Append the constant 1 that the folded bias multiplies: (..., k) -> (..., k + 1)."""
    return torch.cat([h, torch.ones_like(h[..., :1])], dim=-1)


class BatchedNet:
    """R independent networks of one architecture, parameters stacked along a leading run axis.

    All parameters live in one flat buffer ``flat``; ``weights[k]`` are contiguous views of it
    shaped (R, rows_k, cols_k), layer after layer. One buffer lets an optimizer update every
    layer of every run with a handful of tensor operations, and contiguous views let the
    backward pass write gradients in place: together what makes batched training fast.
    """

    def __init__(self, arch: Architecture, runs: int, dtype: torch.dtype, device: torch.device):
        self.arch = arch
        self.runs = runs
        self.flat = torch.zeros(runs * sum(r * c for r, c in arch.shapes), dtype=dtype, device=device)
        self.grad = torch.zeros_like(self.flat)
        self.weights = self.views(self.flat)
        self.grads = self.views(self.grad)
        self._buffers: dict[tuple, dict[str, list[torch.Tensor]]] = {}

    def views(self, buffer: torch.Tensor) -> list[torch.Tensor]:
        """Split a flat buffer laid out like ``flat`` into per-layer (R, rows, cols) views."""
        views, offset = [], 0
        for rows, cols in self.arch.shapes:
            size = self.runs * rows * cols
            views.append(buffer[offset:offset + size].view(self.runs, rows, cols))
            offset += size
        return views

    def per_run(self, values: torch.Tensor) -> torch.Tensor:
        """Expand one value per run (R,) to the layout of ``flat`` (for per-run learning rates)."""
        out = torch.empty_like(self.flat)
        for view in self.views(out):
            view.copy_(values[:, None, None].expand_as(view))
        return out

    def load(self, run: int, weights: Sequence[torch.Tensor]) -> None:
        """Copy one run's weights (list of (rows, cols) tensors) into slot `run`."""
        for view, w in zip(self.weights, weights, strict=True):
            view[run].copy_(w)

    def _workspace(self, n: int, like: torch.Tensor) -> dict[str, list[torch.Tensor]]:
        # Every tensor the hot loop writes, allocated once per data shape: on CPU, fresh
        # multi-megabyte tensors each step cost more in page faults than the arithmetic.
        key = (n, like.dtype, like.device)
        if key not in self._buffers:
            def make(*shape: int) -> torch.Tensor:
                return torch.zeros(self.runs, *shape, dtype=like.dtype, device=like.device)

            m, depth = self.arch.width, self.arch.depth
            self._buffers[key] = {
                "z": [make(n, m) for _ in range(depth)],
                "h": [make(n, m) for _ in range(depth)],
                "slope": [make(n, m) for _ in range(depth)],
                "g": [make(n, m), make(n, m)],
                # weight gradients without the bias column, copied into the flat gradient
                "gw": [make(rows, cols - 1) for rows, cols in self.arch.shapes[:-1]]
                + [make(self.arch.d_out, m)],
            }
        return self._buffers[key]

    def forward(self, x_aug: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """x_aug (R, n, d+1) inputs with the appended 1 -> f (R, n, d_out), layer inputs, sigma'(z).

        The data come with their column of ones (made once), so the first layer is one bmm on
        the full weight; deeper layers add their bias by baddbmm, keeping activations
        contiguous. Returned tensors are workspace buffers, overwritten by the next call.
        """
        arch = self.arch
        work = self._workspace(x_aug.shape[1], x_aug)
        inputs = [x_aug]
        for layer in range(arch.depth):
            w, z_out = self.weights[layer], work["z"][layer]
            if layer == 0:
                z = torch.bmm(x_aug, w.transpose(1, 2), out=z_out)
            else:
                z = torch.baddbmm(w[:, None, :, -1], inputs[-1], w[:, :, :-1].transpose(1, 2), out=z_out)
            h = work["h"][layer]
            arch.activations[layer].value_and_grad(z, h, work["slope"][layer])
            if arch.is_residual(layer):  # never layer 0: widths differ there
                h.add_(inputs[-1])
            inputs.append(h)
        a = self.weights[-1]
        a_bar = a[:, :, :arch.width].transpose(1, 2)
        f = torch.bmm(inputs[-1], a_bar)
        if arch.output_bias:  # a tiny (R, n, d_out) add: cheaper than baddbmm's broadcast copy
            f.add_(a[:, None, :, -1])
        return f, inputs, work["slope"]

    def loss_and_grad(self, x_aug: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Loss R = 1/(2n) sum_i |f(x_i) - y_i|^2 per run (R,); writes dR/dtheta into `grad`.

        x_aug (R, n, d+1) inputs with the appended 1, y (R, n, d_out) targets. Hand-written
        backward pass (no autograd graph): it is the hot loop of every experiment.
        """
        arch, n = self.arch, x_aug.shape[1]
        f, inputs, slopes = self.forward(x_aug)
        work = self._workspace(n, x_aug)
        residual = f - y
        loss = residual.square().sum(dim=(1, 2)) / (2 * n)
        delta = residual.div_(n)                                     # dR/df, (R, n, d_out)
        self._weight_grad(-1, delta, inputs[-1], work["gw"][-1], bias=arch.output_bias)
        a_bar = self.weights[-1][:, :, :arch.width]                  # (R, d_out, m)
        buffers, top = work["g"], arch.depth - 1
        if arch.d_out == 1 and not arch.is_residual(top):
            # dR/dh_L = delta a^T is an outer product: broadcast it instead of a bmm
            g_h, g_z = None, slopes[top].mul_(delta).mul_(a_bar)
        else:
            g_h = torch.bmm(delta, a_bar, out=buffers[0])            # dR/dh_L, (R, n, m)
            g_z = slopes[top].mul_(g_h)                               # dR/dz_L
        for layer in reversed(range(arch.depth)):
            self._weight_grad(layer, g_z, inputs[layer], work["gw"][layer], bias=True)
            if layer == 0:
                break
            # dR/dh_{l-1} = dR/dz_l W_l (+ dR/dh_l through the skip connection)
            target = buffers[1] if g_h is buffers[0] else buffers[0]
            torch.bmm(g_z, self.weights[layer][:, :, :-1], out=target)
            if arch.is_residual(layer):
                target.add_(g_h)
            g_h = target
            g_z = slopes[layer - 1].mul_(g_h)
        return loss

    def _weight_grad(self, layer: int, g: torch.Tensor, inputs: torch.Tensor, work: torch.Tensor,
                     bias: bool) -> None:
        """dR/dW of one layer from dR/dz (R, n, rows) and its input (R, n, cols or cols-1), into `grad`."""
        if inputs.shape[2] == self.grads[layer].shape[2]:  # input carries its 1: bias included
            torch.bmm(g.transpose(1, 2), inputs, out=self.grads[layer])
            return
        torch.bmm(g.transpose(1, 2), inputs, out=work)
        grad = self.grads[layer]
        grad[:, :, :work.shape[2]].copy_(work)
        if bias:
            grad[:, :, -1].copy_(g.sum(1))


class FCNet(nn.Module):
    """One network as a plain ``nn.Module`` (for users' own code and for analysis).

    ``weights`` is a list of (rows, cols) matrices with the bias as last column, in the order
    ``layer1 .. layerL, output`` -- exactly one run's snapshot.
    """

    def __init__(self, arch: Architecture, weights: Sequence[torch.Tensor]):
        super().__init__()
        self.arch = arch
        self.layers = nn.ParameterList([nn.Parameter(torch.as_tensor(w).clone()) for w in weights])

    def hidden(self, x: torch.Tensor) -> list[torch.Tensor]:
        """x (n, d) -> the input of every layer, (n, cols_k) with the appended 1 (x^[k-1] of eq. 2)."""
        arch, h, inputs = self.arch, x, []
        for layer in range(arch.depth):
            h_aug = augment(h)
            out = arch.activations[layer].fn(h_aug @ self.layers[layer].T)
            h = out + h if arch.is_residual(layer) else out
            inputs.append(h_aug)
        inputs.append(augment(h) if arch.output_bias else h)
        return inputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (n, d) -> f(x) (n, d_out)."""
        return self.hidden(x)[-1] @ self.layers[-1].T
