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
        self._buffers: dict[tuple, list[torch.Tensor]] = {}

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

    def _augmented(self, n: int, like: torch.Tensor) -> list[torch.Tensor]:
        # (R, n, m+1) buffers whose last column stays 1: the "(x, 1)" of eq. 2, made once.
        key = (n, like.dtype, like.device)
        if key not in self._buffers:
            self._buffers[key] = [torch.ones(self.runs, n, self.arch.width + 1, dtype=like.dtype,
                                             device=like.device) for _ in range(self.arch.depth)]
        return self._buffers[key]

    def forward(self, x_aug: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """x_aug (R, n, d+1), inputs with the appended 1 -> f (R, n, d_out), layer inputs, sigma'(z)."""
        arch = self.arch
        inputs, slopes = [x_aug], []
        buffers = self._augmented(x_aug.shape[1], x_aug)
        for layer in range(arch.depth):
            z = torch.bmm(inputs[-1], self.weights[layer].transpose(1, 2))
            out, slope = arch.activations[layer].value_and_grad(z)
            if arch.is_residual(layer):
                out = out + inputs[-1][..., :-1]
            h = buffers[layer]
            h[..., :-1].copy_(out)
            inputs.append(h)
            slopes.append(slope)
        if not arch.output_bias:
            inputs[-1] = inputs[-1][..., :-1]
        return torch.bmm(inputs[-1], self.weights[-1].transpose(1, 2)), inputs, slopes

    def loss_and_grad(self, x_aug: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Loss R = 1/(2n) sum_i |f(x_i) - y_i|^2 per run (R,); writes dR/dtheta into `grad`.

        x_aug (R, n, d+1) holds the inputs with the appended 1, y (R, n, d_out) the targets.
        Hand-written backward pass (no autograd graph): it is the hot loop of every experiment.
        """
        arch, n = self.arch, x_aug.shape[1]
        f, inputs, slopes = self.forward(x_aug)
        residual = f - y
        loss = residual.square().sum(dim=(1, 2)) / (2 * n)
        delta = residual / n                                        # dR/df, (R, n, d_out)
        torch.bmm(delta.transpose(1, 2), inputs[-1], out=self.grads[-1])
        g_h = torch.bmm(delta, self.weights[-1][:, :, :arch.width])  # dR/dh_L, (R, n, m)
        for layer in reversed(range(arch.depth)):
            g_z = slopes[layer].mul_(g_h)
            torch.bmm(g_z.transpose(1, 2), inputs[layer], out=self.grads[layer])
            if layer == 0:
                break
            g_prev = torch.bmm(g_z, self.weights[layer][:, :, :-1])
            g_h = g_prev + g_h if arch.is_residual(layer) else g_prev
        return loss


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
