"""The line counter's model: a mixture on the projective sphere, fitted to many layers at once.

The active unit rows u of a layer (docs/analysis.md, "Counting orientations", states the method
and every constant once) are a mixture of a uniform background and K axial components, each an
angular central Gaussian (ACG) with an axis µ and a spread s; its density relative to uniform,

    f(u; µ, s) = s^-(k-1) · (c² + (1 − c²)/s²)^(-k/2),    c = µ·u,

is exactly that of x/‖x‖ for x ~ N(0, µµᵀ + s²(I − µµᵀ)) (Tyler 1987): a line with isotropic
angular spread ≈ s per tangent dimension and polynomial tails, so a line keeps its tails.

This module holds the model, the seeds and EM (steps 1-2); analysis/_fitting.py the decisions
and the loop over rounds (steps 3-5, `fit`).

1. Seeds: density peaks of the rows (`seeds`), at most MAX_COMPONENTS, MIN_LINE_DEG apart.
2. EM from the seeds (ECM steps: `_m_step`) until the log-likelihood per row moves less than
   TOL (`em`; compiled: the fast path "compiled mixture EM" of condlab._accel), or until two axes
   come within MIN_LINE_DEG or a component collapses onto fewer than n_min rows (step 3 drops
   those whatever EM does next).
3. Components with fewer than n_min rows (each row to its most likely component or the
   background), and the lighter of two within MIN_LINE_DEG, are dropped first, and EM restarts
   without them (step 2); then the others are
   grouped: two components whose members are not
   separated along the great circle joining their axes (Ashman's D <= SEPARATION, computed on
   each component's core rows, CORE x its median angle) belong to one group, transitively.
4. A group is kept when giving its weight to the background loses more log-likelihood than
   penalty x the BIC cost of its components, (k + 1)/2 · log(n) each (`group_loss`), and its rows
   form a cone: their median angle to their components' axes is at most LINE_MAX_DEG.
5. If any component was dropped, EM restarts from the current state and 3-4 repeat. (Layers
   are scheduled so that one layer's refit runs beside others still in their EM: `fit`; the
   groups of a layer are formed only in a round with no small or redundant component to drop.)

Everything is batched over a stack of same-shape layers: unit rows U (B, n, k) and their
weights w (B, n) in {0, 1} (0: a negligible row or padding). Arrays are laid out (B, K, n),
components before rows. The result of a layer does not depend on the other layers of its stack.
Nothing of size n × n is built except the SEED_ROWS² cosines of the seed candidates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SEED_ROWS = 512  # seed candidates per layer (the first active rows, or evenly spaced ones)
MAX_COMPONENTS = 12  # seeds per layer, at most
PEAK_RATIO = 1.3  # a seed: every denser candidate is >= PEAK_RATIO x its kNN radius away
S_MIN, S_MAX = 1e-3, 0.26  # bounds of s (radians, 0.057-15 deg): f stays finite; broader is background
MAX_ITER, TOL = 300, 1e-6  # EM stops when the log-likelihood per row moves less than TOL
NEWTON_STEPS = 3  # Newton steps for s in each M-step (_spread)
LOG_S_MIN = math.log(S_MIN)
CHUNK = 48  # layers per EM step call (_step): a chunk's (K, n) arrays stay in the CPU's cache
SEPARATION = 4.5  # Ashman's D above which two components are two lines
MIN_LINE_DEG = 5.0  # axes closer than this are one line whatever D says (tight lines: sub-degree spreads)
CORE = 4.0  # a component's rows farther than CORE x its median angle do not count in D
LINE_MAX_DEG = 45.0  # a group whose rows lie farther from their axes (median angle) is no line


@dataclass
class Fit:
    """A fitted stack. mu (B, K, k) axes, s (B, K) spreads, log_pi (B, K + 1) log weights
    (column 0: the background; -inf: a dropped component), alive (B, K) kept components,
    root (B, K) each kept component's group (its smallest component index; -1: dropped),
    comp (B, n) each row's component (-1: background or inactive)."""

    mu: np.ndarray
    s: np.ndarray
    log_pi: np.ndarray
    alive: np.ndarray
    root: np.ndarray
    comp: np.ndarray


def spread(n_active: np.ndarray, n: int, cap: int) -> np.ndarray:
    """(B, min(n, cap)) row positions: all rows when n <= cap, else `cap` positions evenly spaced
    over each layer's active rows (a prefix of the canonical order), or its first `cap` rows when
    it has fewer active rows."""
    if n <= cap:
        return np.broadcast_to(np.arange(n), (len(n_active), n))
    last = np.maximum(n_active - 1, cap - 1)[:, None]
    return np.rint(np.linspace(0.0, 1.0, cap)[None, :] * last).astype(np.int64)


def seeds(U: np.ndarray, w: np.ndarray, h: int) -> tuple[np.ndarray, np.ndarray]:
    """Seed rows (B, MAX_COMPONENTS) (-1: none) and their kNN radii (radians): the density peaks.

    Candidates: the active rows among SEED_ROWS rows spread over the active ones (`spread`; U in
    canonical order, active rows first). A candidate's density is its |cos| to its h-th nearest
    other active candidate; it is a peak when every denser candidate (ties: the earlier one) is at
    least PEAK_RATIO x its kNN radius and MIN_LINE_DEG away. Peaks are taken densest first.
    """
    pick = spread(w.sum(axis=1), U.shape[1], SEED_ROWS)
    X = np.take_along_axis(U, pick[..., None], axis=1)
    on = np.take_along_axis(w, pick, axis=1)
    S = X.shape[1]
    if S <= h:
        return np.full((len(U), MAX_COMPONENTS), -1), np.zeros((len(U), MAX_COMPONENTS))
    A = np.abs(X @ X.transpose(0, 2, 1))
    np.minimum(A, 1.0, out=A)
    A[~np.broadcast_to(on[:, None, :], A.shape)] = -1.0  # inactive candidates are nobody's neighbour
    dens = -np.partition(-A, h, axis=2)[..., h]  # index 0 is the candidate itself (|cos| 1)
    dens[~on] = -2.0
    idx = np.arange(S)
    tie = (dens[:, None, :] == dens[:, :, None]) & (idx < idx[:, None])
    denser = (dens[:, None, :] > dens[:, :, None]) | tie  # [i, j]: j is denser than i
    nearest = np.where(denser, A, -1.0).max(axis=2)  # |cos| to the nearest denser candidate
    r = np.arccos(np.clip(dens, 0.0, 1.0))
    # no seed within MIN_LINE_DEG of a denser candidate: such a pair is one line (step 3)
    peak = on & (dens >= 0) & (np.arccos(np.clip(nearest, -1.0, 1.0))
                               > np.maximum(PEAK_RATIO * r, math.radians(MIN_LINE_DEG)))
    order = np.argsort(np.where(peak, -dens, np.inf), axis=1, kind="stable")[:, :MAX_COMPONENTS]
    ok = np.take_along_axis(peak, order, axis=1)
    rows = np.take_along_axis(pick, order, axis=1)
    out = np.full((len(U), MAX_COMPONENTS), -1)
    radius = np.zeros((len(U), MAX_COMPONENTS))
    out[:, : order.shape[1]] = np.where(ok, rows, -1)
    radius[:, : order.shape[1]] = np.where(ok, np.take_along_axis(r, order, axis=1), 0.0)
    return out, radius


@dataclass
class _E:
    """One E-step: cosines C and q = c² + (1 − c²)/s² (B, K, n), responsibilities R (B, K, n)
    and R0 (B, n) of the background, log p(u) (B, n)."""

    C: np.ndarray
    q: np.ndarray
    R: np.ndarray
    R0: np.ndarray
    log_p: np.ndarray


def e_step(UT: np.ndarray, mu: np.ndarray, log_s: np.ndarray, log_pi: np.ndarray, k: int) -> _E:
    """Responsibilities of rows UT (B, k, n) under axes mu (B, K, k), log spreads (B, K) and log
    weights (B, K + 1) (-inf: a dropped component; column 0: the background, density 1)."""
    C = mu @ UT
    C2 = C * C
    inv = np.exp(-2.0 * log_s)[..., None]  # 1/s²
    q = C2 * (1.0 - inv)
    q += inv
    L = np.log(q)
    L *= -0.5 * k
    L += (log_pi[:, 1:] - (k - 1) * log_s)[..., None]
    top = np.maximum(L.max(axis=1), log_pi[:, :1])  # (B, n)
    # a row no component (background included) can explain (-inf everywhere: a degenerate
    # stack entry) gets zero responsibilities instead of -inf - -inf = nan
    top[~np.isfinite(top)] = 0.0
    L -= top[:, None, :]
    E = np.exp(L, out=L)
    E0 = np.exp(log_pi[:, :1] - top)
    Z = E.sum(axis=1)
    Z += E0
    np.maximum(Z, np.finfo(Z.dtype).tiny, out=Z)
    E /= Z[:, None, :]
    return _E(C, q, E, E0 / Z, top + np.log(Z))


def _m_step(U: np.ndarray, UT: np.ndarray, w: np.ndarray, e: _E, mu: np.ndarray, log_s: np.ndarray, k: int):
    """New (mu, log_s, log_pi): the weights' MLE, one power step for mu on the Tyler-weighted
    scatter Σ R u uᵀ / q (it raises the likelihood), then s maximizing the likelihood at the new
    axes (`_spread`): each part raises the expected log-likelihood, so this is an ECM step."""
    Rw = e.R * w[:, None, :]
    N = Rw.sum(axis=2)
    N0 = (e.R0 * w).sum(axis=1, keepdims=True)
    new = (Rw / e.q * e.C) @ U
    norm = np.sqrt((new * new).sum(axis=2, keepdims=True))
    live = N > 0
    mu = np.where(live[..., None] & (norm > 0), new / np.maximum(norm, 1e-300), mu)
    log_s = np.where(live, _spread(mu @ UT, Rw, N, log_s, k), log_s)
    with np.errstate(divide="ignore"):
        total = np.maximum(N0 + N.sum(axis=1, keepdims=True), 1e-300)
        log_pi = np.log(np.concatenate([N0, N], axis=1) / total)
    return mu, log_s, log_pi


def _spread(C: np.ndarray, Rw: np.ndarray, N: np.ndarray, log_s: np.ndarray, k: int) -> np.ndarray:
    """log s (B, K) maximizing Σ_i R_i log f(u_i; µ, s) at fixed axes (cosines C (B, K, n)).

    In v = log(1/s²) the objective (k − 1)/2 · N v − k/2 · Σ R log(c² + (1 − c²) e^v) is concave,
    so NEWTON_STEPS Newton steps from the current s (each at most 2 in v) reach the maximum to
    rounding on these fits. The fixed-point step s² = k/(k − 1) · Σ R (1 − c²)/q / N has the same
    maximum but approaches it with a rate near 1 on tight lines (hundreds of EM steps).
    """
    C2 = C * C
    with np.errstate(divide="ignore", over="ignore"):  # a row at 90°: a = 1 below
        x = np.minimum((1.0 - C2) / C2, 1e30)  # tan² of each row's angle to the axis
    v = -2.0 * log_s
    lo, hi = -2.0 * math.log(S_MAX), -2.0 * math.log(S_MIN)
    for _ in range(NEWTON_STEPS):
        a = x * np.exp(v)[..., None]
        a /= 1.0 + a  # share of each row's q from its distance to the axis, in [0, 1)
        Ra = Rw * a
        g1 = Ra.sum(axis=2)
        g = 0.5 * (k - 1) * N - 0.5 * k * g1
        h = 0.5 * k * (g1 - np.einsum("bkn,bkn->bk", Ra, a))  # minus the second derivative, >= 0
        # minimum/maximum rather than np.clip: the same numbers without clip's per-call cost,
        # which on these (B, K) arrays was a quarter of this function's time
        v = np.minimum(np.maximum(v + np.minimum(np.maximum(g / np.maximum(h, 1e-12), -2.0), 2.0), lo), hi)
    return -0.5 * v


def em_constants() -> tuple:
    """The constants of `em` as the fast path "compiled mixture EM" (condlab._accel) takes them:
    (TOL, MAX_ITER, NEWTON_STEPS, LOG_S_MIN, bounds of v = log 1/s², cos MIN_LINE_DEG), read now."""
    return (TOL, MAX_ITER, NEWTON_STEPS, LOG_S_MIN, -2.0 * math.log(S_MAX), -2.0 * math.log(S_MIN),
            math.cos(math.radians(MIN_LINE_DEG)))


def em(U, UT, w, mu, log_s, log_pi, k, layers, n_min, prev, steps, until=0):
    """EM on the given layers until each one's log-likelihood per row moves less than TOL, two of
    its axes come within MIN_LINE_DEG, a component collapses onto fewer than n_min (B,) rows, or
    MAX_ITER steps; mu, log_s, log_pi (B, K[, k]) are updated in place.

    A layer's EM can be left and resumed: prev (B,) holds each layer's log-likelihood at its last
    step (-inf: none yet) and steps (B,) its steps so far. When a step leaves no more than `until`
    layers moving, EM returns those layers (their state saved) so that `fit` can decide the
    stopped ones and run the next round of those beside them: the tail of one round is then not
    run alone (each step costs ~0.3 ms whatever its size). Returned otherwise: no layer.

    Work is compacted: only live components (the largest count among the layers), and only the
    layers still moving (a converged layer leaves the working arrays at once: measured 5 % faster
    than waiting for a quarter of them). A converged layer keeps the parameters of its converged
    step, so a layer's fit does not depend on its stack.
    """
    g = np.asarray(layers)
    if g.size == 0:
        return g
    # layers with most components first: a chunk of neighbours (_step) shares one component count
    g = g[np.argsort(-np.isfinite(log_pi[g, 1:]).sum(axis=1), kind="stable")]
    live = np.isfinite(log_pi[g, 1:])
    K = max(1, int(live.sum(axis=1).max()))
    perm = np.argsort(~live, axis=1, kind="stable")[:, :K]  # live components first
    n_act = np.maximum(w[g].sum(axis=1), 1.0)
    Ug, UTg, wg = U[g], UT[g], w[g]
    pm = np.take_along_axis(mu[g], perm[..., None], axis=1)
    ps = np.take_along_axis(log_s[g], perm, axis=1)
    pp = np.concatenate([log_pi[g, :1], np.take_along_axis(log_pi[g, 1:], perm, axis=1)], axis=1)
    last, done_steps = prev[g], steps[g]
    pos = np.arange(len(g))  # rows of the working arrays still iterating (into g)
    while True:
        ll, close, new = _step(Ug, UTg, wg, pm, ps, pp, k)
        with np.errstate(invalid="ignore"):  # -inf - -inf: a degenerate layer stops (nan > x is False)
            moving = np.abs(ll - last) > TOL * n_act[pos]
        # two axes within MIN_LINE_DEG: one line (step 3), and EM would only shift weight from one
        # to the other for hundreds of steps; `fit` drops the lighter one and restarts
        moving &= ~close
        # a component collapsed onto fewer than n_min rows (s at its floor) is dropped by `fit`
        # whatever EM does next: stop here rather than let the others converge around it (not on
        # the seeds' state: their s and weights are guesses until one M-step has run)
        collapsed = np.isfinite(pp[:, 1:]) & (ps <= LOG_S_MIN + 1e-9)  # a padding column is no component
        collapsed &= np.exp(pp[:, 1:]) * n_act[pos, None] < n_min[g[pos], None]
        moving &= ~(collapsed.any(axis=1) & (done_steps > 0))
        pm, ps, pp = (np.where(moving.reshape((-1,) + (1,) * (a.ndim - 1)), b, a)
                      for a, b in zip((pm, ps, pp), new, strict=True))
        last = ll
        done_steps = done_steps + 1
        stop = ~moving | (done_steps >= MAX_ITER)
        if not stop.any():
            continue
        _put(mu, log_s, log_pi, g[pos[stop]], perm[pos[stop]], pm[stop], ps[stop], pp[stop])
        keep = np.flatnonzero(~stop)
        pos, Ug, UTg, wg = pos[keep], Ug[keep], UTg[keep], wg[keep]
        pm, ps, pp, last, done_steps = pm[keep], ps[keep], pp[keep], last[keep], done_steps[keep]
        if pos.size <= until:
            _put(mu, log_s, log_pi, g[pos], perm[pos], pm, ps, pp)
            prev[g[pos]], steps[g[pos]] = last, done_steps
            return g[pos]


def _step(U, UT, w, mu, log_s, log_pi, k):
    """One EM step of the layers U (B, n, k), parameters (B, K[, k]): (log-likelihood (B,), whether
    two axes are within MIN_LINE_DEG (B,), the new (mu, log_s, log_pi)).

    Done CHUNK layers at a time, each chunk on the columns up to its last live component: the
    arrays of one chunk stay in cache (one pass over all B x K x n at once runs from memory),
    and padding columns (no component: weight 0) cost nothing. Layers do not interact, and a
    dead column adds exact zeros, so this is the same arithmetic as one step on all of them.
    """
    ll = np.empty(len(U))
    close = np.empty(len(U), dtype=bool)
    new = [mu.copy(), log_s.copy(), log_pi.copy()]
    for a in range(0, len(U), CHUNK):
        c = slice(a, a + CHUNK)
        on = np.isfinite(log_pi[c, 1:]).any(axis=0)
        K = int(np.flatnonzero(on)[-1]) + 1 if on.any() else 1
        m, s_, p = mu[c, :K], log_s[c, :K], log_pi[c, : K + 1]
        e = e_step(UT[c], m, s_, p, k)
        ll[c] = (e.log_p * w[c]).sum(axis=1)
        close[c] = close_pair(m, p)
        new[0][c, :K], new[1][c, :K], new[2][c, : K + 1] = _m_step(U[c], UT[c], w[c], e, m, s_, k)
    return ll, close, new


def _put(mu, log_s, log_pi, layers, perm, pm, ps, pp) -> None:
    """Write compacted parameters back into the (B, K) arrays."""
    mu_l, ls_l, lp_l = mu[layers], log_s[layers], log_pi[layers, 1:]
    np.put_along_axis(mu_l, perm[..., None], pm, axis=1)
    np.put_along_axis(ls_l, perm, ps, axis=1)
    np.put_along_axis(lp_l, perm, pp[:, 1:], axis=1)
    mu[layers], log_s[layers] = mu_l, ls_l
    log_pi[layers, 0], log_pi[layers, 1:] = pp[:, 0], lp_l


def close_pair(mu: np.ndarray, log_pi: np.ndarray) -> np.ndarray:
    """(B,) whether two live axes lie within MIN_LINE_DEG: exactly `redundant(...).any(axis=1)`
    (of two such axes one is the lighter), without ranking the weights (EM asks at every step)."""
    live = np.isfinite(log_pi[:, 1:])
    close = np.abs(mu @ mu.transpose(0, 2, 1)) > math.cos(math.radians(MIN_LINE_DEG))
    close &= live[:, :, None] & live[:, None, :]
    close[:, np.arange(mu.shape[1]), np.arange(mu.shape[1])] = False
    return close.any(axis=(1, 2))


def labels(e: _E, w: np.ndarray) -> np.ndarray:
    """(B, n) each active row's most responsible component, -1 where the background is."""
    comp = np.argmax(e.R, axis=1)
    best = np.take_along_axis(e.R, comp[:, None, :], axis=1)[:, 0]
    return np.where((best > e.R0) & w, comp, -1)
