"""Arcs: neurons spread flat and continuously along one great circle, not condensed on a line.

A set of rows is an *arc* when it holds at least ARC_MIN_ROWS rows and, along the great circle
that fits it best (its axial mean and main tangent direction), is

* wide: sqrt(12) × the std of its angles along the circle >= ARC_MIN_DEG (the width of a flat
  band with that std);
* one-dimensional: that std >= ARC_ANISOTROPY × its rms spread across the circle per dimension;
* flat, not peaked: the kurtosis of the angles is below a Gaussian's (Anscombe and Glynn's
  kurtosis test, one-sided, p < ARC_ALPHA: ``flat_p``) — a broad Gaussian line, however wide,
  is no arc;
* continuous: its largest gap between consecutive angles is one that uniform angles leave with
  probability >= GAP_ALPHA (union bound over the n − 1 spacings: gap <= (1 − (GAP_ALPHA /
  (n − 1))^(1/(n − 2))) × range), so two lines side by side are no arc.

Candidates are the mixture's groups and *chains* of groups (a sparse arc is fitted by several
components with chance gaps between them): two groups are chained when, along the circle through
their axes, the empty gap between them passes the continuity test for their union; chains are
closed transitively. A chain is an arc when it passes the tests above and its angles are better
described by one flat band than by one Gaussian per group (BIC); otherwise it is cut at its
widest gap between groups and each part is tested again, down to single groups.
"""

from __future__ import annotations

import math

import numpy as np

ARC_MIN_ROWS = 20
ARC_MIN_DEG = 20.0
ARC_ANISOTROPY = 4.0
ARC_ALPHA = 0.05
GAP_ALPHA = 0.01
POWER_STEPS = 20  # power iterations for a candidate's axis and main tangent direction


def _unit(X: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(X, axis=-1, keepdims=True)
    return np.where(norm > 0, X / np.maximum(norm, 1e-300), fallback)


def gap_bound(n: np.ndarray) -> np.ndarray:
    """Largest spacing, as a share of the range, that n uniform values leave with prob. >= GAP_ALPHA."""
    n = np.maximum(np.asarray(n, dtype=float), 3.0)
    return 1.0 - (GAP_ALPHA / (n - 1.0)) ** (1.0 / (n - 2.0))


def band(X: np.ndarray, mask: np.ndarray, axis: np.ndarray) -> dict:
    """Shape of P candidate row sets along their great circles: rows X (P, n, k), members mask
    (P, n), start axes (P, k). Angles t (P, n) (radians, 0 off the mask), their std `sd`, rms
    spread `across` per dimension, kurtosis, member count."""
    P, n, k = X.shape
    M = mask.astype(float)
    XT = X.transpose(0, 2, 1)
    V = axis[:, None, :]
    for _ in range(POWER_STEPS):  # axis: top eigenvector of Σ u uᵀ over the members
        V = _unit((M * (V @ XT)[:, 0])[:, None, :] @ X, V)
    c = (V @ XT)[:, 0]  # (P, n)
    far = np.argmax((1.0 - c * c) * M, axis=1)  # the member farthest from the axis
    E = X[np.arange(P), far][:, None, :]
    for _ in range(POWER_STEPS):  # main tangent direction: top eigenvector of the tangent scatter
        E = E - (E * V).sum(-1, keepdims=True) * V
        E = _unit((M * (E @ XT)[:, 0])[:, None, :] @ X, E)
    E = _unit(E - (E * V).sum(-1, keepdims=True) * V, E)
    t = np.arctan2((E @ XT)[:, 0] * np.sign(c), np.abs(c)) * M
    count = M.sum(1)
    cnt = np.maximum(count, 1.0)
    dev = (t - (t.sum(1) / cnt)[:, None]) * M
    m2 = (dev**2).sum(1) / cnt
    theta2 = np.arccos(np.minimum(np.abs(c), 1.0)) ** 2
    across2 = (np.maximum(theta2 - t * t, 0.0) * M).sum(1) / (cnt * max(k - 2, 1))
    kurt = (dev**4).sum(1) / cnt / np.maximum(m2 * m2, 1e-300)
    return {"axis": V[:, 0], "along": E[:, 0], "t": t, "sd": np.sqrt(m2), "across": np.sqrt(across2),
            "kurtosis": kurt, "count": count}


def arc_test(b: dict, mask: np.ndarray, k: int) -> np.ndarray:
    """(P,) whether each candidate of `band` is an arc (module docstring)."""
    ok = (b["count"] >= ARC_MIN_ROWS) & (np.degrees(math.sqrt(12.0) * b["sd"]) >= ARC_MIN_DEG)
    if k > 2:
        ok &= b["sd"] >= ARC_ANISOTROPY * b["across"]
    for p in np.flatnonzero(ok):
        t = np.sort(b["t"][p][mask[p]])
        flat = flat_p(t) < ARC_ALPHA
        span = t[-1] - t[0]
        ok[p] = flat and np.diff(t).max() <= gap_bound(len(t)) * span
    return ok


def flat_p(t: np.ndarray) -> float:
    """The one-sided p-value that `t` (n >= 5 values) is no flatter than a Gaussian sample: the
    kurtosis test of Anscombe and Glynn (1983), as ``scipy.stats.kurtosistest(t,
    alternative="less")`` computes it (equal within rounding: tests/test_counting_planted.py).

    Written out because importing scipy.stats costs ~1 s of CPU, which every fresh sweep process
    whose line counts met an arc candidate paid (issue 24): 1 s of a 64-run sweep's ~6 s.
    """
    n = float(len(t))
    dev = t - t.mean()
    m2 = float(np.mean(dev * dev))
    if n < 5 or m2 == 0.0:   # scipy: nan (undefined); no arc
        return math.nan
    b2 = float(np.mean(dev**4)) / (m2 * m2)
    mean = 3.0 * (n - 1) / (n + 1)                                        # [Eq. 1]
    var = 24.0 * n * (n - 2) * (n - 3) / ((n + 1) * (n + 1) * (n + 3) * (n + 5))
    x = (b2 - mean) / math.sqrt(var)                                      # [Eq. 4]
    sqrt_beta1 = (6.0 * (n * n - 5 * n + 2) / ((n + 7) * (n + 9))
                  * math.sqrt(6.0 * (n + 3) * (n + 5) / (n * (n - 2) * (n - 3))))   # [Eq. 2]
    a = 6.0 + 8.0 / sqrt_beta1 * (2.0 / sqrt_beta1 + math.sqrt(1 + 4.0 / sqrt_beta1**2))  # [Eq. 3]
    denom = 1 + x * math.sqrt(2 / (a - 4.0))
    if denom == 0.0:
        return math.nan
    term2 = math.copysign(((1 - 2.0 / a) / abs(denom)) ** (1 / 3), denom)
    z = (1 - 2 / (9.0 * a) - term2) / math.sqrt(2 / (9.0 * a))           # [Eq. 5]
    return 0.5 * math.erfc(-z / math.sqrt(2.0))                           # P(Z <= z), standard normal


def chains(U: np.ndarray, row_group: np.ndarray, V: np.ndarray, live: np.ndarray) -> np.ndarray:
    """(B, K) chain root of each group (the smallest group index chained to it; -1: no group).

    Groups g, h (rows labelled g / h in row_group (B, n), axes V (B, K, k), live (B, K)) are
    chained when along the circle through their axes the gap between them passes the continuity
    test for their union.
    """
    B, n, k = U.shape
    K = V.shape[1]
    root = np.where(live, np.arange(K), -1)
    slots = np.flatnonzero(live.sum(axis=0) > 0)
    if slots.size < 2:
        return root
    M = (row_group[:, None, :] == slots[:, None]).astype(float)  # (B, L, n)
    N = M.sum(2)
    C = V[:, slots] @ U.transpose(0, 2, 1)  # (B, L, n)
    cos_gh = V[:, slots] @ V[:, slots].transpose(0, 2, 1)
    cd = np.abs(cos_gh)
    sd = np.sqrt(np.maximum(1.0 - cd * cd, 0.0))
    cg = C[:, :, None, :]
    ch = C[:, None, :, :] * np.where(cos_gh < 0, -1.0, 1.0)[..., None]
    side = np.where(cg + ch < 0, -1.0, 1.0)
    y = np.divide(ch - cd[..., None] * cg, sd[..., None], out=np.zeros(ch.shape), where=sd[..., None] > 1e-12)
    x = side * cg
    t = np.arctan2(side * y, x)  # (B, L, L, n): along the circle from g toward h
    Mg, Mh = M[:, :, None, :], M[:, None, :, :]
    Mu = np.maximum(Mg, Mh)
    nu = np.maximum(Mu.sum(-1), 1.0)
    big, small = 1e9, -1e9
    hi_g = np.where(Mg > 0, t, small).max(-1)
    lo_h = np.where(Mh > 0, t, big).min(-1)
    span = np.where(Mu > 0, t, small).max(-1) - np.where(Mu > 0, t, big).min(-1)
    gap_ok = lo_h - hi_g <= gap_bound(nu) * span
    link = gap_ok & (N[:, :, None] > 0) & (N[:, None, :] > 0)
    link |= link.transpose(0, 2, 1)
    A = (link | np.eye(len(slots), dtype=bool)).astype(float)
    for _ in range(max(1, math.ceil(math.log2(len(slots))))):
        A = np.minimum(A @ A, 1.0)
    first = slots[np.argmax(A > 0, axis=2)]  # (B, L)
    root[:, slots] = np.where(live[:, slots], first, -1)
    return root


def find_arcs(U: np.ndarray, row_group: np.ndarray, axes: np.ndarray, live: np.ndarray):
    """Arcs among the groups of a fitted stack: (arc (B, K), width (B, K) in degrees).

    row_group (B, n): each row's group slot (-1: none); axes (B, K, k): start axes of the groups;
    live (B, K): the group slots in use. arc[b, g] is the slot of the arc that group g belongs to
    (-1: g is a line); width[b, a] is arc a's width (sqrt(12) x the std of its angles).
    """
    B, n, k = U.shape
    K = axes.shape[1]
    M = row_group[:, None, :] == np.arange(K)[:, None]  # (B, K, n)
    V = axes
    for _ in range(5):  # group axes, near enough for the chain screen
        V = _unit((M * (V @ U.transpose(0, 2, 1))) @ U, V)
    chain = chains(U, row_group, V, live)
    arc, width = np.full((B, K), -1), np.zeros((B, K))
    n_in = np.zeros((B, K), int)
    np.add.at(n_in, (np.nonzero(live)[0], np.maximum(chain[live], 0)), 1)
    alone = live & (n_in[np.arange(B)[:, None], np.maximum(chain, 0)] == 1) & (M.sum(2) >= ARC_MIN_ROWS)
    lay, grp = np.nonzero(alone)
    if lay.size:  # groups chained to no other: one batched test
        bnd = band(U[lay], M[lay, grp], V[lay, grp])
        ok = arc_test(bnd, M[lay, grp], k)
        arc[lay[ok], grp[ok]] = grp[ok]
        width[lay[ok], grp[ok]] = np.degrees(math.sqrt(12.0) * bnd["sd"][ok])
    for b, r in zip(*np.nonzero(live & (n_in > 1)), strict=True):  # chains: test, or cut and retest
        for groups, wd in _settle(U[b], row_group[b], np.flatnonzero(live[b] & (chain[b] == r)), V[b], k):
            arc[b, groups], width[b, groups[0]] = groups[0], wd
    return arc, width


def _settle(X: np.ndarray, row_group: np.ndarray, groups: np.ndarray, V: np.ndarray, k: int):
    """[(groups, width)] of the arcs in a chain of groups (rows X (n, k)): the chain if it is an arc,
    else its two parts either side of the widest gap between its groups along its circle, in turn."""
    mask = np.isin(row_group, groups)
    if mask.sum() < ARC_MIN_ROWS:
        return []
    bnd = band(X[None], mask[None], V[groups[0]][None])
    t = bnd["t"][0]
    if arc_test(bnd, mask[None], k)[0] and (len(groups) == 1 or _flat_beats_lines(t, row_group, groups)):
        return [(groups, float(np.degrees(math.sqrt(12.0) * bnd["sd"][0])))]
    if len(groups) == 1:
        return []
    lo = np.array([t[row_group == g].min() for g in groups])
    hi = np.array([t[row_group == g].max() for g in groups])
    order = np.argsort((lo + hi) / 2, kind="stable")
    gaps = lo[order][1:] - np.maximum.accumulate(hi[order])[:-1]
    cut = int(np.argmax(gaps)) + 1
    return (_settle(X, row_group, np.sort(groups[order[:cut]]), V, k)
            + _settle(X, row_group, np.sort(groups[order[cut:]]), V, k))


def _flat_beats_lines(t: np.ndarray, row_group: np.ndarray, groups: np.ndarray) -> bool:
    """BIC of the chain's angles t: one uniform band (2 parameters) against one Gaussian per group
    with the group's own mean, std and share (3G − 1 parameters); True when the band wins."""
    x = t[np.isin(row_group, groups)]
    n = len(x)
    flat = -n * math.log(max(float(x.max() - x.min()), 1e-12)) - math.log(n)
    dens = np.zeros(n)
    for g in groups:
        y = t[row_group == g]
        sd = max(float(y.std()), 1e-6)
        dens += len(y) / n * np.exp(-0.5 * ((x - y.mean()) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
    lines = float(np.log(np.maximum(dens, 1e-300)).sum()) - (3 * len(groups) - 1) / 2 * math.log(n)
    return flat > lines
