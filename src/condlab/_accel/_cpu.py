"""What the CPU fast paths share: numpy views of torch memory, and one persistent thread pool.

The training steps of this package (``_cpu_step``, ``_wide_step``) compute on numpy views of
torch's own buffers (``Tensor.numpy()``, no copy): numpy hands small products to OpenBLAS with
less overhead than ``torch.bmm``. Which tanh is faster, numpy's SIMD ``np.tanh`` or
``torch.tanh``, depends on the CPU -- numpy's float64 one is fast only with AVX-512: 1.9 against
torch's ~3 ns per element on the AVX-512 machine this was first tuned on, 14-18 against 6.5-8.7
ns on an AMD EPYC with AVX2 only (issue 24; torch 2.13 CPU build, numpy 2.4) -- so the steps
measure it (``_kernels``). numpy's tanh is within 1.31 ulp (float32) and 1.09 ulp (float64) of
the correctly rounded value, torch's within 0.51 / 0.74 ulp (measured against mpmath): the steps
agree with the reference within rounding, not bit for bit (tests/test_accel_parity.py).

With ``torch.get_num_threads() > 1`` a step splits its work over that many threads of one
persistent pool (``in_parallel``; numpy's ufuncs and BLAS calls and numba's nogil kernels
release the GIL). Each part's torch calls run on its own thread, one torch thread each (torch's
thread count is per thread: the pool's threads are set to 1 when made, the caller's for its part):
torch 2.13's CPU tanh opens an OpenMP team from ~128 elements on, whose worker then spins on
the core that the pool's other part needs (measured: tanh on 1,024 float32 values at 2 torch
threads, 1.8-1.95 s of CPU per second of wall; cut into blocks, as the step did before, the
same). On a machine with more busy threads than cores a hand-off to the pool waits
for a core: at load ~8 on 2 cores a two-thread step took longer than a one-thread step (so did
torch's own two-thread operations); ``torch.set_num_threads(1)`` or ``OMP_NUM_THREADS=1`` avoids
both.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
import torch

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


def split_ranges(size: int, parts: int) -> list[slice]:
    """`parts` contiguous, near-equal slices covering range(size)."""
    bounds = [size * p // parts for p in range(parts + 1)]
    return [slice(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def in_parallel(tasks: list[Callable[[], object]]) -> None:
    """Run the tasks on the pool, the first on the calling thread; return when all are done.
    Every task's torch calls run on its own thread (one torch thread each)."""
    pool = _get_pool(len(tasks) - 1)
    futures = [pool.submit(task) for task in tasks[1:]]
    try:
        with one_torch_thread():
            tasks[0]()
    finally:
        for future in futures:
            future.result()


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Inside the block this thread's torch calls run on it, with no OpenMP team (torch's thread
    count is an OpenMP setting of the calling thread: other threads keep theirs)."""
    before = torch.get_num_threads()   # (also this thread's first torch call, if it is one)
    if before > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if before > 1:
            torch.set_num_threads(before)


def _pool_thread_start() -> None:
    """A pool thread's torch calls run on it, with no OpenMP team of their own."""
    # torch sets a thread's count from the last one set anywhere at the thread's first torch
    # call: made first here, so that it does not later undo the 1 set next
    torch.get_num_threads()
    torch.set_num_threads(1)


def _get_pool(workers: int) -> ThreadPoolExecutor:
    """The persistent pool, with at least `workers` threads, made in this process."""
    global _pool, _pool_key
    with _pool_lock:
        if _pool is None or _pool_key[0] < workers or _pool_key[1] != os.getpid():
            if _pool is not None and _pool_key[1] == os.getpid():
                _pool.shutdown(wait=True)
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="condlab-cpu",
                                       initializer=_pool_thread_start)
            _pool_key = (workers, os.getpid())
        return _pool
