"""Fast path "phase step": the phase trainer's ReLU step as one compiled pass over the neurons (numba).

Registered for the two-layer network ``TwoLayer`` (exact class) with ``torch.relu``, the
activation it hard-codes. Same arithmetic as the reference, ``condlab.phase``'s loop over
``TwoLayer.loss_grad_bound`` and its step (which trains every other activation), reorganised so
that a GD step reads and writes each neuron's six numbers (a, w, b and their accumulated
changes) once:

* For 1-D input every quantity is elementwise over neurons; only f (n,), the Gram matrix's sums and
  the Hessian bound need a reduction. The update of step t and the forward pass of step t + 1 are
  fused: while neuron k is in registers it is updated, then its new z, sigma(z) and activation
  pattern feed the next step's sums.
* Gram matrix G = (1/(n alpha^2)) [sum_k s_ki s_kj + (x~_i . x~_j) sum_k a_k^2 s'_ki s'_kj]: both
  sums are accumulated (n(n+1)/2 each; for ReLU s'_ki is 0 or 1, so the second is a masked sum).
* The residual block bound of neuron k, ||(1/n alpha) sum_i e_i s'_ki x~_i||, depends on k only
  through its activation pattern p_k (bit i: z_ki > 0): its maximum over neurons is the maximum
  over the patterns present, computed once per step from e. The pass records which patterns occur
  as the bits of one integer (2^n <= 64 bits: n <= MAX_POINTS). Same bound as the reference.
* The code is generated for each n (loops over points unrolled, branch-free selects) and compiled
  with reassociation allowed, so that the sums over neurons vectorize (SIMD): measured 3.8x faster
  than the same pass summed in order, itself 2.5-3x faster than loops over a run-time n. The sums
  over neurons are added in another order than the reference's: results agree to rounding.

Runs are independent: one kernel call advances one run by up to `chunk` steps (``ReluStep.train``
loops, so Ctrl-C and progress are served between chunks); runs of a batch go to a thread pool
(nogil).
The kernels are compiled when the step is made (``ReluStep.make``: about a second per number of
points, once per process), so that a compile failure raises there and the registry switches the
step off with one warning. Parity: tests/test_accel_parity.py; gain (benchmarks/bench_phase.py):
docs/architecture.md, "Fast paths".
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

import numba
import numpy as np
import torch

from ..phase import PhaseRun, TwoLayer
from ._registry import FastPath, register

MAX_POINTS = 6  # patterns present kept as the bits of an int64; more points: the reference step

# state vector of one run (float64): the step factor c, the previous loss, t = sum of step sizes
C, PREV, TIME = 0, 1, 2


def _pass_source(n: int) -> str:
    """Source of `_pass` for n points (n is a constant of the generated code).

    _pass(a, w, b, da, dw, db, x, es, eta, f, s2, r2) -> patterns: updates every neuron by
    -eta * grad, then accumulates the forward sums of the new weights: f_i = sum_k a_k s_ki (not yet
    / alpha), s2[i, j] = sum_k s_ki s_kj and r2[i, j] = sum_k a_k^2 s'_ki s'_kj (i <= j); returns the
    set of activation patterns present (bit p set: some neuron has pattern p). eta = 0 (with es = 0)
    is the forward pass alone.
    """
    pts = range(n)
    pairs = [(i, j) for i in pts for j in range(i, n)]
    add = " + ".join
    return "\n".join([
        "def _pass(a, w, b, da, dw, db, x, es, eta, f, s2, r2):",
        *[f"    x{i} = x[{i}]; e{i} = es[{i}]; f{i} = 0.0" for i in pts],
        *[f"    q{i}_{j} = 0.0; r{i}_{j} = 0.0" for i, j in pairs],
        "    present = 0",
        "    for k in range(a.shape[0]):",
        "        ak = a[k]; wk = w[k]; bk = b[k]",
        *[f"        z{i} = bk + x{i} * wk; o{i} = e{i} if z{i} > 0.0 else 0.0" for i in pts],
        # gradient of R: ga_k = sum_i es_i s_ki, (gw, gb)_k = a_k sum_i es_i s'_ki x~_i
        f"        ga = {add(f'e{i} * max(z{i}, 0.0)' for i in pts)}",
        f"        gw = {add(f'o{i} * x{i}' for i in pts)}",
        f"        gb = {add(f'o{i}' for i in pts)}",
        "        ua = ga * -eta; uw = (gw * ak) * -eta; ub = (gb * ak) * -eta",
        "        ak = ak + ua; wk = wk + uw; bk = bk + ub",
        "        a[k] = ak; w[k] = wk; b[k] = bk",
        "        da[k] += ua; dw[k] += uw; db[k] += ub",
        "        a2 = ak * ak",
        *[f"        u{i} = max(bk + x{i} * wk, 0.0); f{i} += u{i} * ak; m{i} = a2 if u{i} > 0.0 else 0.0"
          for i in pts],
        *[f"        q{i}_{j} += u{i} * u{j}" for i, j in pairs],
        *[f"        r{i}_{i} += m{i}" for i in pts],
        *[f"        r{i}_{j} += m{i} if u{j} > 0.0 else 0.0" for i, j in pairs if i < j],
        f"        present |= 1 << ({' | '.join(f'({1 << i} if u{i} > 0.0 else 0)' for i in pts)})",
        *[f"    f[{i}] = f{i}" for i in pts],
        *[f"    s2[{i}, {j}] = q{i}_{j}; r2[{i}, {j}] = r{i}_{j}" for i, j in pairs],
        "    return present",
    ]) + "\n"


@numba.njit(cache=True, nogil=True)
def _bound(e, x, alpha, s2, r2, present):
    """c-free step denominator: lambda_max(G) + max over present patterns of the block bound."""
    n = x.shape[0]
    scale = 1.0 / (n * alpha)
    g = np.empty((n, n))
    for i in range(n):
        for j in range(i, n):
            v = (s2[i, j] + r2[i, j] * (x[i] * x[j] + 1.0)) * (scale / alpha)
            g[i, j] = v
            g[j, i] = v
    top = np.linalg.eigvalsh(g)[-1]
    block = 0.0
    for p in range(1 << n):
        if (present >> p) & 1:
            v0 = 0.0
            v1 = 0.0
            for i in range(n):
                if (p >> i) & 1:
                    v0 += e[i] * scale * x[i]
                    v1 += e[i] * scale
            block = max(block, math.hypot(v0, v1))
    return max(top + block, 1e-300)


_ADVANCE = '''
def advance(a, w, b, da, dw, db, x, y, alpha, state, f, s2, r2, present, hist, step, max_steps, tol, chunk):
    """Advance one run from `step` (its forward sums f, s2, r2 and patterns present[0] already
    computed) by up to `chunk` steps; returns (the step reached, finished). Records loss and t of
    each step in hist (steps, 2).

    A run finishes at loss < tol, a non-finite loss or step == max_steps, as in the reference.
    """
    n = x.shape[0]
    e = np.empty(n)
    es = np.empty(n)
    end = min(step + chunk, max_steps + 1)
    while step < end:
        loss = 0.0
        for i in range(n):
            e[i] = f[i] / alpha - y[i]
            loss += e[i] * e[i]
        loss = 0.5 * (loss / n)
        hist[step, 0] = loss
        hist[step, 1] = state[TIME]
        if loss < tol or not math.isfinite(loss) or step == max_steps:
            return step, True
        if loss > state[PREV]:
            state[C] *= 0.5  # the loss rose: halve c
        state[PREV] = loss
        eta = state[C] / _bound(e, x, alpha, s2, r2, present[0])
        for i in range(n):
            es[i] = e[i] * (1.0 / (n * alpha))
        present[0] = _pass(a, w, b, da, dw, db, x, es, eta, f, s2, r2)
        state[TIME] += eta
        step += 1
    return step, False
'''


@functools.cache
def kernels(n: int) -> tuple:
    """(advance, _pass) compiled for n points: once per process and n (about a second each)."""
    if not 1 <= n <= MAX_POINTS:
        raise ValueError(f"{n} training points: the compiled step takes 1 to {MAX_POINTS}")
    space = {"np": np, "math": math, "_bound": _bound, "C": C, "PREV": PREV, "TIME": TIME}
    exec(compile(_pass_source(n), f"<condlab._accel._relu_fused._pass n={n}>", "exec"), space)
    # reassoc only: the sums over neurons may be vectorized; no other fast-math (NaN must propagate
    # to the loss, where a diverged run is detected)
    space["_pass"] = numba.njit(nogil=True, fastmath={"reassoc"})(space["_pass"])
    exec(compile(_ADVANCE, "<condlab._accel._relu_fused.advance>", "exec"), space)
    return numba.njit(nogil=True)(space["advance"]), space["_pass"]


@dataclass(frozen=True)
class ReluStep:
    """The compiled step for n points: ``advance`` (one run by up to `chunk` steps), the forward
    sums before the first step, and ``train``, which takes the place of ``condlab.phase``'s loop."""

    n: int
    advance: Callable
    _pass: Callable

    @classmethod
    def make(cls, net: TwoLayer, n: int) -> ReluStep | None:
        """The step of two-layer ReLU runs on n training points, compiled now (a probe call on two
        neurons); None for another activation or more than MAX_POINTS points."""
        if net.act[0] is not torch.relu or not 1 <= n <= MAX_POINTS:
            return None
        step = cls(n, *kernels(n))
        weights = [np.zeros(2) for _ in range(6)]
        x, sums = np.zeros(n), step.new_sums()
        step.forward(weights, x, sums)
        step.advance(*weights, x, x, 1.0, np.zeros(3), *sums, np.zeros((1, 2)), 0, 0, 0.0, 0)
        return step

    def new_sums(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Empty f (n,), s2 (n, n), r2 (n, n) and patterns present (1,) of one run."""
        n = self.n
        return np.zeros(n), np.zeros((n, n)), np.zeros((n, n)), np.zeros(1, dtype=np.int64)

    def forward(self, weights: list[np.ndarray], x: np.ndarray, sums) -> None:
        """The forward sums of the current weights (a, w, b, da, dw, db) before the first step: a
        pass with eta = 0 (the updates add zeros)."""
        f, s2, r2, present = sums
        present[0] = self._pass(*weights, x, np.zeros(x.shape[0]), 0.0, f, s2, r2)

    def train(self, st: TwoLayer, xt: torch.Tensor, yt: torch.Tensor, tol: float, max_steps: int,
              progress) -> tuple[list[PhaseRun | None], bool]:
        """What ``condlab.phase``'s descend() does to the runs of `st` (each run's PhaseRun in input
        order, None where Ctrl-C stopped it; whether it did), through this step: each run on its own
        (they are independent) in a pool of torch.get_num_threads() threads; the same result up to
        rounding."""
        x, y = xt[:, 0].numpy().copy(), yt.numpy().copy()
        n_runs, width = st.a.shape
        results: list[PhaseRun | None] = [None] * n_runs
        steps = [0] * n_runs
        stop = threading.Event()
        chunk = max(1, 20_000_000 // (width * len(x)))  # about 0.05-0.2 s between checks for Ctrl-C

        def one(j: int) -> None:
            weights = [st.a[j].numpy(), st.w[j, 0].numpy(), st.w[j, 1].numpy(),
                       st.da[j].numpy(), st.dw[j, 0].numpy(), st.dw[j, 1].numpy()]
            hist = np.full((max_steps + 1, 2), np.nan)  # per run: a batch of small widths has many runs
            sums = self.new_sums()
            self.forward(weights, x, sums)
            state = np.array([float(st.c[j]), math.inf, 0.0])
            step, done = 0, False
            while not done and not stop.is_set():
                step, done = self.advance(*weights, x, y, float(st.alpha[j]), state, *sums, hist, step,
                                          max_steps, tol, chunk)
                steps[j] = step
            if done:
                st.time[j] = state[TIME]
                results[j] = st.record(j, float(hist[step, 0]), step, tol, hist[: step + 1])

        interrupted = False
        with ThreadPoolExecutor(max(1, min(n_runs, torch.get_num_threads()))) as pool:
            futures = [pool.submit(one, j) for j in range(n_runs)]
            shown = 0
            try:
                while wait(futures, timeout=0.2)[1]:
                    shown = _show(progress, max(steps), shown)
            except KeyboardInterrupt:
                stop.set()
                interrupted = True
            wait(futures)
        _show(progress, max(steps), shown)
        for fut in futures:
            fut.result()  # re-raise a worker's error
        return results, interrupted


def _show(progress, now: int, shown: int) -> int:
    """Progress in steps of the slowest run, as the reference loop reports it (one update a step)."""
    if progress is not None and now > shown:
        progress.update(now - shown)
    return max(now, shown)


register(FastPath("compiled ReLU phase step", "phase step", (TwoLayer,), ReluStep.make,
                  "benchmarks/bench_phase.py"))
