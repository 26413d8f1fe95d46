"""Elementwise kernels with alternatives, chosen by measurement on the CPU they run on.

A fast path that applies an elementwise function to its own numpy buffers can call numpy's
ufunc or torch's kernel on a view of the same memory; which is faster depends on the CPU, not
on the code. numpy's float64 ``tanh`` is fast with AVX-512 (1.9 ns per element against
torch's ~3 ns on the AVX-512 machine this step was first tuned on; 2.7-3.7 against 2.4-3.7 on
an Intel Xeon with AVX-512) and slow without it (14-18 ns against torch's 6.5-8.7 ns on an AMD
EPYC with AVX2 only: issue 24); so no choice written into the code holds on every machine.

So each ``Kernel`` has a *reference* implementation -- torch's, the function the reference
computation (``condlab.training``'s architecture pass) itself calls -- and a *fast* one, and
``choose`` picks one per kernel and dtype at its first use in a process, by timing both on a
probe of ``PROBE`` fixed values in that dtype (a measured CPU check): ``ROUNDS`` alternating
rounds, the fastest of each, thread CPU time (other processes on the machine do not enter
it), torch held to one thread for those few milliseconds. The fast one is taken only if it
measures at least ``FAST_BAR`` times faster, the house bar for a fast path
(docs/architecture.md); the choice is cached for the process and dtype.

Why a fixed probe on one thread, not the caller's buffer at the caller's thread count: the
answer must depend on the machine only, or a run trained at two threads and resumed at one, or
a batch trained in a sweep and again in a test, would take different kernels and differ in the
last bits (on a small buffer the calls' fixed costs, a few microseconds, decide, and they can
put the two near the bar: tests/test_checkpoint.py's resumed runs differed so); and
per-element cost on one core is what the choice is about (with two torch threads on the
shared 2-core development machine at load ~8, ``torch.tanh`` of 4096-65536 float64 elements
took 5-300 ns per element, its OpenMP team waiting for a core, where numpy's took 2.5-3.7: a
measure of the load, not of the kernels). Two processes still choose differently where the
two measure within noise of the bar; ``CONDLAB_TANH=torch`` (or ``numpy``) fixes the choice
for every process.

``forced`` fixes the choice inside a block (the parity tests run both alternatives; the
benchmarks compare them); ``CONDLAB_REFERENCE=1`` switches the fast paths that call kernels off
altogether (``_registry``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

FAST_BAR = 1.3   # the fast kernel must be this much faster to be taken (the house bar)
ROUNDS = 5       # alternating timing rounds; the fastest round of each counts
PROBE = 1 << 16  # values timed: 0.3-1.2 ms a call, well above the calls' fixed costs

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


def choose(kernel: Kernel, dtype: np.dtype) -> str:
    """Which implementation of `kernel` ("reference" or "fast") serves `dtype` in this process:
    fixed by ``CONDLAB_<NAME>`` (``CONDLAB_TANH=torch|numpy``) or ``forced``, else calibrated on
    the first call for the dtype."""
    if kernel.name in _forced:
        return _forced[kernel.name]
    fixed = os.environ.get(f"CONDLAB_{kernel.name.upper()}", "")
    if fixed:
        if fixed not in ("torch", kernel.fast_is):
            raise ValueError(f"CONDLAB_{kernel.name.upper()}={fixed!r}: 'torch' or '{kernel.fast_is}'")
        return "reference" if fixed == "torch" else "fast"
    key = (kernel.name, np.dtype(dtype).str)
    with _lock:   # one calibration per key, even if several threads ask at once
        if key not in _chosen:
            ref, fast = _calibrate(kernel, np.dtype(dtype))
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


def _calibrate(kernel: Kernel, dtype: np.dtype) -> tuple[float, float]:
    """(reference, fast) thread CPU nanoseconds per element on one thread, the fastest of ROUNDS
    rounds each (after one untimed call of each: first-call costs are not the kernel's speed),
    on PROBE values spread over [-4, 4] (where a hidden unit's z mostly lies)."""
    source = np.linspace(-4.0, 4.0, PROBE).astype(dtype)
    scratch = np.empty_like(source)
    best = {"reference": float("inf"), "fast": float("inf")}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # the module docstring says why; restored below
    try:
        with np.errstate(all="ignore"):
            for which in best:
                getattr(kernel, which)(source, scratch)
            for _ in range(ROUNDS):
                for which in best:
                    start = time.thread_time_ns()
                    getattr(kernel, which)(source, scratch)
                    best[which] = min(best[which], time.thread_time_ns() - start)
    finally:
        torch.set_num_threads(threads)
    return best["reference"] / PROBE, best["fast"] / PROBE
