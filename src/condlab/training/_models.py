"""Networks of eqs. (1)-(2) as parameters: one as an nn.Module, or R runs in one flat buffer.

The forward and backward pass belong to the architecture object (``condlab.training._arch``: ``fc``,
``residual``). Conventions (docs/conventions.md):

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
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from .._accel import find
from ._arch import Architecture, augment

if TYPE_CHECKING:
    from ._dropout import Dropout

__all__ = ["Architecture", "BatchedNet", "FCNet", "augment", "init_weights"]


def init_weights(arch: Architecture, seed: int, std: float) -> list[torch.Tensor]:
    """Draw one network's weights from N(0, std^2) in float64 (the documented order)."""
    gen = torch.Generator().manual_seed(int(seed))
    return [torch.randn(shape, generator=gen, dtype=torch.float64) * std for shape in arch.shapes]


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
        # (x_aug, y, with dropout, the fast step found for them or None): asked once per data set
        self._fast: tuple[Any, ...] = (None, None, None, None)

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
                "f": make(n, self.arch.d_out),
                "xd": make(n, self.arch.shapes[0][1]),   # the inputs times dR/df (Architecture)
                # weight gradients without the bias column, copied into the flat gradient
                "gw": [make(rows, cols - 1) for rows, cols in self.arch.shapes[:-1]]
                + [make(self.arch.d_out, m)],
            }
            rows, cols = self.arch.shapes[0]
            if cols < rows:  # the first layer's weight gradient, transposed (Architecture._weight_grad)
                self._buffers[key]["gt"] = make(cols, rows)
        return self._buffers[key]

    def forward(self, x_aug: torch.Tensor, dropout: Dropout | None = None) -> torch.Tensor:
        """x_aug (R, n, d+1) inputs with the appended 1 -> f (R, n, d_out) (a workspace buffer)."""
        return self.arch.batched_forward(self.weights, x_aug, self._workspace(x_aug.shape[1], x_aug),
                                         dropout)[0]

    def loss(self, x_aug: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Loss R = 1/(2n) sum_i |f(x_i) - y_i|^2 per run (R,), without dropout and gradient."""
        return (self.forward(x_aug) - y).square().sum(dim=(1, 2)) / (2 * x_aug.shape[1])

    def loss_and_grad(self, x_aug: torch.Tensor, y: torch.Tensor,
                      dropout: Dropout | None = None) -> torch.Tensor:
        """Loss R = 1/(2n) sum_i |f(x_i) - y_i|^2 per run (R,); writes dR/dtheta into `grad`.

        x_aug (R, n, d+1) inputs with the appended 1, y (R, n, d_out) targets. The forward and
        hand-written backward pass are the architecture's; with `dropout`, both use its masks.
        A fast path registered for this exact architecture class (condlab._accel, "training
        step") may compute the same within rounding; CONDLAB_REFERENCE=1 switches it off.
        """
        fast = self.fast_step(x_aug, y, dropout)
        if fast is not None:
            return fast.loss_and_grad(dropout)
        n, work = x_aug.shape[1], self._workspace(x_aug.shape[1], x_aug)
        f, inputs = self.arch.batched_forward(self.weights, x_aug, work, dropout)
        residual = f - y
        loss = residual.square().sum(dim=(1, 2)) / (2 * n)
        self.arch.batched_backward(self.weights, self.grads, residual.div_(n), inputs, work)
        return loss

    def fast_step(self, x_aug: torch.Tensor, y: torch.Tensor, dropout: Dropout | None = None) -> Any:
        """The registered fast training step for these data tensors, or None (the reference runs).

        Asked once per data set: the trainer passes the same tensors every step.
        """
        x_held, y_held, dropping, step = self._fast
        if x_held is x_aug and y_held is y and dropping == (dropout is not None):
            return step
        step = find("training step", type(self.arch), self, x_aug, y, dropout)
        self._fast = (x_aug, y, dropout is not None, step)
        return step

    def run_mask(self, run: int) -> torch.Tensor:
        """A bool tensor in the layout of ``flat``, true on run `run`'s parameters."""
        mask = torch.zeros(self.flat.shape, dtype=torch.bool, device=self.flat.device)
        for view in self.views(mask):
            view[run] = True
        return mask


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
        return self.arch.hidden(list(self.layers), x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (n, d) -> f(x) (n, d_out)."""
        return self.hidden(x)[-1] @ self.layers[-1].T
