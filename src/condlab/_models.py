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


def _augment(h: torch.Tensor) -> torch.Tensor:
    return torch.cat([h, torch.ones_like(h[..., :1])], dim=-1)


class BatchedNet:
    """R independent networks of one architecture, parameters stacked along a leading run axis.

    All parameters live in one flat buffer ``flat`` (R, P); ``weights[k]`` are views of it
    shaped (R, rows_k, cols_k). Keeping one buffer lets an optimizer update every layer of every
    run with a handful of tensor operations, which is what makes batched training fast.
    """

    def __init__(self, arch: Architecture, runs: int, dtype: torch.dtype, device: torch.device):
        self.arch = arch
        sizes = [r * c for r, c in arch.shapes]
        self.flat = torch.zeros(runs, sum(sizes), dtype=dtype, device=device)
        self.grad = torch.zeros_like(self.flat)
        self.weights = self._views(self.flat)
        self.grads = self._views(self.grad)

    def _views(self, buffer: torch.Tensor) -> list[torch.Tensor]:
        views, offset = [], 0
        for rows, cols in self.arch.shapes:
            views.append(buffer[:, offset:offset + rows * cols].view(-1, rows, cols))
            offset += rows * cols
        return views

    @property
    def runs(self) -> int:
        return self.flat.shape[0]

    def load(self, run: int, weights: Sequence[torch.Tensor]) -> None:
        """Copy one run's weights (list of (rows, cols) tensors) into slot `run`."""
        for view, w in zip(self.weights, weights, strict=True):
            view[run].copy_(w)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """x (R, n, d) -> output (R, n, d_out), augmented layer inputs, pre-activations."""
        arch, h = self.arch, x
        inputs, pre = [], []
        for layer in range(arch.depth):
            h_aug = _augment(h)
            z = torch.bmm(h_aug, self.weights[layer].transpose(1, 2))
            out = arch.activations[layer].fn(z)
            h = out + h if arch.is_residual(layer) else out
            inputs.append(h_aug)
            pre.append(z)
        h_last = _augment(h) if arch.output_bias else h
        inputs.append(h_last)
        return torch.bmm(h_last, self.weights[-1].transpose(1, 2)), inputs, pre

    def loss_and_grad(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Loss R = 1/(2n) sum_i |f(x_i) - y_i|^2 per run (R,); writes dR/dtheta into `grad`.

        Hand-written backward pass (no autograd graph): it is the hot loop of every experiment.
        """
        arch, n = self.arch, x.shape[1]
        f, inputs, pre = self.forward(x)
        residual = f - y
        loss = residual.square().sum(dim=(1, 2)) / (2 * n)
        delta = residual / n                                        # dR/df, (R, n, d_out)
        self.grads[-1].copy_(torch.bmm(delta.transpose(1, 2), inputs[-1]))
        g_h = torch.bmm(delta, self.weights[-1][:, :, :arch.width])  # dR/dh_L, (R, n, m)
        for layer in reversed(range(arch.depth)):
            g_z = g_h * arch.activations[layer].grad(pre[layer])
            self.grads[layer].copy_(torch.bmm(g_z.transpose(1, 2), inputs[layer]))
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
            h_aug = _augment(h)
            out = arch.activations[layer].fn(h_aug @ self.layers[layer].T)
            h = out + h if arch.is_residual(layer) else out
            inputs.append(h_aug)
        inputs.append(_augment(h) if arch.output_bias else h)
        return inputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (n, d) -> f(x) (n, d_out)."""
        return self.hidden(x)[-1] @ self.layers[-1].T
