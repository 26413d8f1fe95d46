"""CPU fast paths of the training hot loop: numpy's SIMD ufuncs and BLAS on torch's own memory.

On the machine measured (AMD EPYC, AVX-512; torch 2.13 CPU build, numpy 2.4), ``torch.tanh`` runs at
about 3 ns per element -- scalar speed -- while numpy's ``np.tanh`` (SIMD, dispatched on the
CPU's features) takes 0.4 ns in float32 and 1.9 ns in float64 on the same memory, reached
through ``Tensor.numpy()`` without a copy. At the Fig. 3 batch (64 runs x 80 points x 50
neurons) tanh was half of a training step. So the trainer's tanh goes through numpy when a
tensor is on the CPU in float32/float64 (anything else: torch, unchanged). Measured at the
same batch and one thread (us; torch / numpy): tanh 652 / 93 (f32), 1260 / 476 (f64);
sigmoid 106 / 207 and 361 / 465 (numpy via exp): torch stays for sigmoid.

Numerics (measured on a grid of tiny 1e-30..1e-3, moderate and saturated values against
mpmath): numpy's tanh is within 1.31 ulp (float32) and 1.09 ulp (float64) of the correctly
rounded value, torch's within 0.51 / 0.74 ulp; tests/test_cpu.py holds numpy's to 1.5 ulp,
and strided views. So trainer results differ from a torch-autograd computation of the same
network within rounding, not bit for bit; ``Activation.fn``/``grad`` and whatever autograd
differentiates keep ``torch.tanh``. Splitting the work over threads changes no bit (element
ranges, each element computed the same way; runs or row blocks for products; tested).

``np.tanh`` is single-threaded: with ``torch.get_num_threads() > 1`` and a large tensor the
elements are split over that many threads of a small persistent pool (ufuncs release the
GIL); below ``PARALLEL_MIN`` elements, or on one thread, no pool is touched. On a machine
with more busy threads than cores a hand-off to the pool waits for a core: at load ~8 on 2
cores a two-thread step took longer than a one-thread step (so did torch's own two-thread
operations); ``torch.set_num_threads(1)`` or ``OMP_NUM_THREADS=1`` avoids both.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import torch

# Work per thread below which splitting costs more than it saves: elements for ufuncs,
# multiply-adds for products. Measured at the Fig. 3 batch (256,000 elements), 2 threads: a
# step that split its tanh and products over the pool took 1.4x the one-thread step (the
# hand-offs, and perhaps torch's OpenMP threads spinning after their own parallel regions,
# cost more than the halved work), so only the wide layer's n*m ~ 1e7 values are split.
# (The one-hidden-layer step splits whole, by runs, with one hand-off: condlab._accel._cpu_step.)
PARALLEL_MIN = 1 << 20
PARALLEL_MIN_FLOPS = 1 << 24
# OpenBLAS runs a product on one thread up to m*n*k = 65536 * GEMM_MULTITHREAD_THRESHOLD (4)
BLAS_SINGLE_MAX = 1 << 18
_pool: ThreadPoolExecutor | None = None
_pool_key = (0, 0)  # (workers, pid): a forked child (Ray, multiprocessing) has no pool threads
_pool_lock = threading.Lock()


def as_numpy(t: torch.Tensor) -> np.ndarray | None:
    """A numpy view sharing `t`'s memory, or None when the fast path does not apply.

    Only CPU float32/float64 strided tensors without autograd history qualify.
    """
    if not t.is_cpu:
        return None
    try:   # Tensor.numpy refuses what numpy cannot view (autograd, bfloat16, sparse, lazy negation)
        array = t.numpy()
    except (RuntimeError, TypeError):
        return None
    return array if array.dtype.char in "fd" else None   # float32, float64


def tanh_into(t: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out <- tanh(t) (same shape; may be strided views): numpy's SIMD tanh on CPU, else torch's."""
    arrays = _same_layout(t, out)
    if arrays is None:
        return torch.tanh(t, out=out)
    _elementwise(_tanh, arrays)
    return out


def tanh_slope_into(t: torch.Tensor, value: torch.Tensor, slope: torch.Tensor) -> bool:
    """value <- tanh(t), slope <- 1 - tanh(t)^2 in numpy on CPU (in one sweep per thread); False
    where it does not apply (the caller uses torch).

    All in numpy so that split work does not interleave with torch's OpenMP threads, which
    spin for a while after each parallel region.
    """
    arrays = _same_layout(t, value, slope)
    if arrays is None:
        return False
    _elementwise(_tanh_slope, arrays)
    return True


def _tanh(t: np.ndarray, value: np.ndarray) -> None:
    np.tanh(t, out=value)


def _tanh_slope(t: np.ndarray, value: np.ndarray, slope: np.ndarray) -> None:
    np.tanh(t, out=value)
    np.multiply(value, value, out=slope)
    np.subtract(1, slope, out=slope)


def _same_layout(*tensors: torch.Tensor) -> list[np.ndarray] | None:
    """numpy views of tensors of one shape and dtype, or None when one has none."""
    arrays = [as_numpy(t) for t in tensors]
    if any(a is None or a.dtype != arrays[0].dtype or a.shape != arrays[0].shape for a in arrays):
        return None
    return arrays


def _elementwise(kernel: Callable[..., None], arrays: list[np.ndarray]) -> None:
    """kernel(*arrays), elementwise, split over torch.get_num_threads() threads when that pays."""
    threads = min(torch.get_num_threads(), arrays[0].size // PARALLEL_MIN)
    if threads <= 1:
        kernel(*arrays)
        return
    if all(a.flags.c_contiguous for a in arrays):
        arrays = [a.reshape(-1) for a in arrays]
    else:  # ranges of the longest axis
        axis = int(np.argmax(arrays[0].shape))
        arrays = [np.moveaxis(a, axis, 0) for a in arrays]
    parts = split_ranges(len(arrays[0]), threads)
    in_parallel([partial(kernel, *(a[part] for a in arrays)) for part in parts])


def bmm_into(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out <- a @ b for stacks (R, i, k) @ (R, k, j) -> (R, i, j): numpy's BLAS on CPU, else torch.bmm."""
    if not numpy_bmm(a, b, out):
        torch.bmm(a, b, out=out)
    return out


def numpy_bmm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
    """out <- a @ b through numpy's BLAS when it applies (CPU float32/float64); False otherwise.

    numpy hands each product to OpenBLAS with less overhead than torch.bmm: at the Fig. 3
    batch (64 x (80x6 @ 6x50) and the gradients), one thread, 1.3-3x faster, most in float64
    and for the first layer's weight gradient (g^T x). OpenBLAS would spread a product above
    BLAS_SINGLE_MAX multiply-adds over its own threads, ignoring torch.set_num_threads; such
    products are cut into row blocks below it (the wide layer's g^T x, (m x n) @ (n x d+1):
    2-4x torch's bmm at m = 1e5), or left to torch when their output is wider than tall
    (measured: no gain). Layouts numpy would not pass to BLAS (no unit stride) stay with torch.
    """
    x, y, z = as_numpy(a), as_numpy(b), as_numpy(out)
    if x is None or y is None or z is None or not (_blas_ok(x) and _blas_ok(y) and _blas_ok(z)):
        return False
    runs, i, k = x.shape
    j = y.shape[2]
    if i * j * k <= BLAS_SINGLE_MAX:   # the common case: each product on one thread as it is
        threads = min(torch.get_num_threads(), runs, runs * i * j * k // PARALLEL_MIN_FLOPS)
        if threads <= 1:
            with np.errstate(over="ignore", invalid="ignore"):   # a diverging run is caught by its loss
                np.matmul(x, y, out=z)
            return True
    rows = min(i, BLAS_SINGLE_MAX // (j * k))
    if rows < i and (rows < 1 or i < j):
        return False
    arrays = (x, y, z)
    blocks = [slice(lo, min(lo + rows, i)) for lo in range(0, i, rows)]
    threads = min(torch.get_num_threads(), runs * len(blocks), runs * i * j * k // PARALLEL_MIN_FLOPS)
    with np.errstate(over="ignore", invalid="ignore"):
        if threads <= 1:
            _products(*arrays, slice(None), blocks)
        elif len(blocks) == 1:   # many small products: ranges of runs
            in_parallel([partial(_products, *arrays, part, blocks) for part in split_ranges(runs, threads)])
        else:                    # a few large ones: ranges of row blocks
            in_parallel([partial(_products, *arrays, slice(None), blocks[part])
                          for part in split_ranges(len(blocks), threads)])
    return True


def _products(a: np.ndarray, b: np.ndarray, out: np.ndarray, runs: slice, blocks: list[slice]) -> None:
    for rows in blocks:
        np.matmul(a[runs, rows], b[runs], out=out[runs, rows])


def _blas_ok(a: np.ndarray) -> bool:
    """Whether each matrix of a stack has a unit stride, so numpy calls BLAS (not its slow loop)."""
    unit = a.itemsize
    return a.strides[-1] == unit or a.strides[-2] == unit


def split_ranges(size: int, parts: int) -> list[slice]:
    """`parts` contiguous, near-equal slices covering range(size)."""
    bounds = [size * p // parts for p in range(parts + 1)]
    return [slice(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def torch_in_ranges(fn: Callable[[slice], object], size: int, split_min: int) -> None:
    """fn(part) for `part` ranges covering range(size), torch on ONE thread throughout.

    For torch's elementwise optimizer steps on a flat buffer. An OpenMP region of torch's
    leaves libgomp's worker threads spinning on the cores that condlab's own pool needs for
    the next step (the split and wide steps), so with several threads no region is opened:
    below `split_min` elements one range on this thread, above it one range per thread on
    condlab's pool. Every element is computed the same way, so the bits do not depend on it.
    """
    threads = torch.get_num_threads()
    if threads == 1:
        fn(slice(0, size))
        return
    torch.set_num_threads(1)
    try:
        if size <= split_min:
            fn(slice(0, size))
        else:
            in_parallel([partial(fn, part) for part in split_ranges(size, threads)])
    finally:
        torch.set_num_threads(threads)


def in_parallel(tasks: list[Callable[[], object]]) -> None:
    """Run the tasks on the pool, the first on the calling thread; return when all are done."""
    pool = _get_pool(len(tasks) - 1)
    futures = [pool.submit(task) for task in tasks[1:]]
    try:
        tasks[0]()
    finally:
        for future in futures:
            future.result()


def _get_pool(workers: int) -> ThreadPoolExecutor:
    """The persistent pool, with at least `workers` threads, made in this process."""
    global _pool, _pool_key
    with _pool_lock:
        if _pool is None or _pool_key[0] < workers or _pool_key[1] != os.getpid():
            if _pool is not None and _pool_key[1] == os.getpid():
                _pool.shutdown(wait=True)
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="condlab-cpu")
            _pool_key = (workers, os.getpid())
        return _pool
