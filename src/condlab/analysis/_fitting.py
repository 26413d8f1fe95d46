"""The line counter's decisions and its fit loop: steps 3-5 of analysis/_mixture.py's method.

`fit` seeds the mixture and runs EM (analysis/_mixture.py, steps 1-2, or its compiled form, the
fast path "compiled mixture EM" of condlab._accel), then decides on each converged layer (`_decide`:
small and redundant components dropped, the others grouped by their separation, groups kept by
the BIC test and the cone rule) and fits again the layers whose components changed. The method
and its constants are stated once, in analysis/_mixture.py (read from it at each use: the
constants in capitals below are _mixture's) and docs/analysis.md.
"""

from __future__ import annotations

import math

import numpy as np

from condlab._accel import find
from condlab.analysis import _mixture
from condlab.analysis._mixture import _E, Fit, e_step, em, labels, seeds


def redundant(mu: np.ndarray, log_pi: np.ndarray) -> np.ndarray:
    """(B, K) components whose axis lies within MIN_LINE_DEG of a heavier live one (ties: the
    lower index is heavier); mu (B, K, k), log_pi (B, K + 1) (-inf: dropped)."""
    K = mu.shape[1]
    lp = log_pi[:, 1:]
    live = np.isfinite(lp)
    close = np.abs(mu @ mu.transpose(0, 2, 1)) > math.cos(math.radians(_mixture.MIN_LINE_DEG))
    idx = np.arange(K)
    heavier = (lp[:, None, :] > lp[:, :, None]) | ((lp[:, None, :] == lp[:, :, None]) & (idx < idx[:, None]))
    return live & (close & heavier & live[:, None, :]).any(axis=2)


def _member_angles(cos_own: np.ndarray, comp: np.ndarray, K: int):
    """(member (B, K, n), angle (B, K, n) of each member to its axis (inf: not a member), the
    lower median of each component's member angles (B, K, 1); inf: no members), from cos_own
    (B, 1, n): each row's |cos| to its own axis."""
    member = comp[:, None, :] == np.arange(K)[:, None]
    angle = np.where(member, np.arccos(np.minimum(cos_own, 1.0)), np.inf)
    mid = (member.sum(axis=2, keepdims=True) - 1) // 2
    return member, angle, np.take_along_axis(np.sort(angle, axis=2), np.maximum(mid, 0), axis=2)


def median_angle(C: np.ndarray, comp: np.ndarray, label: np.ndarray) -> np.ndarray:
    """(B, K) the median angle (radians) of the rows of each label to their own components' axes
    (inf: no rows); C (B, K, n) cosines rows-axes, comp (B, n) each row's component and label
    (B, n) its label in [0, K) (-1: none), e.g. its component's group."""
    cos_own = np.abs(np.take_along_axis(C, np.maximum(comp, 0)[:, None, :], axis=1))
    return _member_angles(cos_own, label, C.shape[1])[2][..., 0]


def _core(cos_own: np.ndarray, comp: np.ndarray, K: int) -> np.ndarray:
    """(B, K, n) float 0/1: rows of component j within CORE x the median angle of j's rows to its
    axis (cos_own (B, 1, n): each row's |cos| to its own axis). One stray row of a heavy tail
    would otherwise set the spread that the separation compares with."""
    member, angle, median = _member_angles(cos_own, comp, K)
    return (member & (angle <= _mixture.CORE * np.maximum(median, _mixture.S_MIN))).astype(float)


def separation(C: np.ndarray, comp: np.ndarray, mu: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """Ashman's D (B, K, K) between components along the great circle joining their axes.

    The core rows of component j have angles t along the circle from mu_j toward mu_l (each row's
    sign turned toward mu_j: lines are axial); with the mean and variance of each component's
    angles, D = |mean_l − mean_j| / sqrt((var_j + var_l) / 2). inf where a component is not
    alive; 0 for coinciding axes.
    """
    K = mu.shape[1]
    cos_mm = mu @ mu.transpose(0, 2, 1)
    j = np.maximum(comp, 0)
    cj = np.take_along_axis(C, j[:, None, :], axis=1)  # (B, 1, n): cos to the own axis
    row_cos = np.take_along_axis(cos_mm, j[..., None], axis=1).transpose(0, 2, 1)  # (B, K, n): mu_j·mu_l
    cd = np.abs(row_cos)
    sd = np.sqrt(np.maximum(1.0 - cd * cd, 0.0))
    x = np.abs(cj)
    y = C * np.where(cj < 0, -1.0, 1.0) * np.where(row_cos < 0, -1.0, 1.0) - cd * x
    t = np.arctan2(np.divide(y, sd, out=np.zeros_like(y), where=sd > 1e-12), x)  # (B, K, n)
    member = _core(x, comp, K)  # (B, K, n)
    t *= member.max(axis=1, keepdims=True)  # rows outside every core: 0
    N = member.sum(axis=2)
    Nn = np.maximum(N, 1.0)[..., None]
    mean = (member @ t.transpose(0, 2, 1)) / Nn  # [j, l]: j's rows, from mu_j toward mu_l
    var = np.maximum((member @ (t * t).transpose(0, 2, 1)) / Nn - mean * mean, 0.0)
    d = np.arccos(np.minimum(np.abs(cos_mm), 1.0))
    gap = np.abs(d - mean - mean.transpose(0, 2, 1))  # l's rows sit at d − (their mean toward j)
    D = gap / np.sqrt(np.maximum(0.5 * (var + var.transpose(0, 2, 1)), _mixture.S_MIN**2))
    D[d < math.radians(_mixture.MIN_LINE_DEG)] = 0.0
    ok = alive & (N > 0)
    D[~(ok[:, :, None] & ok[:, None, :])] = np.inf
    return D


def group_roots(D: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """(B, K) each alive component's group: the smallest component joined to it by a chain of
    pairs with D <= SEPARATION (-1: not alive)."""
    K = D.shape[1]
    A = ((D <= _mixture.SEPARATION) | np.eye(K, dtype=bool)).astype(float)
    for _ in range(max(1, math.ceil(math.log2(K)))):  # after r squarings: chains of 2^r pairs
        A = np.minimum(A @ A, 1.0)
    return np.where(alive, np.argmax(A > 0, axis=2), -1)


def group_loss(e: _E, log_pi: np.ndarray, w: np.ndarray, root: np.ndarray) -> np.ndarray:
    """Log-likelihood lost (B, K) when the group rooted at each component gives its weight to the
    background: Σ_i log p(u_i) − log p_(−g)(u_i), p_(−g) = p − Σ_(j∈g) π_j f_j + Σ_(j∈g) π_j."""
    K = root.shape[1]
    M = (root[:, :, None] == np.arange(K)).astype(float)  # (B, K components, K roots)
    Rg = M.transpose(0, 2, 1) @ e.R  # (B, K roots, n)
    pig = (np.exp(log_pi[:, None, 1:]) @ M)[:, 0]  # (B, K roots)
    ratio = 1.0 - Rg + pig[..., None] * np.exp(-e.log_p)[:, None, :]
    return -(np.log(np.maximum(ratio, 1e-300)) * w[:, None, :]).sum(axis=2)


def fit(U: np.ndarray, w: np.ndarray, n_min: np.ndarray, h: int, penalty: np.ndarray) -> Fit:
    """Fit the stack U (B, n, k) with active rows w (B, n), canonical order, active rows first.

    n_min (B,): rows of the smallest component; h: the seeds' kNN rank; penalty (B,): factor on
    the BIC cost. Steps 1-5 of the module docstring.
    """
    B, n, k = U.shape
    UT = np.ascontiguousarray(U.transpose(0, 2, 1))
    rows, r = seeds(U, w, h)
    alive = rows >= 0
    K = rows.shape[1]
    mu = np.take_along_axis(U, np.maximum(rows, 0)[..., None], axis=1)
    log_s = np.log(np.clip(r, _mixture.S_MIN, _mixture.S_MAX))
    log_pi = np.where(np.concatenate([np.ones((B, 1), bool), alive], axis=1), 0.0, -np.inf)
    log_pi -= np.log(1.0 + alive.sum(axis=1, keepdims=True))
    cost = penalty * 0.5 * (k + 1) * np.log(np.maximum(w.sum(axis=1), 2.0))
    comp, root = np.full((B, n), -1), np.full((B, K), -1)
    prev, steps = np.full(B, -np.inf), np.zeros(B, np.int64)  # each layer's EM state (`em`)
    rounds = np.zeros(B, np.int64)  # decisions made on each layer
    # `em` compiled, where it is built and applies (condlab._accel, "compiled mixture EM")
    run_em = find("mixture EM", type(UT), UT, mu, log_s, log_pi, prev, steps, _mixture.em_constants()) or em

    def decide(sub: np.ndarray) -> np.ndarray:
        """Steps 3-4 on the layers sub; the layers whose components changed and fit again."""
        last = rounds[sub] + 1 >= 2 * K + 2  # at most 2K + 2 rounds
        comp[sub], root[sub], keep = _decide(
            UT[sub], w[sub], mu[sub], log_s[sub], log_pi[sub], alive[sub], n_min[sub], cost[sub], k, last)
        rounds[sub] += 1
        changed = (keep != alive[sub]).any(axis=1)
        alive[sub[changed]] = keep[changed]
        log_pi[sub[changed], 1:] = np.where(keep[changed], log_pi[sub[changed], 1:], -np.inf)
        again = sub[changed & ~last]
        prev[again], steps[again] = -np.inf, 0
        return again

    decide(np.flatnonzero(~alive.any(axis=1)))  # no seed: nothing to fit
    moving = np.flatnonzero(alive.any(axis=1))
    while moving.size:
        # a layer whose components changed fits again from its current state beside the layers
        # still in their EM (rounds overlap; each layer's sequence of fits is what it is alone)
        still = run_em(U, UT, w, mu, log_s, log_pi, k, moving, n_min, prev, steps, until=len(moving) // 4)
        going = np.zeros(B, bool)
        going[still] = True
        moving = np.concatenate([still, decide(moving[~going[moving]])])
    return Fit(mu, np.exp(log_s), log_pi, alive, root, comp)


def _decide(UT, w, mu, log_s, log_pi, alive, n_min, cost, k, last):
    """Steps 3-4 on converged layers: (comp, root, keep) with keep (B, K) the components that
    stay (all of `alive` but the small or redundant ones if there are any, else those of the
    groups that pass the BIC test); last (B,): the layer's last allowed round (its groups are reported
    whatever happens; otherwise a layer with small components gets root -1: it fits again).

    Done on the components that take part (alive, or with a weight), moved to the front in
    their order: the smallest index of a group, and every tie, is the same as on all K (a
    dropped component adds exact zeros to the E-step), at a fraction of the (K, n) work.
    """
    B, K = alive.shape
    on = alive | np.isfinite(log_pi[:, 1:])
    perm = np.argsort(~on, axis=1, kind="stable")[:, : max(1, int(on.sum(axis=1).max(initial=0)))]
    mu_c = np.take_along_axis(mu, perm[..., None], axis=1)
    lp_c = np.concatenate([log_pi[:, :1], np.take_along_axis(log_pi[:, 1:], perm, axis=1)], axis=1)
    alive_c = np.take_along_axis(alive, perm, axis=1)
    comp, root, keep = _decide_compact(UT, w, mu_c, np.take_along_axis(log_s, perm, axis=1), lp_c,
                                       alive_c, n_min, cost, k, last)
    comp = np.where(comp >= 0, np.take_along_axis(perm, np.maximum(comp, 0), axis=1), -1)
    root = np.where(root >= 0, np.take_along_axis(perm, np.maximum(root, 0), axis=1), -1)
    root_full, keep_full = np.full((B, K), -1), np.zeros((B, K), bool)
    np.put_along_axis(root_full, perm, root, axis=1)
    np.put_along_axis(keep_full, perm, keep, axis=1)
    return comp, root_full, keep_full


def _decide_compact(UT, w, mu, log_s, log_pi, alive, n_min, cost, k, last):
    """`_decide` on components laid out (B, K') with the ones taking part first."""
    K = mu.shape[1]
    e = e_step(UT, mu, log_s, log_pi, k)
    comp = labels(e, w)
    members = (comp[:, None, :] == np.arange(K)[:, None]).sum(axis=2)
    big = alive & (members >= n_min[:, None])  # fewer rows: a collapse onto a few rows
    big &= ~redundant(mu, log_pi)  # a lighter copy of a line within MIN_LINE_DEG
    # small components go first, and the fit restarts without them: a redundant copy of a
    # line (a small component on the same rows) would otherwise take that line's loss away. So
    # the groups of a layer with small components are formed and tested only in its last allowed
    # round (then they are what it reports).
    small = (alive & ~big).any(axis=1)
    root, keep = np.full(big.shape, -1), big.copy()
    t = np.flatnonzero(~small | last)
    if t.size:
        sub = slice(None) if t.size == len(big) else t  # all layers: no copies
        e_t = _E(*(a[sub] for a in (e.C, e.q, e.R, e.R0, e.log_p)))
        root[t], passed = _groups(e_t, comp[sub], mu[sub], log_pi[sub], big[sub], w[sub], cost[sub])
        keep[t] = np.where(small[t, None], big[t], passed)
    return comp, root, keep


def _groups(e: _E, comp, mu, log_pi, big, w, cost):
    """Step 4: (root, passed) with root (B, K) each big component's group and passed (B, K) the
    big components of the groups that pass the BIC test and the cone rule."""
    K = mu.shape[1]
    root = group_roots(separation(e.C, comp, mu, big), big)
    loss = group_loss(e, log_pi, w, root)
    size = (root[:, :, None] == np.arange(K)).sum(axis=1)  # components per group
    # a line is a cone: a group whose rows lie mostly nearer the orthogonal complement of their
    # axes than the axes share no orientation (in many inputs, one direction of excess variance
    # fits one broad component that the BIC test alone keeps)
    row_root = np.where(comp >= 0, np.take_along_axis(root, np.maximum(comp, 0), axis=1), -1)
    cone = median_angle(e.C, comp, row_root) <= math.radians(_mixture.LINE_MAX_DEG)
    return root, big & np.take_along_axis((loss >= cost[:, None] * size) & cone, np.maximum(root, 0), axis=1)
