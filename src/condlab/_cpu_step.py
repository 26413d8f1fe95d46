"""The training step of a small one-hidden-layer network on CPU, as numpy calls on cached views.

``BatchedNet.loss_and_grad`` computes the loss and gradient of eq. (3) for R runs with the
architecture's forward and backward pass (``condlab._arch``): a few dozen torch operations per
step, each with microseconds of dispatch. For the networks most experiments train (one hidden
layer, Figs. 3-5 and the sweeps: R x 80 points x 50 neurons) that dispatch was a quarter of a
float32 step. This module makes the same computation as about fifteen numpy calls on numpy
views of the parameter, gradient and workspace buffers, made once per data set (the trainer
passes the same tensors every step): 130 -> ~40 us of fixed cost per step.

It applies to one hidden layer without a skip connection, on CPU in float32/float64, with or
without dropout (so a run with q = 0 trains bit for bit as in a batch without dropout), when
every per-run product is small enough for OpenBLAS to run on one thread
(``condlab._cpu.BLAS_SINGLE_MAX``); anything else keeps the architecture's pass. The math is
the architecture's (``Architecture.batched_forward``/``batched_backward``), so results agree
within rounding (tests/test_training.py holds both to torch.optim at 1e-9 in float64).

Two refinements of the Fig. 3 step (R = 64, n = 80, m = 50), which is mostly tanh in float64:

* tanh's slope is 1 - h^2, and with one output (the ``fold`` below) it is only used through
  s^T (x delta). So the step computes colsum(x delta) - (h^2)^T (x delta): one pass over the
  (n, m) values (h^2) instead of two (h^2, then 1 - h^2). Both forms have an absolute error of
  a few ulp of sum_n |x_n delta_n| (tests/test_cpu.py); with dropout the mask scales the slope,
  and the step keeps the plain form.
* With ``torch.get_num_threads() > 1`` and enough work (``STEP_PARALLEL_MIN`` tanh evaluations,
  float64 counting ``F64_COST`` times float32), the runs are cut into contiguous ranges and each
  thread of condlab's pool makes the whole step for its range: one hand-off per step, not one
  per operation. Each run is computed by the same calls on the same values whatever the range,
  so splitting changes no bit (tested). Dropout masks are drawn before the split (torch's
  generators, in run order) and applied per range.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from . import _cpu

if TYPE_CHECKING:
    from ._dropout import Dropout
    from ._models import BatchedNet

# Work (n*m per run, times R) above which the step is split over torch's threads, in float32
# tanh evaluations; a float64 one counts F64_COST (np.tanh: 1.7 vs 0.4 ns per element).
STEP_PARALLEL_MIN = 1 << 19
F64_COST = 4
Masks = tuple[np.ndarray, np.ndarray] | None   # dropout masks (R, n, m), runs that drop (R, 1, 1)


class _Part:
    """numpy views of one contiguous range of runs: what one thread of the step touches."""

    def __init__(self, step: OneLayerStep, runs: slice, m: int):
        for name in ("x", "y", "z", "h", "s", "f", "xd", "g", "gw", "ga"):
            setattr(self, name, getattr(step, name)[runs])
        self.runs = runs
        self.w_t = step.w[runs].transpose(0, 2, 1)
        self.a_bar = step.a[runs, :, :m]
        self.a_bar_t = self.a_bar.transpose(0, 2, 1)
        self.bias = step.a[runs, None, :, m] if step.bias else None
        self.ga_bar = self.ga[:, :, :m]
        self.colsum = np.empty((self.x.shape[0], 1, self.x.shape[2]), dtype=self.x.dtype)


class OneLayerStep:
    """loss_and_grad of a one-hidden-layer BatchedNet on fixed data, through numpy views."""

    def __init__(self, net: BatchedNet, x_aug: torch.Tensor, y: torch.Tensor, work: dict):
        arch = net.arch
        self.act, self.n, self.m = arch.activations[0], x_aug.shape[1], arch.width
        self.bias = arch.output_bias
        # the tensors keep their numpy views' memory alive; the data may be broadcast views
        self.tensors = (x_aug, y)
        self.z_t, self.h_t, self.s_t = work["z"][0], work["h"][0], work["slope"][0]
        view = _cpu.as_numpy
        self.x, self.y = view(x_aug), view(y)
        self.z, self.h, self.s, self.f = view(self.z_t), view(self.h_t), view(self.s_t), view(work["f"])
        self.w, self.a = view(net.weights[0]), view(net.weights[1])
        self.gw, self.ga = view(net.grads[0]), view(net.grads[1])
        self.xd = view(work["xd"])
        self.g = view(work["g"][0])
        self.fold = arch.d_out == 1 and self.n > x_aug.shape[2]   # as in Architecture.batched_backward
        # tanh in numpy (may run on the pool's threads), and its slope from its value
        self.tanh = self.act.numpy_fn is np.tanh and self.act.slope_is_one_minus_square
        self.ones = np.ones((1, self.n), dtype=self.x.dtype)
        runs = self.x.shape[0]
        cost = F64_COST if self.x.dtype == np.float64 else 1
        work = runs * self.n * self.m * cost // STEP_PARALLEL_MIN
        self.most_threads = max(1, min(runs, work)) if self.tanh else 1
        self._parts: dict[int, list[_Part]] = {}

    @staticmethod
    def applies(net: BatchedNet, x_aug: torch.Tensor, y: torch.Tensor) -> bool:
        """Whether this step computes net.loss_and_grad(x_aug, y, dropout)."""
        arch = net.arch
        if arch.depth != 1 or arch.skip(0) or net.flat.device.type != "cpu":
            return False
        if any(_cpu.as_numpy(t) is None for t in (net.flat, net.grad, x_aug, y)):
            return False
        n, cols = x_aug.shape[1:]
        largest = max(n * arch.width * cols, n * arch.width * arch.d_out)
        return largest <= _cpu.BLAS_SINGLE_MAX and x_aug.dtype == y.dtype == net.flat.dtype

    def parts(self, threads: int) -> list[_Part]:
        """The runs cut into `threads` contiguous ranges (views made once per thread count)."""
        if threads not in self._parts:
            ranges = _cpu._ranges(self.x.shape[0], threads)
            self._parts[threads] = [_Part(self, runs, self.m) for runs in ranges]
        return self._parts[threads]

    def loss_and_grad(self, dropout: Dropout | None = None) -> torch.Tensor:
        """The loss per run (R,) (of the dropped-out network with `dropout`); writes dR/dtheta
        into the net's gradient buffer."""
        loss = np.empty(self.x.shape[0], dtype=self.x.dtype)
        masks = None
        if dropout is not None:   # drawn here, in run order, by the runs' torch generators
            dropping = np.array([q > 0 for q in dropout.q])[:, None, None]
            masks = (_cpu.as_numpy(dropout.masks(0, self.h_t)), dropping)
        threads = min(torch.get_num_threads(), self.most_threads)
        if threads <= 1:
            self._run(self.parts(1)[0], masks, loss)
        else:   # only with tanh: the activation's torch pass stays on this thread
            _cpu._in_parallel([lambda p=part: self._run(p, masks, loss) for part in self.parts(threads)])
        return torch.from_numpy(loss)

    def _run(self, part: _Part, masks: Masks, loss: np.ndarray) -> None:
        """The whole step for one range of runs."""
        # errstate is per thread; a diverging run is caught by its loss
        with np.errstate(over="ignore", invalid="ignore"):
            np.matmul(part.x, part.w_t, out=part.z)                           # z = (x, 1) W^T
            # with the fold, s holds h^2 (the slope 1 - h^2 is folded into the weight gradient)
            # except on runs that drop units, whose slope the mask scales: there s = 1 - h^2.
            # So a run with q = 0 computes the same with or without dropout in its batch.
            square = self.tanh and self.fold
            if self.tanh:
                np.tanh(part.z, out=part.h)
                np.multiply(part.h, part.h, out=part.s)
                if not square:
                    np.subtract(1, part.s, out=part.s)                        # s = 1 - h^2
                elif masks is not None:
                    np.subtract(1, part.s, out=part.s, where=masks[1][part.runs])
            else:   # the activation's own pass (torch), on all runs: part is all of them here
                self.act.value_and_grad(self.z_t, self.h_t, self.s_t)       # h = sigma(z), s = sigma'(z)
            if masks is not None:   # the mask scales sigma' too: backward unchanged
                np.multiply(part.h, masks[0][part.runs], out=part.h)
                np.multiply(part.s, masks[0][part.runs], out=part.s)
            self._backward(part, loss, square, None if masks is None else masks[1][part.runs])

    def _backward(self, part: _Part, loss: np.ndarray, square: bool, dropping: np.ndarray | None) -> None:
        """Everything after h and s (h^2 with `square`, on runs not `dropping`): output, loss, gradients."""
        np.matmul(part.h, part.a_bar_t, out=part.f)
        if self.bias:
            np.add(part.f, part.bias, out=part.f)
        residual = np.subtract(part.f, part.y, out=part.f)
        loss[part.runs] = np.square(residual).sum(axis=(1, 2)) / (2 * self.n)
        delta = np.divide(residual, self.n, out=residual)                  # dR/df (R, n, d_out)
        np.matmul(delta.transpose(0, 2, 1), part.h, out=part.ga_bar)
        if self.bias:
            np.sum(delta, axis=1, out=part.ga[:, :, self.m])
        if self.fold:   # dR/dW[j] = a_j sum_n s_nj (delta_n x_n)
            np.multiply(part.x, delta, out=part.xd)
            np.matmul(part.s.transpose(0, 2, 1), part.xd, out=part.gw)
            if square:  # sum_n (1 - h_nj^2) xd_n = colsum(xd) - sum_n h_nj^2 xd_n
                np.matmul(self.ones, part.xd, out=part.colsum)
                if dropping is None:
                    np.subtract(part.colsum, part.gw, out=part.gw)
                else:
                    np.subtract(part.colsum, part.gw, out=part.gw, where=~dropping)
            np.multiply(part.gw, part.a_bar_t, out=part.gw)
        else:           # dR/dz = s * (delta a), then dR/dW = (dR/dz)^T (x, 1)
            np.matmul(delta, part.a_bar, out=part.g)
            np.multiply(part.s, part.g, out=part.g)
            np.matmul(part.g.transpose(0, 2, 1), part.x, out=part.gw)
