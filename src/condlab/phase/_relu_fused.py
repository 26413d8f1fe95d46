"""The ReLU step of the phase-diagram trainer as one compiled pass over the neurons (numba).

Same arithmetic as ``_train._loss_grad_bound`` + ``_State.step`` (the reference, kept for other
activations and for tests/test_phase_fused.py), reorganised so that a GD step reads and writes each
neuron's six numbers (a, w, b and their accumulated changes) once:

* For 1-D input every quantity is elementwise over neurons; only f (n,), the Gram matrix's sums and
  the Hessian bound need a reduction. The update of step t and the forward pass of step t + 1 are
  fused: while neuron k is in registers it is updated, then its new z, sigma(z) and activation
  pattern feed the next step's sums.
* Gram matrix G = (1/(n alpha^2)) [sum_k s_ki s_kj + (x~_i . x~_j) sum_k a_k^2 s'_ki s'_kj]: the
  first sum is accumulated directly (n(n+1)/2 products); for ReLU s'_ki is 0/1, so the second is a
  sum of a_k^2 over the neurons whose activation pattern p_k (bit i: z_ki > 0) holds both i and j.
  We accumulate A2[p] = sum of a_k^2 per pattern (2^n bins).
* The residual block bound of neuron k, ||(1/n alpha) sum_i e_i s'_ki x~_i||, depends on k only
  through p_k: its maximum over neurons is the maximum over the patterns present (cnt[p] > 0),
  computed once per step from e.  This is the same bound as the reference, not a looser one.

Runs are independent: one kernel call advances one run by up to `chunk` steps (the caller loops,
so Ctrl-C and progress are served between chunks); runs of a batch go to a thread pool (nogil).
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np

MAX_POINTS = 16  # 2^n pattern bins: above this the reference implementation is used

# state vector of one run (float64): the step factor c, the previous loss, t = sum of step sizes
C, PREV, TIME = 0, 1, 2


def _pass_source(n: int) -> str:
    """Source of `_pass` for n points, loops over points unrolled (n is a constant of the code).

    _pass(a, w, b, da, dw, db, x, es, eta, f, s2, a2, cnt) updates every neuron by -eta * grad, then
    accumulates the forward sums of the new weights: f_i = sum_k a_k s_ki (not yet / alpha),
    s2[i, j] = sum_k s_ki s_kj (i <= j), a2[p] = sum of a_k^2 and cnt[p] = number of neurons with
    activation pattern p. eta = 0 (with es = 0) is the forward pass alone. Sums over points run in the
    reference's order. Why generated: with n a constant the sums stay in registers and the code is
    branch-free (z > 0 is a coin flip per neuron and point; mispredicted branches cost more than the
    arithmetic): 2.5-3x faster than loops over a run-time n.
    """
    pts = range(n)
    pairs = [(i, j) for i in pts for j in range(i, n)]
    add = " + ".join
    body = [
        "def _pass(a, w, b, da, dw, db, x, es, eta, f, s2, a2, cnt):",
        *[f"    x{i} = x[{i}]; e{i} = es[{i}]; f{i} = 0.0" for i in pts],
        *[f"    q{i}_{j} = 0.0" for i, j in pairs],
        "    a2[:] = 0.0",
        "    cnt[:] = 0",
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
        *[f"        u{i} = max(bk + x{i} * wk, 0.0); f{i} += u{i} * ak" for i in pts],
        *[f"        q{i}_{j} += u{i} * u{j}" for i, j in pairs],
        f"        p = {' | '.join(f'({1 << i} if u{i} > 0.0 else 0)' for i in pts)}",
        "        a2[p] += ak * ak",
        "        cnt[p] += 1",
        *[f"    f[{i}] = f{i}" for i in pts],
        *[f"    s2[{i}, {j}] = q{i}_{j}" for i, j in pairs],
    ]
    return "\n".join(body) + "\n"


@numba.njit(cache=True, nogil=True)
def _bound(e, x, alpha, s2, a2, cnt):
    """c-free step denominator: lambda_max(G) + max over present patterns of the block bound."""
    n = x.shape[0]
    scale = 1.0 / (n * alpha)
    g = np.empty((n, n))
    for i in range(n):
        for j in range(i, n):
            both = 0.0
            for p in range(a2.shape[0]):
                if (p >> i) & 1 and (p >> j) & 1:
                    both += a2[p]
            v = (s2[i, j] + both * (x[i] * x[j] + 1.0)) * (scale / alpha)
            g[i, j] = v
            g[j, i] = v
    top = np.linalg.eigvalsh(g)[-1]
    block = 0.0
    for p in range(a2.shape[0]):
        if cnt[p] > 0:
            v0 = 0.0
            v1 = 0.0
            for i in range(n):
                if (p >> i) & 1:
                    v0 += e[i] * scale * x[i]
                    v1 += e[i] * scale
            block = max(block, math.hypot(v0, v1))
    return max(top + block, 1e-300)


_ADVANCE = '''
def advance(a, w, b, da, dw, db, x, y, alpha, state, f, s2, a2, cnt, hist, step, max_steps, tol, chunk):
    """Advance one run from `step` (its forward sums f, s2, a2, cnt already computed) by up to `chunk`
    steps; returns (the step reached, finished). Records loss and t of each step in hist (steps, 2).

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
        eta = state[C] / _bound(e, x, alpha, s2, a2, cnt)
        for i in range(n):
            es[i] = e[i] * (1.0 / (n * alpha))
        _pass(a, w, b, da, dw, db, x, es, eta, f, s2, a2, cnt)
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
    exec(compile(_pass_source(n), f"<condlab.phase._relu_fused._pass n={n}>", "exec"), space)
    space["_pass"] = numba.njit(nogil=True)(space["_pass"])
    exec(compile(_ADVANCE, "<condlab.phase._relu_fused.advance>", "exec"), space)
    return numba.njit(nogil=True)(space["advance"]), space["_pass"]


def new_sums(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Empty f (n,), s2 (n, n), a2 (2^n,), cnt (2^n,) buffers of one run."""
    return np.zeros(n), np.zeros((n, n)), np.zeros(1 << n), np.zeros(1 << n, dtype=np.int64)


def forward(weights: list[np.ndarray], x: np.ndarray, sums) -> None:
    """The forward sums of the current weights (a, w, b, da, dw, db) before the first step: a pass
    with eta = 0 (the updates add zeros)."""
    kernels(x.shape[0])[1](*weights, x, np.zeros(x.shape[0]), 0.0, *sums)
