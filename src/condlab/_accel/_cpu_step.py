"""Fast path "training step": a small one-hidden-layer network on CPU, as numpy calls on cached views.

Registered for ``FullyConnected`` and ``Residual`` (exact classes; at depth 1 neither has a
skip connection). The reference, ``BatchedNet.loss_and_grad`` with the architecture's
forward and backward pass (``condlab.training``), makes a few dozen torch operations per
step, each with microseconds of dispatch. For the networks most experiments train (one
hidden layer, Figs. 3-5 and the sweeps: R x 80 points x 50 neurons) this module makes the
same computation as about fifteen numpy calls on numpy views of the parameter and gradient
buffers, made once per data set (the trainer passes the same tensors every step).

It applies to one hidden layer, on CPU in float32/float64, with or without dropout (so a run
with q = 0 trains bit for bit as in a batch without dropout), when every per-run product is
small enough for OpenBLAS to run on one thread (``_cpu.BLAS_SINGLE_MAX``); anything else
keeps the reference. The math is the architecture's, so results agree within rounding
(tests/test_accel_parity.py).

How the Fig. 3 step (R = 64, n = 80, m = 50; float64: ~40 % np.tanh) is laid out:

* The hidden values are kept transposed, (R, m + 1, n), with a last row of ones (z = 40 there,
  tanh(40) = 1 exactly; the data's appended 1 times a fixed weight row). When the runs share
  the data, z^T = W (x, 1)^T is one BLAS product per block of runs instead of one per run, and
  the products with the hidden values give the output bias's gradient (sum_n delta) and
  colsum(x delta) as one more row, not as separate reductions.
* tanh's slope is 1 - h^2 and, with one output (the ``fold``), only used through s^T (x delta):
  the step computes colsum(x delta) - (h^2)^T (x delta), one pass (h^2) instead of two. Both
  forms have an absolute error of a few ulp of sum_n |a_j x_n delta_n|.
* Without dropout, z, h = tanh(z) and h^2 live in ONE buffer (tanh and the square in place,
  the output and its gradient read h in between): a third of the bytes moved per step. With
  dropout, runs with q > 0 keep the plain slope (the mask scales it) in a second buffer; runs
  with q = 0 take the same calls as without dropout, so they train bit for bit as alone.
* tanh is numpy's or torch's (on a torch view of the same buffer), whichever measures faster
  on this CPU, once per process and dtype (``_kernels``: torch's unless numpy's is 1.3x faster;
  numpy's float64 tanh is fast only with AVX-512). In a step split over the pool (below) each
  part calls it with one torch thread (``_cpu.in_parallel``): torch 2.13's tanh opens an OpenMP
  team from ~128 elements on, whose worker would spin on the core another part needs. A step
  too small to split calls it with torch's own threads. Its bits do not depend on the thread
  count.
* With ``torch.get_num_threads() > 1`` and enough work (``STEP_PARALLEL_MIN`` tanh evaluations
  per thread, float64 counting ``F64_COST`` times float32: the Fig. 3 step in float64, not in
  float32), the runs are cut into contiguous ranges and each thread of condlab's pool makes the
  whole step for its range: one hand-off per step, not one per operation. Each run is computed
  by the same calls whatever the range, so splitting changes no bit (tested). A step with
  dropout is not split: torch's threads, drawing the masks, spin after their parallel regions
  on the cores the pool would need.

Gain (benchmarks/bench_batched.py, whole trainings against the reference): docs/architecture.md,
"Fast paths".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from ..activations import fused_tanh
from ..training import FullyConnected, Residual
from . import _cpu, _kernels
from ._registry import FastPath, register

if TYPE_CHECKING:
    from ..training import BatchedNet, Dropout

# Work (n*m per run, times R) above which the step is split over torch's threads, in float32
# tanh evaluations; a float64 one counts F64_COST (np.tanh: 1.7 vs 0.4 ns per element).
STEP_PARALLEL_MIN = 1 << 18
F64_COST = 4
Masks = tuple[np.ndarray, list[bool]] | None   # dropout masks (R, n, m), whether each run drops


def _dropping(drops: list[bool], part: slice) -> list[slice]:
    """The ranges of runs that drop units, within the range `part` and relative to it."""
    ranges, start = [], None
    for r in range(part.start, part.stop):
        if drops[r] and start is None:
            start = r
        if start is not None and (r + 1 == part.stop or not drops[r + 1]):
            ranges.append(slice(start - part.start, r + 1 - part.start))
            start = None
    return ranges


class _Part:
    """numpy views of one contiguous range of runs: what one thread of the step touches."""

    def __init__(self, step: OneLayerStep, runs: slice):
        m = step.m
        for name in ("x", "w", "a", "gw", "ga", "w_ext", "z", "h", "s", "f", "y_t", "xd", "p_t", "q", "g",
                     "mask_t"):
            setattr(self, name, getattr(step, name)[runs])
        self.runs = runs
        self.h_out = self.h if step.bias else self.h[:, :m]     # row m (ones) gives the output bias
        self.a_bar = self.a[:, :, :m]
        self.a_bar_t = self.a_bar.transpose(0, 2, 1)
        self.blocks = []   # shared data: z^T of block_runs runs as one product (R m, d+1) @ (d+1, n)
        if step.x_t is not None:
            for lo in range(0, self.x.shape[0], step.block_runs):
                block = slice(lo, lo + step.block_runs)
                self.blocks.append((self.w_ext[block].reshape(-1, self.x.shape[2]),
                                    self.z[block].reshape(-1, step.n), self.h[block].reshape(-1, step.n)))


class OneLayerStep:
    """loss_and_grad of a one-hidden-layer BatchedNet on fixed data, through numpy views.

    The hidden values are stored transposed, (R, m + 1, n), with a last row of ones (tanh(40)
    for tanh): then z^T = W x^T is one product for all runs when they share the data, and the
    products with the hidden values also give the output bias's gradient and colsum(x delta).
    """

    def __init__(self, net: BatchedNet, x_aug: torch.Tensor, y: torch.Tensor):
        arch = net.arch
        self.act, self.n, self.m = arch.activations[0], x_aug.shape[1], arch.width
        self.bias = arch.output_bias
        # the tensors keep their numpy views' memory alive; the data may be broadcast views
        self.tensors = (x_aug, y)
        # (R, n, m): the dropout masks' shape and dtype, so they are drawn as in the architecture
        self.like = torch.empty((), dtype=x_aug.dtype).expand(x_aug.shape[0], self.n, self.m)
        view = _cpu.as_numpy
        self.x, self.y = view(x_aug), view(y)
        self.y_t = self.y.transpose(0, 2, 1)
        self.w, self.a = view(net.weights[0]), view(net.weights[1])
        self.gw, self.ga = view(net.grads[0]), view(net.grads[1])
        runs, n, cols = self.x.shape
        m, d_out, dtype = self.m, arch.d_out, self.x.dtype
        shared = self.x.strides[0] == 0 or bool((self.x == self.x[:1]).all())
        self.x_t = np.ascontiguousarray(self.x[0].T) if shared else None
        self.block_runs = max(1, _cpu.BLAS_SINGLE_MAX // ((m + 1) * cols * n))   # OpenBLAS: one thread
        self.w_ext = np.zeros((runs, m + 1, cols), dtype=dtype)
        self.w_ext[:, m, cols - 1] = 40.0    # times the input's appended 1: z = 40, tanh(z) = 1 exactly
        self.z, self.h, self.s = (np.zeros((runs, m + 1, n), dtype=dtype) for _ in range(3))
        self.h[:, m] = 1.0
        self.z_t, self.h_t, self.s_t = (torch.from_numpy(a)[:, :m] for a in (self.z, self.h, self.s))
        self.f = np.empty((runs, d_out, n), dtype=dtype)
        self.xd = np.empty((runs, n, cols), dtype=dtype)
        self.p_t = np.empty((runs, cols, m + 1), dtype=dtype)
        self.q = np.empty((runs, cols, m), dtype=dtype)
        self.g = np.empty((runs, m, n), dtype=dtype)
        self.mask_t = np.empty((runs, m, n), dtype=dtype)   # (untouched memory unless dropout)
        self.fold = d_out == 1 and n > cols   # as in Architecture.batched_backward
        # the built-in tanh: numpy's or torch's (chosen at first use), its slope from its value
        self.tanh = self.act.fused is fused_tanh
        cost = F64_COST if dtype == np.float64 else 1
        work = runs * n * m * cost // STEP_PARALLEL_MIN
        self.most_threads = max(1, min(runs, work)) if self.tanh else 1
        self._parts: dict[int, list[_Part]] = {}
        self.tanh_by: str | None = None   # "fast" (numpy's) or "reference" (torch's): _kernels
        self._tanh = None   # set by _choose_tanh (tanh only)

    @classmethod
    def make(cls, net: BatchedNet, x_aug: torch.Tensor, y: torch.Tensor,
             dropout: Dropout | None) -> OneLayerStep | None:
        """This step for net.loss_and_grad(x_aug, y, dropout), or None where it does not apply."""
        return cls(net, x_aug, y) if cls.applies(net, x_aug, y) else None

    @staticmethod
    def applies(net: BatchedNet, x_aug: torch.Tensor, y: torch.Tensor) -> bool:
        """Whether this step computes net.loss_and_grad(x_aug, y, dropout) (the architecture's
        class is checked by the registry)."""
        arch = net.arch
        if arch.depth != 1 or net.flat.device.type != "cpu":
            return False
        if any(_cpu.as_numpy(t) is None for t in (net.flat, net.grad, x_aug, y)):
            return False
        n, cols = x_aug.shape[1:]
        largest = max(n * arch.width * cols, n * arch.width * arch.d_out)
        return (largest <= _cpu.BLAS_SINGLE_MAX and x_aug.dtype == y.dtype == net.flat.dtype
                and bool((x_aug[..., -1] == 1).all()))   # the appended 1 (augment)

    def parts(self, threads: int) -> list[_Part]:
        """The runs cut into `threads` contiguous ranges (views made once per thread count)."""
        if threads not in self._parts:
            self._parts[threads] = [_Part(self, runs) for runs in _cpu.split_ranges(self.x.shape[0], threads)]
        return self._parts[threads]

    def loss_and_grad(self, dropout: Dropout | None = None) -> torch.Tensor:
        """The loss per run (R,) (of the dropped-out network with `dropout`); writes dR/dtheta
        into the net's gradient buffer."""
        loss = np.empty(self.x.shape[0], dtype=self.x.dtype)
        masks = None
        if dropout is not None:   # drawn here, in run order, by the runs' torch generators
            masks = (_cpu.as_numpy(dropout.masks(0, self.like)), [q > 0 for q in dropout.q])
        # with dropout, torch's own threads (the masks, the trainer's loss) spin after their
        # parallel regions, on the cores the pool would need: no split
        threads = min(torch.get_num_threads(), self.most_threads) if dropout is None else 1
        if self.tanh and self.tanh_by is None:
            self._choose_tanh()
        if threads <= 1:
            self._run(self.parts(1)[0], masks, loss)
        else:   # only with tanh: the activation's torch pass stays on this thread
            _cpu.in_parallel([lambda p=part: self._run(p, masks, loss) for part in self.parts(threads)])
        return torch.from_numpy(loss)

    def _choose_tanh(self) -> None:
        """numpy's or torch's tanh, whichever measures faster on this CPU (``_kernels``)."""
        self.tanh_by = _kernels.choose(_kernels.TANH, self.h.dtype)
        self._tanh = getattr(_kernels.TANH, self.tanh_by)

    def _hidden_input(self, part: _Part) -> None:
        """z^T = W (x, 1)^T, into h's buffer with tanh (taken in place there), else into z's."""
        np.copyto(part.w_ext[:, :self.m], part.w)
        if part.blocks:
            for w_block, z_block, h_block in part.blocks:
                np.matmul(w_block, self.x_t, out=h_block if self.tanh else z_block)
        else:
            np.matmul(part.w_ext, part.x.transpose(0, 2, 1), out=part.h if self.tanh else part.z)

    def _run(self, part: _Part, masks: Masks, loss: np.ndarray) -> None:
        """The whole step for one range of runs."""
        m = self.m
        # errstate is per thread; a diverging run is caught by its loss
        with np.errstate(over="ignore", invalid="ignore"):
            self._hidden_input(part)
            # with the fold, s holds h^2 (the slope 1 - h^2 is folded into the weight gradient)
            # except on runs that drop units, whose slope the mask scales: there s = 1 - h^2.
            # So a run with q = 0 computes the same with or without dropout in its batch.
            square = self.tanh and self.fold
            if self.tanh and masks is None:   # one buffer: z, then h, then s (fewer bytes moved)
                self._tanh(part.h, part.h)
                delta = self._output(part, loss)
                np.multiply(part.h, part.h, out=part.h)
                if not square:
                    np.subtract(1, part.h, out=part.h)                        # s = 1 - h^2
                self._weight_grad(part, delta, part.h, square, [])
                return
            if self.tanh:
                self._tanh(part.h, part.h)
                np.multiply(part.h, part.h, out=part.s)
                for runs in _dropping(masks[1], part.runs) if square else [slice(None)]:
                    np.subtract(1, part.s[runs], out=part.s[runs])                 # s = 1 - h^2
            else:   # the activation's own pass (torch), on all runs: part is all of them here
                self.act.value_and_grad(self.z_t, self.h_t, self.s_t)       # h = sigma(z), s = sigma'(z)
            if masks is not None:   # the mask scales sigma' too: backward unchanged
                np.copyto(part.mask_t, masks[0][part.runs].transpose(0, 2, 1))   # one strided pass
                np.multiply(part.h[:, :m], part.mask_t, out=part.h[:, :m])
                np.multiply(part.s[:, :m], part.mask_t, out=part.s[:, :m])
            delta = self._output(part, loss)
            self._weight_grad(part, delta, part.s, square, _dropping(masks[1], part.runs) if masks else [])

    def _output(self, part: _Part, loss: np.ndarray) -> np.ndarray:
        """The output, the loss per run and the output layer's gradient; -> dR/df^T (R, d_out, n)."""
        np.matmul(part.a, part.h_out, out=part.f)                          # f^T = a (h, 1)
        residual = np.subtract(part.f, part.y_t, out=part.f)
        loss[part.runs] = np.square(residual).sum(axis=(1, 2)) / (2 * self.n)
        delta = np.divide(residual, self.n, out=residual)
        np.matmul(delta, part.h_out.transpose(0, 2, 1), out=part.ga)       # with the bias: sum_n delta
        return delta

    def _weight_grad(self, part: _Part, delta: np.ndarray, s: np.ndarray, square: bool,
                     dropping: list[slice]) -> None:
        """The hidden layer's gradient from the slope s (h^2 with `square`, but on the runs
        `dropping`, ranges within the part)."""
        m = self.m
        if self.fold:   # dR/dW[j] = a_j sum_n s_nj (delta_n x_n)
            np.multiply(part.x, delta.transpose(0, 2, 1), out=part.xd)
            # (x delta)^T (s, 1): sum_n s_nj xd_n, and colsum(xd) in column m (s's row m is 1)
            np.matmul(part.xd.transpose(0, 2, 1), s.transpose(0, 2, 1), out=part.p_t)
            if not square:
                np.copyto(part.q, part.p_t[:, :, :m])
            else:   # sum_n (1 - h_nj^2) xd_n = colsum(xd) - sum_n h_nj^2 xd_n
                np.subtract(part.p_t[:, :, m:], part.p_t[:, :, :m], out=part.q)
                for runs in dropping:   # their s is the plain (masked) slope
                    np.copyto(part.q[runs], part.p_t[runs, :, :m])
            np.multiply(part.q, part.a_bar, out=part.q)
            np.copyto(part.gw, part.q.transpose(0, 2, 1))
        else:           # dR/dz = s * (delta a), then dR/dW = (dR/dz)^T (x, 1)
            np.matmul(part.a_bar_t, delta, out=part.g)
            np.multiply(s[:, :m], part.g, out=part.g)
            np.matmul(part.g, part.x, out=part.gw)


register(FastPath("one-layer numpy step", "training step", (FullyConnected, Residual), OneLayerStep.make,
                  "benchmarks/bench_batched.py"))
