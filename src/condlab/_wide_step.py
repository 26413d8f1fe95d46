"""The training step of a WIDE one-hidden-layer tanh network on CPU, in cache-sized blocks of neurons.

``BatchedNet.loss_and_grad`` computes the loss and gradient of eq. (3) with the architecture's
pass (``condlab._arch``): at n = 80 points and m = 10^5 neurons that pass makes seven or eight
full sweeps over (n, m) arrays (z, h, slope, products), each 32 MB in float32, far past the
caches. This step splits the m neurons into blocks of B (chosen from n and the dtype only, so
that one block's (n, B) activations stay in L2) and makes two passes over the blocks:

1. per block: ``z = (x, 1) W_blk^T`` (compiled with numba, into an L2 scratch block),
   ``h = tanh(z)`` (numpy's SIMD tanh, written into a stored (n, m) buffer of (n, B) pieces) and
   the block's part of ``f = h a`` (eq. 1);
2. with ``delta = (f - y) / n``: per block ``dR/da_blk = delta^T h``, ``s = 1 - h^2`` (into a
   scratch block), ``dR/dW_blk = a_blk * ((x delta)^T s)^T`` (the product through BLAS, kept
   under ``condlab._cpu.BLAS_SINGLE_MAX`` so OpenBLAS runs it on one thread) -- the fold of
   ``Architecture.batched_backward`` for d_out = 1.

Storing h costs one write and one read of n*m values; computing it again in pass 2 costs one
more tanh and product: storing measured faster (prototype, n = 80, float32, one thread: 12.7
vs 17 ms). Measured at n = 80, m = 1e5, d = 5, one thread, CPU time: float32 ~9 ms per
loss_and_grad (pass 1 ~5.2: tanh 3.4, z 1.5, f 0.45; pass 2 ~3.5), 3.0x faster than the
architecture's pass; float64 1.7x; at n = 4 1.2-1.3x. The kernels are numba's, compiled on
first use (cached on disk where numba can write; the z kernel, generated per d, per process).

With ``torch.get_num_threads() > 1`` the blocks (of all runs) are split into contiguous
ranges over condlab._cpu's pool (numba kernels and numpy release the GIL). Every block is
computed the same way whatever the thread count, and f's per-block partial sums are added in
a fixed order, so results are bit-identical at any thread count (tested).

Where it applies (``WideStep.applies``): CPU, float32/float64, one hidden layer without skip,
the built-in ``tanh``, d_out = 1, with or without output bias, any number of runs R and of
points n, n*m*(d+1) above ``BLAS_SINGLE_MAX`` (the regime ``_cpu_step.OneLayerStep`` refuses),
numba importable. Not with dropout: a step with dropout takes the architecture's
pass (``BatchedNet.loss_and_grad`` falls back). Results agree with the architecture's pass
within rounding (summation order; tests/test_wide_step.py: 1e-12 relative in float64).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch

from . import _cpu

if TYPE_CHECKING:
    from ._models import BatchedNet

# One block's activations (n, B): ~160 KB stays in L2 next to its scratch (B = 512 at n = 80,
# float32: 12.7 ms per step; B = 256: 14.5, B = 1024: 13.0)
BLOCK_BYTES = 160 * 1024
# R*n*m above which the blocks are split over threads (two hand-offs per step). Measured at
# n = 4, m = 1e5 (4e5 values), float32, process CPU time: 1.01 ms split over 2 threads vs 0.88
# on one, so about 0.5 vs 0.9 ms of wall time on two idle cores (condlab._cpu's 1 << 20 was
# set for small steps, where a hand-off weighs more).
PARALLEL_MIN = 1 << 18
_FASTMATH = {"reassoc", "contract"}   # vectorized sums and FMAs; no assumptions about inf/NaN


@functools.cache
def _kernels() -> dict | None:
    """The compiled block kernels (numba), or None without numba."""
    try:
        import numba
    except ImportError:
        return None
    try:   # numba refuses to cache where it finds no writable cache directory: compile per process
        jit = numba.njit(nogil=True, fastmath=_FASTMATH, cache=True, error_model="numpy")
        jit(_slope)
    except RuntimeError:
        jit = numba.njit(nogil=True, fastmath=_FASTMATH, error_model="numpy")
    return {"fsum": jit(_fsum), "project": jit(_project), "slope": jit(_slope),
            "scale": jit(_scale)}


@functools.cache
def _pre_kernel(cols: int):
    """The compiled z (n, B) <- x (n, cols) @ w (B, cols)^T for this many columns.

    The sum over the columns is written out (generated source), so that each z element is
    stored once from registers: a loop over columns re-reads and re-writes z per column
    (2.3 vs ~1.7 ms per step at n = 80, m = 1e5, float32). w goes through wt (cols, B) so that
    the inner loop runs along B with unit stride.
    """
    import numba

    terms = " + ".join(f"x[i, {k}] * wt[{k}, j]" for k in range(cols))
    source = (
        "def pre(w, x, wt, z):\n"
        "    rows = w.shape[0]\n"
        "    for j in range(rows):\n"
        f"        for k in range({cols}):\n"
        "            wt[k, j] = w[j, k]\n"
        "    for i in range(x.shape[0]):\n"
        "        for j in range(rows):\n"
        f"            z[i, j] = {terms}\n")
    space: dict = {}
    exec(compile(source, f"<condlab wide step, {cols} columns>", "exec"), space)
    # generated source has no file for numba's cache: compiled once per process and cols
    return numba.njit(nogil=True, fastmath=_FASTMATH, error_model="numpy")(space["pre"])


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


def _project(d, h, out):  # pragma: no cover - compiled
    """out (B,) <- d (n,) @ h (n, B), one row per sweep over out (four rows per sweep measured
    1.6x slower)."""
    h0, d0 = h[0], d[0]
    for j in range(out.shape[0]):
        out[j] = d0 * h0[j]
    for i in range(1, h.shape[0]):
        hi, di = h[i], d[i]
        for j in range(out.shape[0]):
            out[j] += di * hi[j]


def _slope(h, s, ones):  # pragma: no cover - compiled
    """s <- 1 - h^2 (n, B): tanh' from tanh, in a second kernel (measured faster than fused with
    _project: 2.1 vs 2.6 ms per step). `ones` (1,) has the arrays' dtype: a literal 1 would make
    numba compute in float64."""
    one = ones[0]
    for i in range(h.shape[0]):
        hi, si = h[i], s[i]
        for j in range(hi.shape[0]):
            si[j] = one - hi[j] * hi[j]


def _scale(gt, a, gw):  # pragma: no cover - compiled
    """gw (B, cols) <- a (B,)[:, None] * gt (cols, B)^T."""
    cols, rows = gt.shape
    for j in range(rows):
        for k in range(cols):
            gw[j, k] = a[j] * gt[k, j]


class WideStep:
    """loss_and_grad of a wide one-hidden-layer tanh BatchedNet on fixed data, block by block.

    Every view a block needs is made once here (the parameter, gradient and workspace buffers
    do not move): slicing per block and step cost about 1 ms per step at n = 80, m = 1e5.
    """

    def __init__(self, net: BatchedNet, x_aug: torch.Tensor, y: torch.Tensor):
        kernels = _kernels()
        self.fsum, self.project, self.slope, self.scale = (kernels[k] for k in ("fsum", "project", "slope",
                                                                                "scale"))
        self.pre = _pre_kernel(x_aug.shape[2])
        runs, self.n, self.cols = x_aug.shape
        self.m, self.bias = net.arch.width, net.arch.output_bias
        self.tensors = (x_aug, y)   # keep the data (and their numpy views' memory) alive
        view = _cpu.as_numpy
        self.x, self.y = view(x_aug), view(y)
        self.a, self.ga = view(net.weights[1]), view(net.grads[1])
        w, gw = view(net.weights[0]), view(net.grads[0])
        dtype = w.dtype
        self.ones = np.ones(1, dtype)   # numba computes `1 - h^2` in the arrays' dtype from it
        self.width = block_width(self.n, self.cols, dtype.itemsize)
        blocks = [slice(lo, min(lo + self.width, self.m)) for lo in range(0, self.m, self.width)]
        # the data, rows contiguous (copied each step: the kernels' vectorized layout), dR/df,
        # and (x delta)^T: per-run views made once
        self.x_c = np.empty(self.x.shape, dtype)
        self.delta, self.xd_t = np.empty((runs, self.n), dtype), np.empty((runs, self.cols, self.n), dtype)
        self.f_parts = np.empty((runs, len(blocks), self.n), dtype)
        self.h = np.empty(runs * self.m * self.n, dtype)   # tanh of every block, (n, B) pieces
        self.jobs = []
        for r in range(runs):
            for k, b in enumerate(blocks):
                start = (r * self.m + b.start) * self.n
                h = self.h[start:start + (b.stop - b.start) * self.n].reshape(self.n, b.stop - b.start)
                self.jobs.append((w[r, b], self.x_c[r], h, self.a[r, 0, b], self.f_parts[r, k],
                                  self.delta[r], self.ga[r, 0, b], self.xd_t[r], gw[r, b]))
        self.scratch: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}

    @staticmethod
    def applies(net: BatchedNet, x_aug: torch.Tensor, y: torch.Tensor) -> bool:
        """Whether this step computes net.loss_and_grad(x_aug, y) without dropout."""
        from ._activations import _fused_tanh

        arch = net.arch
        if arch.depth != 1 or arch.skip(0) or arch.d_out != 1 or arch.activations[0].fused is not _fused_tanh:
            return False
        if net.flat.device.type != "cpu" or not x_aug.dtype == y.dtype == net.flat.dtype:
            return False
        if any(_cpu.as_numpy(t) is None for t in (net.flat, net.grad, x_aug, y)):
            return False
        n, cols = x_aug.shape[1:]
        if n * arch.width * cols <= _cpu.BLAS_SINGLE_MAX:
            return False
        return block_width(n, cols, x_aug.element_size()) > 0 and _kernels() is not None

    def loss_and_grad(self) -> torch.Tensor:
        """The loss per run (R,); writes dR/dtheta into the net's gradient buffer."""
        n, m = self.n, self.m
        np.copyto(self.x_c, self.x)
        with np.errstate(over="ignore", invalid="ignore"):   # a diverging run is caught by its loss
            self._blocks(self._forward)
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
            self._blocks(self._backward)
        return torch.from_numpy(loss)

    def _blocks(self, work: Callable[[tuple, int], None]) -> None:
        """work(job, slot) for every (run, block) job, over the pool when that pays."""
        jobs = self.jobs
        threads = min(torch.get_num_threads(), len(jobs)) if self.h.size >= PARALLEL_MIN else 1
        if threads <= 1:
            for job in jobs:
                work(job, 0)
            return
        parts = _cpu._ranges(len(jobs), threads)

        def run(slot: int) -> None:
            # numpy's error state is per thread: the pool's threads do not inherit the caller's
            with np.errstate(over="ignore", invalid="ignore"):
                for job in jobs[parts[slot]]:
                    work(job, slot)

        _cpu._in_parallel([functools.partial(run, slot) for slot in range(threads)])

    def _scratch(self, slot: int, rows: int) -> tuple[np.ndarray, ...]:
        """Per-thread scratch blocks for a block of `rows` neurons: (cols, B), (n, B), (cols, B)."""
        key = (slot, rows)
        if key not in self.scratch:
            dtype = self.h.dtype
            self.scratch[key] = (np.empty((self.cols, rows), dtype), np.empty((self.n, rows), dtype),
                                 np.empty((self.cols, rows), dtype))
        return self.scratch[key]

    def _forward(self, job: tuple, slot: int) -> None:
        w, x, h, a, f_part = job[:5]
        wt, z, _ = self._scratch(slot, h.shape[1])
        # z in a scratch block that stays in L2: the stored h is written once, by tanh, slow
        # enough per element to hide that memory traffic (z written into h: 7.0 -> 5.6 ms)
        self.pre(w, x, wt, z)
        np.tanh(z, out=h)
        self.fsum(a, h, f_part)

    def _backward(self, job: tuple, slot: int) -> None:
        _, _, h, a, _, delta, ga, xd_t, gw = job
        _, s, gt = self._scratch(slot, h.shape[1])
        self.project(delta, h, ga)
        self.slope(h, s, self.ones)
        np.matmul(xd_t, s, out=gt)
        self.scale(gt, a, gw)


def block_width(n: int, cols: int, itemsize: int) -> int:
    """Neurons per block: (n, B) activations of about BLOCK_BYTES, the product (cols, n) @ (n, B)
    on one OpenBLAS thread; 0 where no block of at least 16 neurons fits."""
    width = min(BLOCK_BYTES // (n * itemsize), _cpu.BLAS_SINGLE_MAX // (n * cols))
    width -= width % 16
    return width if width >= 16 else 0
