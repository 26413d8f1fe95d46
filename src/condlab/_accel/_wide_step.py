"""Fast path "training step": a WIDE one-hidden-layer tanh network on CPU, in cache-sized blocks of neurons.

Registered for ``FullyConnected`` and ``Residual`` (exact classes; at depth 1 neither has a
skip connection). The reference, ``BatchedNet.loss_and_grad`` with the architecture's pass
(``condlab.training``), makes at n = 80 points and m = 10^5 neurons seven or eight full sweeps
over (n, m) arrays (z, h, slope, products), each 32 MB in float32, far past the caches. This
step splits the m neurons into blocks of B (chosen from n and the dtype only, so that one
block's (n, B) activations stay in L2) and makes two passes over the blocks:

1. per block: ``z = (x, 1) W_blk^T`` (compiled with numba, into an L2 scratch block),
   ``h = tanh(z)`` (numpy's SIMD tanh loop, written into a stored (n, m) buffer of (n, B) pieces)
   and the block's part of ``f = h a`` (eq. 1);
2. with ``delta = (f - y) / n``: per block ``dR/da_blk = delta^T h``, ``s = 1 - h^2`` (into a
   scratch block), ``dR/dW_blk = a_blk * ((x delta)^T s)^T`` (the product through BLAS, kept
   under ``condlab._accel._cpu.BLAS_SINGLE_MAX`` so OpenBLAS runs it on one thread) -- the fold of
   ``Architecture.batched_backward`` for d_out = 1.

Each pass is ONE compiled call per thread over its range of blocks (numba, GIL released): pass
1 reaches numpy's tanh loop through its address (``_numpy_tanh_loop``: np.tanh's bits). With a
call or more per block from Python (three in pass 1, four in pass 2, 200 blocks), the threads
queued for the GIL and a step scaled only 1.3-1.5x from one to two threads; the old pass 2 did
not scale at all (3.7 ms at one and at two threads; numpy's matmul from two threads at once).

Storing h costs one write and one read of n*m values; computing it again in pass 2 costs one
more tanh and product: storing measured faster (prototype, n = 80, float32, one thread: 12.7
vs 17 ms). The kernels are numba's, compiled when the step is made (the pass-1 kernel is
generated per number of columns and compiled in each process; the others are cached on disk
where numba can write). Making the step runs it once: a failure to find numpy's tanh loop or
to compile raises there, and the registry switches the step off with one warning.

With ``torch.get_num_threads() > 1`` the blocks (of all runs) are split into contiguous
ranges over condlab._accel._cpu's pool. Every block is computed the same way whatever the thread
count, and f's per-block partial sums are added in a fixed order, so results are
bit-identical at any thread count (tested).

Where it applies (``WideStep.applies``): CPU, float32/float64, one hidden layer, the
built-in ``tanh``, d_out = 1, with or without output bias, any number of runs R, at least
``MIN_POINTS`` points, n*m*(d+1) above ``BLAS_SINGLE_MAX`` (the regime ``_cpu_step`` refuses),
no dropout. Results agree with the reference within rounding (summation order;
tests/test_accel_parity.py). Gain (benchmarks/bench_wide.py): docs/architecture.md, "Fast paths".
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..activations import fused_tanh
from ..training import FullyConnected, Residual
from . import _cpu
from ._registry import FastPath, register

if TYPE_CHECKING:
    from ..training import BatchedNet, Dropout

# One block's activations (n, B): ~160 KB stays in L2 next to its scratch (B = 512 at n = 80,
# float32: 12.7 ms per step; B = 256: 14.5, B = 1024: 13.0)
BLOCK_BYTES = 160 * 1024
# R*n*m above which the blocks are split over threads (two hand-offs per step). Measured at
# n = 4, m = 1e5 (4e5 values), float32, process CPU time: 1.01 ms split over 2 threads vs 0.88
# on one, so about 0.5 vs 0.9 ms of wall time on two idle cores (condlab._accel._cpu's 1 << 20 was
# set for small steps, where a hand-off weighs more).
PARALLEL_MIN = 1 << 18
# Fewer points than this: the reference. Measured at m = 1e5, Adam, one thread, over a training of
# 1000 steps with the first use (~2 s of compile) included: n = 4: 0.74x (float32) / 0.96x
# (float64) the reference's speed, n = 20: 1.16x / 1.20x, n = 40: 1.44x / 1.46x, n = 80: 1.8x /
# 1.6x; a fast path must gain 1.3x (docs/architecture.md, "Fast paths")
MIN_POINTS = 40
_FASTMATH = {"reassoc", "contract"}   # vectorized sums and FMAs; no assumptions about inf/NaN


@functools.cache
def _kernels() -> dict:
    """The compiled kernels that do not depend on the data's columns (numba; ImportError without it)."""
    import numba

    try:   # numba refuses to cache where it finds no writable cache directory: compile per process
        jit = numba.njit(nogil=True, fastmath=_FASTMATH, cache=True, error_model="numpy")
        jit(_fsum)
    except RuntimeError:
        jit = numba.njit(nogil=True, fastmath=_FASTMATH, error_model="numpy")
    return {"fsum": jit(_fsum), "backward": jit(_backward)}


@functools.cache
def _forward_kernel(cols: int, dtype: str):
    """The compiled pass-1 kernel for this many columns and dtype (numba): for the jobs
    first..last-1, z (n, B) <- x (n, cols) @ w (B, cols)^T, h <- tanh(z), f_part <- h @ a.

    z: the sum over the columns is written out (generated source), so that each z element is
    stored once from registers: a loop over columns re-reads and re-writes z per column (2.3 vs
    ~1.7 ms per step at n = 80, m = 1e5, float32); w goes through wt (cols, B) so that the inner
    loop runs along B with unit stride. tanh: numpy's own SIMD loop, called through its
    address (`_numpy_tanh_loop`), so the bits are np.tanh's and a thread's whole range is one
    call: every call from Python holds the GIL, which the other threads wait for (three calls
    per block from Python measured 1.3-1.5x slower at two threads).
    """
    import numba

    loop = _numpy_tanh_loop(dtype)
    terms = " + ".join(f"x[i, {k}] * wt[{k}, j]" for k in range(cols))
    source = (
        "def forward(jobs, first, last, w, x_c, wt_buf, z_buf, h, a, f_parts, ptrs):\n"
        "    n = x_c.shape[1]\n"
        "    for job in range(first, last):\n"
        "        r, lo, hi, start, k = jobs[job, 0], jobs[job, 1], jobs[job, 2], jobs[job, 3], jobs[job, 4]\n"
        "        rows = hi - lo\n"
        f"        wt = wt_buf[:{cols} * rows].reshape(({cols}, rows))\n"
        "        z = z_buf[:n * rows].reshape((n, rows))\n"
        "        x = x_c[r]\n"
        "        for j in range(rows):\n"
        f"            for c in range({cols}):\n"
        "                wt[c, j] = w[r, lo + j, c]\n"
        "        for i in range(n):\n"
        "            for j in range(rows):\n"
        f"                z[i, j] = {terms}\n"
        # numpy's inner-loop call: args (in, out), count, strides (ptrs holds all 5)
        "        hb = h[start:start + rows * n]\n"
        "        ptrs[0], ptrs[1], ptrs[2] = z.ctypes.data, hb.ctypes.data, rows * n\n"
        "        ptrs[3] = ptrs[4] = z.itemsize\n"
        "        address = ptrs.ctypes.data\n"
        "        tanh(address, address + 2 * ptrs.itemsize, address + 3 * ptrs.itemsize, data)\n"
        "        fsum(a[r, 0, lo:hi], hb.reshape((n, rows)), f_parts[r, k])\n")
    space: dict = {"fsum": _kernels()["fsum"], "tanh": loop[0], "data": loop[1]}
    exec(compile(source, f"<condlab wide step, {cols} columns>", "exec"), space)
    # generated source has no file for numba's cache: compiled once per process (the loop's
    # address is this process's)
    return numba.njit(nogil=True, fastmath=_FASTMATH, error_model="numpy")(space["forward"])


class _UFunc(ctypes.Structure):
    """The head of numpy's PyUFuncObject (numpy's public C API: functions, data, types)."""

    _fields_ = [("ob_refcnt", ctypes.c_ssize_t), ("ob_type", ctypes.c_void_p), ("nin", ctypes.c_int),
                ("nout", ctypes.c_int), ("nargs", ctypes.c_int), ("identity", ctypes.c_int),
                ("functions", ctypes.POINTER(ctypes.c_void_p)), ("data", ctypes.POINTER(ctypes.c_void_p)),
                ("ntypes", ctypes.c_int), ("reserved1", ctypes.c_int), ("name", ctypes.c_char_p),
                ("types", ctypes.POINTER(ctypes.c_char))]


@functools.cache
def _numpy_tanh_loop(dtype: str) -> tuple[ctypes._CFuncPtr, int]:
    """numpy's inner loop of np.tanh for this dtype ('f' or 'd') and its data pointer, read from
    the ufunc's C struct; raises where the struct does not look as expected or the loop does
    not give np.tanh's bits on a probe (the registry then switches this step off)."""
    ufunc = _UFunc.from_address(id(np.tanh))
    shape = (ufunc.nin, ufunc.nout, ufunc.nargs, ufunc.name)
    if shape != (1, 1, 2, b"tanh") or not 0 < ufunc.ntypes < 64:
        raise RuntimeError(f"np.tanh's C struct reads as {shape}, {ufunc.ntypes} loops: not as expected")
    num = np.dtype(dtype).num
    # the first loop for this type is the one numpy's type resolution picks
    pairs = [(ord(ufunc.types[2 * k]), ord(ufunc.types[2 * k + 1])) for k in range(ufunc.ntypes)]
    k = pairs.index((num, num))
    data = ufunc.data[k] or 0
    loop = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
        ufunc.functions[k])
    probe = np.concatenate([np.geomspace(1e-30, 30, 997), -np.geomspace(1e-20, 1e3, 1001),
                            [0, np.inf, np.nan]]).astype(dtype)
    out = np.empty_like(probe)
    args, size, steps = (np.array(v, np.intp) for v in ([probe.ctypes.data, out.ctypes.data], [probe.size],
                                                         [probe.itemsize] * 2))
    with np.errstate(all="ignore"):
        loop(args.ctypes.data, size.ctypes.data, steps.ctypes.data, data or None)
        if not np.array_equal(out, np.tanh(probe), equal_nan=True):
            raise RuntimeError("numpy's tanh loop called by address does not give np.tanh's values")
    return loop, data


def _fsum(a, h, out):  # pragma: no cover - compiled
    """out (n,) <- h (n, B) @ a (B,).

    Four rows at a time: four independent sums hide the latency of each (0.58 -> 0.45 ms per
    step at n = 80, m = 1e5, float32).
    """
    n, rows = h.shape
    i = 0
    while i + 4 <= n:
        h0, h1, h2, h3 = h[i], h[i + 1], h[i + 2], h[i + 3]
        c0, c1, c2, c3 = h0[0] * a[0], h1[0] * a[0], h2[0] * a[0], h3[0] * a[0]
        for j in range(1, rows):
            aj = a[j]
            c0 += h0[j] * aj
            c1 += h1[j] * aj
            c2 += h2[j] * aj
            c3 += h3[j] * aj
        out[i], out[i + 1], out[i + 2], out[i + 3] = c0, c1, c2, c3
        i += 4
    for rest in range(i, n):
        hi = h[rest]
        acc = hi[0] * a[0]
        for j in range(1, rows):
            acc += hi[j] * a[j]
        out[rest] = acc


def _backward(jobs, first, last, h, delta, xd_t, a, ga, gw, gt_buf, s_buf, ones):  # pragma: no cover
    """Pass 2 for the jobs first..last-1 (rows of `jobs`: run, lo, hi, start of h, block), in ONE
    call, so that a thread holds the GIL once per pass, not four times per block (1 thread,
    n = 80, m = 1e5, float32: 3.0 vs 4.0 ms per pass): per block

    dR/da (B,) <- delta (n,) @ h (n, B), one row of h per sweep over dR/da (four rows per sweep
    measured 1.6x slower); s <- 1 - h^2 (n, B), tanh' from tanh, in its own sweep (measured
    faster than fused with dR/da: 2.1 vs 2.6 ms per step); gt (cols, B) <- (x delta)^T s through
    BLAS (np.dot: under BLAS_SINGLE_MAX, so on one OpenBLAS thread); dR/dW (B, cols) <- a * gt^T.
    `ones` (1,) has the arrays' dtype: a literal 1 would make numba compute in float64.
    """
    one = ones[0]
    n, cols = delta.shape[1], xd_t.shape[1]
    for job in range(first, last):
        r, lo, hi, start = jobs[job, 0], jobs[job, 1], jobs[job, 2], jobs[job, 3]
        rows = hi - lo
        hb = h[start:start + rows * n].reshape((n, rows))
        d, out = delta[r], ga[r, 0, lo:hi]
        h0, d0 = hb[0], d[0]
        for j in range(rows):
            out[j] = d0 * h0[j]
        for i in range(1, n):
            hi_, di = hb[i], d[i]
            for j in range(rows):
                out[j] += di * hi_[j]
        s = s_buf[:n * rows].reshape((n, rows))
        for i in range(n):
            hi_, si = hb[i], s[i]
            for j in range(rows):
                si[j] = one - hi_[j] * hi_[j]
        gt = gt_buf[:cols * rows].reshape((cols, rows))
        np.dot(xd_t[r], s, gt)
        for j in range(rows):
            aj = a[r, 0, lo + j]
            for k in range(cols):
                gw[r, lo + j, k] = aj * gt[k, j]


class WideStep:
    """loss_and_grad of a wide one-hidden-layer tanh BatchedNet on fixed data, block by block.

    Every view a block needs is made once here (the parameter, gradient and workspace buffers
    do not move): slicing per block and step cost about 1 ms per step at n = 80, m = 1e5.
    """

    def __init__(self, net: BatchedNet, x_aug: torch.Tensor, y: torch.Tensor):
        self.forward = _forward_kernel(x_aug.shape[2], x_aug.numpy().dtype.char)
        self.backward = _kernels()["backward"]
        runs, self.n, self.cols = x_aug.shape
        self.m, self.bias = net.arch.width, net.arch.output_bias
        self.tensors = (x_aug, y)   # keep the data (and their numpy views' memory) alive
        view = _cpu.as_numpy
        self.x, self.y = view(x_aug), view(y)
        self.a, self.ga = view(net.weights[1]), view(net.grads[1])
        self.w, self.gw = view(net.weights[0]), view(net.grads[0])
        dtype = self.w.dtype
        self.ones = np.ones(1, dtype)   # numba computes `1 - h^2` in the arrays' dtype from it
        self.width = block_width(self.n, self.cols, dtype.itemsize)
        blocks = [(lo, min(lo + self.width, self.m)) for lo in range(0, self.m, self.width)]
        # the data, rows contiguous (copied each step: the kernels' vectorized layout), dR/df,
        # and (x delta)^T
        self.x_c = np.empty(self.x.shape, dtype)
        self.delta, self.xd_t = np.empty((runs, self.n), dtype), np.empty((runs, self.cols, self.n), dtype)
        self.f_parts = np.empty((runs, len(blocks), self.n), dtype)
        self.h = np.empty(runs * self.m * self.n, dtype)   # tanh of every block, (n, B) pieces
        # one row per (run, block) job: run, first and last neuron, start of its h, block index
        self.jobs = np.array([(r, lo, hi, (r * self.m + lo) * self.n, k)
                              for r in range(runs) for k, (lo, hi) in enumerate(blocks)], np.int64)
        self.scratch: dict[int, tuple[np.ndarray, ...]] = {}

    @classmethod
    def make(cls, net: BatchedNet, x_aug: torch.Tensor, y: torch.Tensor,
             dropout: Dropout | None) -> WideStep | None:
        """This step for net.loss_and_grad(x_aug, y), or None where it does not apply. It is run
        once here (its result is overwritten by the caller's step): numpy's tanh loop is probed
        and the kernels compiled now, so that a failure raises here, not in the middle of training."""
        if dropout is not None or not cls.applies(net, x_aug, y):
            return None
        step = cls(net, x_aug, y)
        step.loss_and_grad(None)
        return step

    @staticmethod
    def applies(net: BatchedNet, x_aug: torch.Tensor, y: torch.Tensor) -> bool:
        """Whether this step computes net.loss_and_grad(x_aug, y) without dropout (the
        architecture's class is checked by the registry)."""
        arch = net.arch
        if arch.depth != 1 or arch.d_out != 1 or arch.activations[0].fused is not fused_tanh:
            return False
        if net.flat.device.type != "cpu" or not x_aug.dtype == y.dtype == net.flat.dtype:
            return False
        if any(_cpu.as_numpy(t) is None for t in (net.flat, net.grad, x_aug, y)):
            return False
        n, cols = x_aug.shape[1:]
        if n * arch.width * cols <= _cpu.BLAS_SINGLE_MAX:
            return False
        return n >= MIN_POINTS and block_width(n, cols, x_aug.element_size()) > 0

    def loss_and_grad(self, dropout: None = None) -> torch.Tensor:
        """The loss per run (R,); writes dR/dtheta into the net's gradient buffer (no dropout)."""
        n, m = self.n, self.m
        np.copyto(self.x_c, self.x)
        with np.errstate(over="ignore", invalid="ignore"):   # a diverging run is caught by its loss
            self._blocks(self._pass1)
            f = self.f_parts.sum(axis=1)                      # fixed order: bits independent of threads
            if self.bias:
                f += self.a[:, 0, m:]
            residual = np.subtract(f, self.y[:, :, 0], out=f)
            loss = np.square(residual).sum(axis=1) / (2 * n)
            np.divide(residual, n, out=self.delta)                               # dR/df (R, n)
            # (x delta)^T (R, cols, n): the fold of Architecture.batched_backward for d_out = 1
            np.multiply(self.x_c.transpose(0, 2, 1), self.delta[:, None, :], out=self.xd_t)
            if self.bias:
                self.ga[:, 0, m] = self.delta.sum(axis=1)
            self._blocks(self._pass2)
        return torch.from_numpy(loss)

    def _blocks(self, work: Callable[[int, int, int], None]) -> None:
        """work(first, last, slot) over contiguous ranges of the jobs, over the pool when that pays."""
        jobs = len(self.jobs)
        threads = min(torch.get_num_threads(), jobs) if self.h.size >= PARALLEL_MIN else 1
        if threads <= 1:
            work(0, jobs, 0)
            return

        def run(part: slice, slot: int) -> None:
            # numpy's error state is per thread: the pool's threads do not inherit the caller's
            with np.errstate(over="ignore", invalid="ignore"):
                work(part.start, part.stop, slot)

        parts = _cpu.split_ranges(jobs, threads)
        _cpu.in_parallel([functools.partial(run, part, slot) for slot, part in enumerate(parts)])

    def _scratch(self, slot: int) -> tuple[np.ndarray, ...]:
        """Per-thread flat scratch for one block: wt and gt (cols, B), z and s (n, B), and the
        five words of numpy's loop call."""
        if slot not in self.scratch:
            dtype, size = self.h.dtype, self.n * self.width
            wt, z = np.empty(self.cols * self.width, dtype), np.empty(size, dtype)
            gt, s = np.empty(self.cols * self.width, dtype), np.empty(size, dtype)
            self.scratch[slot] = (wt, z, gt, s, np.empty(5, np.intp))
        return self.scratch[slot]

    def _pass1(self, first: int, last: int, slot: int) -> None:
        """Per block: z in a scratch block that stays in L2, h = tanh(z) (numpy's SIMD loop) into
        the stored h, and the block's part of f: one call for the range."""
        wt, z, _, _, ptrs = self._scratch(slot)
        self.forward(self.jobs, first, last, self.w, self.x_c, wt, z, self.h, self.a, self.f_parts, ptrs)

    def _pass2(self, first: int, last: int, slot: int) -> None:
        _, _, gt, s, _ = self._scratch(slot)
        self.backward(self.jobs, first, last, self.h, self.delta, self.xd_t, self.a, self.ga, self.gw,
                      gt, s, self.ones)


def block_width(n: int, cols: int, itemsize: int) -> int:
    """Neurons per block: (n, B) activations of about BLOCK_BYTES, the product (cols, n) @ (n, B)
    on one OpenBLAS thread; 0 where no block of at least 16 neurons fits."""
    width = min(BLOCK_BYTES // (n * itemsize), _cpu.BLAS_SINGLE_MAX // (n * cols))
    width -= width % 16
    return width if width >= 16 else 0


register(FastPath("wide blocked step", "training step", (FullyConnected, Residual), WideStep.make,
                  "benchmarks/bench_wide.py"))
