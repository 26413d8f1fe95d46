"""Fast path "compiled mixture EM": the line counter's EM as one compiled loop per layer (C).

The reference is ``em`` of condlab.analysis's mixture module (docs/analysis.md, "Counting
orientations"), which runs EM steps on a stack of layers in numpy; this runs the same steps, in
the same order, one layer at a time in C (``_em.c``, the extension module ``condlab._accel._em``),
each layer to its stop. A step of a 50-row layer costs ~25 us in numpy (about a hundred calls
on arrays of a few hundred numbers) and ~9 in C; its import costs ~1 ms, where numba's import
and cached kernel cost ~0.6 s per fresh process (measured at stop 21: more than it saved on a
sweep batch).

Registered for float64 stacks (``numpy.ndarray``) of at most MAX_INPUTS inputs: the C loops
take the dot products one by one, which numpy's BLAS products beat on wide inputs. The module
is built when condlab is installed (``pip install``) and is optional: without a C compiler the
install goes on without it, ``make`` returns None and the reference computes. Parity:
tests/test_accel_parity.py; gain: benchmarks/bench_counts.py (docs/speed.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._registry import FastPath, register

try:
    from . import _em
except ImportError:  # built without a C compiler: the reference runs
    _em = None

ABI_VERSION = 1  # _em.c's; a stale in-place build of another version is not used
ROWS_PER_CALL = 1 << 16  # rows x components per call: at most 300 EM steps over them, about a second
MAX_INPUTS = 24  # k above this: numpy's BLAS products catch up (docs/architecture.md, "Fast paths")


@dataclass(frozen=True)
class CompiledEM:
    """``em`` of the mixture module, for the stack it was made for; `constants`: (TOL, MAX_ITER,
    NEWTON_STEPS, LOG_S_MIN, lower and upper bound of v = log 1/s², cos MIN_LINE_DEG)."""

    constants: tuple

    def __call__(self, U, UT, w, mu, log_s, log_pi, k, layers, n_min, prev, steps, until=0) -> np.ndarray:
        """Run every listed layer to its stop; returns the layers still moving: none.

        Called on groups of layers of at most ROWS_PER_CALL rows x components, so that Ctrl-C
        (served between calls, not inside one) waits at most for one wide layer's EM."""
        layers = np.ascontiguousarray(layers, dtype=np.int64)
        B, n, _ = U.shape
        K = mu.shape[1]
        w, n_min = np.ascontiguousarray(w, dtype=np.float64), np.ascontiguousarray(n_min, dtype=np.int64)
        per_call = max(1, ROWS_PER_CALL // (n * K))
        for start in range(0, len(layers), per_call):
            _em.em(UT, w, mu, log_s, log_pi, layers[start:start + per_call], n_min, prev, steps, B, n, k, K,
                   *self.constants)
        return layers[:0]


def _contiguous(a: np.ndarray, dtype, writable: bool = True) -> bool:
    return (isinstance(a, np.ndarray) and a.dtype == dtype and a.flags.c_contiguous
            and (a.flags.writeable or not writable))


def make(UT, mu, log_s, log_pi, prev, steps, constants) -> CompiledEM | None:
    """The compiled EM for the stack of unit rows UT (B, k, n), or None: the module not built (or
    stale), k > MAX_INPUTS, or arrays not contiguous float64 (int64 steps) to update in place."""
    if _em is None or getattr(_em, "ABI_VERSION", None) != ABI_VERSION:
        return None
    if UT.ndim != 3 or UT.shape[1] > MAX_INPUTS or not 1 <= mu.shape[1] <= 64:
        return None
    if not (_contiguous(UT, np.float64, writable=False) and _contiguous(steps, np.int64)
            and all(_contiguous(a, np.float64) for a in (mu, log_s, log_pi, prev))):
        return None
    return CompiledEM(tuple(constants))


register(FastPath("compiled mixture EM", "mixture EM", (np.ndarray,), make, "benchmarks/bench_counts.py"))
