"""Elementwise kernels with alternatives, chosen by measurement on the CPU they run on.

A fast path that applies an elementwise function to its own numpy buffers can call numpy's
ufunc or torch's kernel on a view of the same memory; which is faster depends on the CPU, not
on the code. numpy's float64 ``tanh`` is fast with AVX-512 (1.9 ns per element against
torch's ~3 ns on the AVX-512 machine this step was first tuned on; 2.7-3.7 against 2.4-3.7 on
an Intel Xeon with AVX-512) and slow without it (14-18 ns against torch's 6.5-8.7 ns on an AMD
EPYC with AVX2 only: issue 24); so no choice written into the code holds on every machine.

So each ``Kernel`` has a *reference* implementation -- torch's, the function the reference
computation (``condlab.training``'s architecture pass) itself calls -- and a *fast* one, and
``choose`` picks one per kernel and dtype at its first use in a process, by running both on the
caller's own buffer the way the caller would run them: torch's on torch's threads, the fast one
on `threads` threads of condlab's pool (the caller's split). ``ROUNDS`` alternating rounds, the
fastest of each; thread CPU time where everything runs on the calling thread (other processes
on the machine do not enter it), else wall time. The fast one is taken only if it measures at
least ``FAST_BAR`` times faster, the house bar for a fast path (docs/architecture.md); the
choice is cached for the process and dtype, so a run computes with the same kernel whatever
the thread count of its step. A calibration costs a few milliseconds, once.

Why the caller's way and not one thread each: with two torch threads on the shared 2-core
development machine (load ~8), ``torch.tanh`` of 4096-65536 float64 elements took 5-300 ns
per element (its OpenMP team waiting for a core) where numpy's took 2.5-3.7 ns.

``forced`` fixes the choice inside a block (the parity tests run both alternatives; the
benchmarks compare them); ``CONDLAB_REFERENCE=1`` switches the fast paths that call kernels off
altogether (``_registry``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

FAST_BAR = 1.3   # the fast kernel must be this much faster to be taken (the house bar)
ROUNDS = 5       # alternating timing rounds; the fastest round of each counts

Apply = Callable[[np.ndarray, np.ndarray], object]   # (source, out): out = f(source); may alias


@dataclass(frozen=True)
class Kernel:
    """An elementwise function with two implementations over numpy arrays."""

    name: str
    reference: Apply   # torch's: what the reference computation calls
    fast: Apply        # the alternative (numpy's ufunc)
    fast_is: str       # who provides the alternative, for reports ("numpy")


def _torch_tanh(source: np.ndarray, out: np.ndarray) -> None:
    torch.tanh(torch.from_numpy(source), out=torch.from_numpy(out))


def _numpy_tanh(source: np.ndarray, out: np.ndarray) -> None:
    np.tanh(source, out=out)


TANH = Kernel("tanh", _torch_tanh, _numpy_tanh, "numpy")
KERNELS = {k.name: k for k in (TANH,)}

_chosen: dict[tuple[str, str], str] = {}     # (kernel, dtype) -> "reference" | "fast"
_measured: dict[tuple[str, str], tuple[float, float]] = {}   # -> (reference, fast) ns per element
_forced: dict[str, str] = {}
_lock = threading.Lock()


def choose(kernel: Kernel, source: np.ndarray, scratch: np.ndarray, threads: int = 1) -> str:
    """Which implementation of `kernel` ("reference" or "fast") serves `source`'s dtype in this
    process: calibrated on the first call, by applying both to `source` (the caller's buffer,
    left unchanged) into `scratch` (same shape and dtype, contents overwritten), the fast one
    split over `threads` threads along the first axis as the caller would split it."""
    if kernel.name in _forced:
        return _forced[kernel.name]
    key = (kernel.name, source.dtype.str)
    with _lock:   # one calibration per key, even if several threads ask at once
        if key not in _chosen:
            ref, fast = _calibrate(kernel, source, scratch, threads)
            _measured[key] = (ref, fast)
            _chosen[key] = "fast" if ref >= FAST_BAR * fast else "reference"
    return _chosen[key]


def choices() -> dict[str, str]:
    """What was chosen in this process, e.g. {'tanh float64': 'reference (torch 7.1 vs numpy
    15.9 ns/element)'}: the benchmarks print it with their figures."""
    out = {}
    for (name, dtype), which in sorted(_chosen.items()):
        ref, fast = _measured[name, dtype]
        out[f"{name} {np.dtype(dtype).name}"] = (f"{which} (torch {ref:.2f} vs {KERNELS[name].fast_is} "
                                                 f"{fast:.2f} ns/element)")
    return out


@contextmanager
def forced(name: str, which: str) -> Iterator[None]:
    """Inside the block `name`'s kernel is `which` ("reference" or "fast"), without calibration."""
    if which not in ("reference", "fast") or name not in KERNELS:
        raise ValueError(f"forced({name!r}, {which!r}): a kernel of {sorted(KERNELS)}, 'reference' or 'fast'")
    before = _forced.get(name)
    _forced[name] = which
    try:
        yield
    finally:
        if before is None:
            del _forced[name]
        else:
            _forced[name] = before


def _calibrate(kernel: Kernel, source: np.ndarray, scratch: np.ndarray, threads: int) -> tuple[float, float]:
    """(reference, fast) nanoseconds per element, the fastest of ROUNDS rounds each (after one
    untimed call of each: first-call costs are not the kernel's speed)."""
    from ._cpu import in_parallel, split_ranges

    threads = max(1, min(threads, source.shape[0] if source.ndim else 1))
    parts = split_ranges(source.shape[0], threads) if threads > 1 else []
    run = {"reference": lambda: kernel.reference(source, scratch),
           "fast": (lambda: in_parallel([lambda p=p: kernel.fast(source[p], scratch[p]) for p in parts]))
           if parts else (lambda: kernel.fast(source, scratch))}
    # all on this thread: its CPU time; else the wall time (the other threads' work is the gain)
    clock = time.thread_time_ns if threads == 1 and torch.get_num_threads() == 1 else time.perf_counter_ns
    best = dict.fromkeys(run, float("inf"))
    with np.errstate(all="ignore"):   # the buffer may hold anything (a diverged run)
        for call in run.values():
            call()
        for _ in range(ROUNDS):
            for which, call in run.items():
                start = clock()
                call()
                best[which] = min(best[which], clock() - start)
    size = max(source.size, 1)
    return best["reference"] / size, best["fast"] / size
