"""The training step of a WIDE one-hidden-layer tanh network on CPU, in cache-sized blocks of neurons.

``BatchedNet.loss_and_grad`` computes the loss and gradient of eq. (3) with the architecture's
pass (``condlab._arch``): at n = 80 points and m = 10^5 neurons that pass makes seven or eight
full sweeps over (n, m) arrays (z, h, slope, products), each 32 MB in float32, far past the
caches. This step splits the m neurons into blocks of B (chosen from n and the dtype only, so
that one block's (n, B) activations stay in L2) and makes two passes over the blocks:

1. per block: ``z = (x, 1) W_blk^T`` (compiled, numba), ``h = tanh(z)`` (numpy's SIMD tanh, in
   place, into a stored (n, m) activation buffer) and the block's part of ``f = h a`` (eq. 1);
2. with ``delta = (f - y) / n``: per block ``dR/da_blk = delta^T h``,
   ``s = 1 - h^2`` (into a small scratch block), ``dR/dW_blk = a_blk * (s^T (x delta))`` (the
   product through BLAS, kept under ``condlab._cpu.BLAS_SINGLE_MAX`` so OpenBLAS runs it on
   one thread) -- the same fold as ``Architecture.batched_backward`` for d_out = 1.

Storing h costs one write and one read of n*m values; computing it again in pass 2 costs one
more tanh and product: storing measured faster at n = 80 (12.7 vs 17 ms per step, float32,
one thread). With ``torch.get_num_threads() > 1`` the blocks (of all runs) are split into
contiguous ranges over condlab._cpu's pool (numba kernels and numpy release the GIL). Every
block is computed the same way whatever the thread count, and f's per-block partial sums are
added in a fixed order, so results are bit-identical at any thread count (tested).

Where it applies (``WideStep.applies``): CPU, float32/float64, one hidden layer without skip,
the built-in ``tanh``, d_out = 1, with or without output bias, any number of runs R and of
points n, n*m*(d+1) above ``BLAS_SINGLE_MAX`` (the regime ``_cpu_step.OneLayerStep`` refuses),
numba importable. Not with dropout: a step with dropout takes the architecture's
pass (``BatchedNet.loss_and_grad`` falls back). Results agree with the architecture's pass
within rounding (summation order; tests/test_wide_step.py: 1e-12 relative in float64).
"""

from __future__ import annotations

import functools
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
    jit = numba.njit(nogil=True, fastmath=_FASTMATH, cache=True, error_model="numpy")
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
    """out (n,) <- h (n, B) @ a (B,)."""
    for i in range(h.shape[0]):
        hi = h[i]
        acc = hi[0] * a[0]
        for j in range(1, hi.shape[0]):
            acc += hi[j] * a[j]
        out[i] = acc


def _project(d, h, out):  # pragma: no cover - compiled
    """out (B,) <- d (n,) @ h (n, B)."""
    h0, d0 = h[0], d[0]
    for j in range(out.shape[0]):
        out[j] = d0 * h0[j]
    for i in range(1, h.shape[0]):
        hi, di = h[i], d[i]
        for j in range(out.shape[0]):
            out[j] += di * hi[j]


def _slope(h, s, one):  # pragma: no cover - compiled
    """s <- 1 - h^2 (n, B): tanh' from tanh, in a second kernel (measured faster than fused with
    _project: 2.1 vs 2.6 ms per step). `one` has the arrays' dtype: a literal 1 would make numba
    compute in float64."""
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
    """loss_and_grad of a wide one-hidden-layer tanh BatchedNet on fixed data, block by block."""

    def __init__(self, net: BatchedNet, x_aug: torch.Tensor, y: torch.Tensor):
        self.kernels = _kernels()
        self.pre = _pre_kernel(x_aug.shape[2])
        self.runs, self.n, cols = x_aug.shape
        self.m, self.bias = net.arch.width, net.arch.output_bias
        self.tensors = (x_aug, y)   # keep the data (and their numpy views' memory) alive
        view = _cpu.as_numpy
        self.x, self.y = view(x_aug), view(y)
        self.w, self.a = view(net.weights[0]), view(net.weights[1])
        self.gw, self.ga = view(net.grads[0]), view(net.grads[1])
        dtype = self.w.dtype
        self.one = dtype.type(1)
        width = block_width(self.n, cols, dtype.itemsize)
        self.blocks = [slice(lo, min(lo + width, self.m)) for lo in range(0, self.m, width)]
        # h of run r, block k: a contiguous (n, B_k) piece of one flat buffer
        self.h_flat = np.empty(self.runs * self.m * self.n, dtype)
        per_run = self.m * self.n
        self.h = [[self.h_flat[r * per_run + b.start * self.n: r * per_run + b.stop * self.n]
                   .reshape(self.n, b.stop - b.start) for b in self.blocks] for r in range(self.runs)]
        self.f_parts = np.empty((self.runs, len(self.blocks), self.n), dtype)
        self.width, self.cols = width, cols
        self.scratch: list[tuple[np.ndarray, ...]] = []

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
        self.x_c = np.ascontiguousarray(self.x)   # contiguous rows: the kernels' vectorized layout
        with np.errstate(over="ignore", invalid="ignore"):   # a diverging run is caught by its loss
            self._blocks(self._forward)
            f = self.f_parts.sum(axis=1)                      # fixed order: bits independent of threads
            if self.bias:
                f += self.a[:, 0, m:]
            residual = np.subtract(f, self.y[:, :, 0], out=f)
            loss = np.square(residual).sum(axis=1) / (2 * n)
            self.delta = np.divide(residual, n, out=residual)               # dR/df (R, n)
            # (x delta)^T, (R, cols, n): the fold of Architecture.batched_backward
            self.xd_t = np.ascontiguousarray((self.x * self.delta[:, :, None]).transpose(0, 2, 1))
            if self.bias:
                self.ga[:, 0, m] = self.delta.sum(axis=1)
            self._blocks(self._backward)
        return torch.from_numpy(loss)

    def _blocks(self, work) -> None:
        """work(run, block, slot) for every (run, block), over the pool when that pays."""
        jobs = [(r, k) for r in range(self.runs) for k in range(len(self.blocks))]
        large = self.runs * self.m * self.n >= PARALLEL_MIN
        threads = min(torch.get_num_threads(), len(jobs)) if large else 1
        while len(self.scratch) < threads:   # one set of scratch blocks per thread, flat: reshaped per block
            size = max(self.cols, self.n) * self.width
            self.scratch.append(tuple(np.empty(size, self.w.dtype) for _ in range(3)))
        parts = _cpu._ranges(len(jobs), threads)

        def run(slot: int) -> None:
            for r, k in jobs[parts[slot]]:
                work(r, k, self.scratch[slot])

        if threads <= 1:
            run(0)
        else:
            _cpu._in_parallel([functools.partial(run, slot) for slot in range(threads)])

    def _forward(self, r: int, k: int, scratch: tuple) -> None:
        b, h, kern = self.blocks[k], self.h[r][k], self.kernels
        rows = b.stop - b.start
        wt = scratch[0][:self.cols * rows].reshape(self.cols, rows)
        z = scratch[1][:self.n * rows].reshape(self.n, rows)
        # z in a scratch block that stays in L2: the stored h is written once, by tanh, which is
        # slow enough per element to hide that memory traffic (z written into h: 7.0 -> ? ms)
        self.pre(self.w[r, b], self.x_c[r], wt, z)
        np.tanh(z, out=h)
        kern["fsum"](self.a[r, 0, b], h, self.f_parts[r, k])

    def _backward(self, r: int, k: int, scratch: tuple) -> None:
        b, h, kern = self.blocks[k], self.h[r][k], self.kernels
        rows = b.stop - b.start
        kern["project"](self.delta[r], h, self.ga[r, 0, b])
        s = scratch[1][:self.n * rows].reshape(self.n, rows)
        kern["slope"](h, s, self.one)
        gt = scratch[2][:self.cols * rows].reshape(self.cols, rows)
        np.matmul(self.xd_t[r], s, out=gt)
        kern["scale"](gt, self.a[r, 0, b], self.gw[r, b])


def block_width(n: int, cols: int, itemsize: int) -> int:
    """Neurons per block: (n, B) activations of about BLOCK_BYTES, the product (cols, n) @ (n, B)
    on one OpenBLAS thread; 0 where no block of at least 16 neurons fits."""
    width = min(BLOCK_BYTES // (n * itemsize), _cpu.BLAS_SINGLE_MAX // (n * cols))
    width -= width % 16
    return width if width >= 16 else 0
