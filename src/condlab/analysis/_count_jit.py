"""The per-group measures of `Batch` and the band tests of `Caps`, compiled (numba).

Same quantities and the same margin rules as the array code in _count_caps.py (which runs
where numba is missing): each group's mean line and whether it is well-posed, its members
aligned to it and their angles to it, its principal-axis angles and from them the tri-states
``whole`` / ``arc`` and a sure cut; for pairs of caps, the band test. Only the order of the
float work differs (loops instead of array operations), which the margins cover.
"""

from __future__ import annotations

import math

import numpy as np

from condlab.analysis import _eig_jit, _null_jit
from condlab.analysis._cluster_jit import compile_in
from condlab.analysis._eig_jit import _dots, _eig, _gram, _power, _unit_vector
from condlab.analysis._null_jit import _null

try:
    import numba
except ImportError:
    numba = None


def _quantile_sorted(s, q):
    """np.quantile(s, q) (linear) of ascending s, up to rounding."""
    h = (len(s) - 1) * q
    f = int(math.floor(h))
    b = s[min(f + 1, len(s) - 1)]
    return s[f] + (b - s[f]) * (h - f)


def _align(Xg, mean, A, radii, lo):
    """|cos| (n,) of rows Xg (n, k) to mean; writes the rows flipped to its side into A[lo:] and
    their angles to it (degrees) into radii[lo:]."""
    n, k = Xg.shape
    x = _dots(Xg, mean)
    for i in range(n):
        s = -1.0 if x[i] < 0 else 1.0
        for j in range(k):
            A[lo + i, j] = s * Xg[i, j]
        x[i] = abs(x[i])
        radii[lo + i] = math.degrees(math.acos(min(x[i], 1.0)))
    return x


def _needed(span, n, gap_min, gap_margin):
    return max(gap_min, span / (n + 1) * (math.log(n + 1) + gap_margin))


def _axis(A, x, mean, v, ok, ms, depth, p):
    """(whole, arc, cut, axis angles) of one group from its aligned rows A (n, k), their cosines x
    to the mean line, the principal tangent axis v and whether it is well-posed; p: the parameters."""
    margin, tiny, arc_deg = p[0], p[2], p[3]
    gap_min, gap_margin, split_depth = p[4], p[5], p[6]
    n, k = A.shape
    T = np.empty((n, k))
    for i in range(n):
        for j in range(k):
            T[i, j] = A[i, j] - x[i] * mean[j]
    y = _dots(T, v)
    phi = np.empty(n)
    for i in range(n):
        if x[i] * x[i] + y[i] * y[i] < tiny * tiny:
            ok = False
        phi[i] = math.degrees(math.atan2(y[i], x[i]))
    ps = np.sort(phi)
    span = ps[n - 1] - ps[0]
    widest, at = -np.inf, -1
    for i in range(ms - 1, n - ms):  # gaps leaving ms angles on each side
        if ps[i + 1] - ps[i] > widest:
            widest, at = ps[i + 1] - ps[i], i
    top = 0
    for i in range(ms - 1, n - ms):
        if ps[i + 1] - ps[i] >= widest - margin:
            top += 1
    needed = _needed(span, n, gap_min, gap_margin)
    small = n < 2 * ms or depth >= split_depth
    whole = 1 if small or (ok and widest + margin < needed) else -1
    cut = np.nan
    if not small and ok and top == 1 and widest - margin >= needed:
        cut = (ps[at] + ps[at + 1]) / 2
    width = _quantile_sorted(ps, 0.95) - _quantile_sorted(ps, 0.05)
    arc = -1
    if ok and span + margin < arc_deg - 1e-6:
        arc = 0
    elif ok and abs(width - arc_deg) > margin:
        arc = 1 if width >= arc_deg else 0
    return whole, arc, cut, phi


def _measure(X, starts, n, depth, ms, min_count, m, p):
    """Per group of rows X (N, k) (group g: rows starts[g] .. + n[g]): means (c, k), trusted,
    aligned rows A (N, k), whole, arc, cut (NaN: none), each row's axis angle (N,), condensed
    (the null model for m rows in all, asked of groups of >= min_count rows), and each row's
    angle (degrees) to its group's mean line (N,).

    One eigendecomposition of the group's Gram matrix G = XᵀX gives both the mean line (top
    eigenvector, eigenvalue l1) and the principal tangent axis: the tangent rows' Gram matrix is
    G - l1 v1 v1ᵀ, whose top eigenvector is G's second, v2. It is trusted where l2 - l3 > EIG_GAP
    of l1 (stricter than of l2), so that its rounding (~1e-16 l1 / (l2 - l3)) stays ~1e-10 rad.
    """
    c, k = len(n), X.shape[1]
    means, trusted = np.zeros((c, k)), np.zeros(c, np.bool_)
    A, radii, phi = np.empty_like(X), np.empty(X.shape[0]), np.zeros(X.shape[0])
    whole, arc, cut = np.full(c, -1, np.int64), np.full(c, -1, np.int64), np.full(c, np.nan)
    condensed = np.full(c, -1, np.int64)
    for g in range(c):
        lo, hi = starts[g], starts[g] + n[g]
        Xg = X[lo:hi]
        G = _gram(Xg)
        small = n[g] < 2 * ms or depth[g] >= p[6]
        mean, sure = _power(G, p[1])
        axis = True
        if sure and k > 1:
            x = _align(Xg, mean, A, radii, lo)
            top = 0.0
            for i in range(lo, hi):
                top = max(top, radii[i])
            # every axis angle lies within [-top, top] (up to rounding): a range below
            # GAP_MIN_DEG has no gap to cut, one below ARC_DEG is no arc; no axis needed
            axis = not ((small or 2 * top + p[0] < p[4]) and 2 * top + p[0] < p[3] - 1e-6)
        if axis:  # the full eigendecomposition: the tangent axis (and the mean line if unsure)
            w, V = _eig(G)
            if not sure:
                mean = _unit_vector(V[:, 0])
                sure = k < 2 or w[0] - w[1] > p[1] * w[0]
                x = _align(Xg, mean, A, radii, lo)
        means[g], trusted[g] = mean, sure
        if k < 2:
            condensed[g] = 0  # chance_p is 1 in R^1
        elif sure and n[g] >= min_count:
            condensed[g] = _null(np.sort(radii[lo:hi]), m, k, p[0], p[10], p[11])
        if k > 1 and sure and not axis:
            whole[g], arc[g] = 1, 0
        elif k > 1 and sure:
            ok = w[1] - (w[2] if k > 2 else 0.0) > p[1] * w[0]
            wg, ag, cg, pg = _axis(A[lo:hi], x, mean, _unit_vector(V[:, 1]), ok, ms, depth[g], p)
            whole[g], arc[g], cut[g] = wg, ag, cg
            phi[lo:hi] = pg
        elif small:
            whole[g] = 1
    return means, trusted, A, whole, arc, cut, phi, condensed, radii


def _band_pair(means, trusted, A, radii, starts, n, i, j, p):
    """Tri-state band test (`_joined`) of caps i, j; p as in `_axis`, then far_cos,
    merge_max_deg, min_fill. Centres surely more than merge_max_deg apart: 0.

    A member's angle in the band (from either centre) is at most its angle to its own mean
    line (radii, degrees), so only members at least alpha / 4 from it can lie in the middle
    half; with fewer than 2 of them (margin included) the band is surely not filled: 0.
    """
    margin, tiny, gap_min, gap_margin = p[0], p[2], p[4], p[5]
    merge_max, min_fill = p[8], p[9]
    k = means.shape[1]
    ca, cb = means[i], means[j]
    dot = 0.0
    for t in range(k):
        dot += ca[t] * cb[t]
    if abs(dot) < p[7]:
        return 0  # more than merge_max_deg + 1e-3 apart: merge_by_band skips the pair
    flip = -1.0 if dot < 0 else 1.0
    alpha = math.degrees(math.acos(min(1.0, abs(dot))))
    if alpha > merge_max + margin:
        return 0  # merge_by_band skips the pair, or _joined says no (alpha > MERGE_MAX_DEG)
    if not (trusted[i] and trusted[j]) or alpha < 1e-3:
        return -1  # left to _joined
    far = 0
    for r in range(starts[i], starts[i] + n[i]):
        far += radii[r] >= alpha / 4 - margin
    for r in range(starts[j], starts[j] + n[j]):
        far += radii[r] >= alpha / 4 - margin
    if far < 2:
        return 0
    if abs(alpha - merge_max) <= margin:
        return -1
    e2 = cb * flip - abs(dot) * ca
    norm = 0.0
    for t in range(k):
        norm += e2[t] * e2[t]
    e2 = e2 / math.sqrt(norm)
    inside = np.empty(n[i] + n[j] + 2)
    m_in, middle = 0, 0
    for r in range(n[i] + n[j]):
        row, sign = (starts[i] + r, 1.0) if r < n[i] else (starts[j] + r - n[i], flip)
        x, y = 0.0, 0.0
        for t in range(k):
            x += sign * A[row, t] * ca[t]
            y += sign * A[row, t] * e2[t]
        phi = math.degrees(math.atan2(y, x))
        close = min(abs(phi), abs(phi - alpha), abs(phi - alpha / 4), abs(phi - 3 * alpha / 4))
        if close <= margin or x * x + y * y < tiny * tiny:
            return -1
        if 0 < phi < alpha:
            inside[m_in] = phi
            m_in += 1
            if alpha / 4 < phi < 3 * alpha / 4:
                middle += 1
    inside[m_in], inside[m_in + 1] = 0.0, alpha
    band = np.sort(inside[:m_in + 2])
    widest = 0.0
    for t in range(m_in + 1):
        widest = max(widest, band[t + 1] - band[t])
    needed = _needed(alpha, m_in, gap_min, gap_margin)
    if abs(widest - needed) <= margin:
        return -1
    return 1 if middle >= max(2, min_fill * m_in) and widest < needed and alpha <= merge_max else 0


def _band(means, trusted, A, radii, starts, n, pairs, p):
    """`_band_pair` of each pair of caps (P, 2)."""
    out = np.empty(len(pairs), np.int64)
    for q in range(len(pairs)):
        out[q] = _band_pair(means, trusted, A, radii, starts, n, pairs[q, 0], pairs[q, 1], p)
    return out


def _band_all(means, trusted, A, radii, starts, n, p):
    """The pairs i < j of caps, in merge_by_band's (row-major) order, whose band test may say yes:
    (i, j, 1) joined, (i, j, -1) undecided (three (q,) arrays); every other pair surely not."""
    c = means.shape[0]
    first, second, state = np.empty(c * c, np.int64), np.empty(c * c, np.int64), np.empty(c * c, np.int64)
    q = 0
    for i in range(c):
        for j in range(i + 1, c):
            s = _band_pair(means, trusted, A, radii, starts, n, i, j, p)
            if s != 0:
                first[q], second[q], state[q] = i, j, s
                q += 1
    return first[:q], second[:q], state[:q]


if numba is not None:  # the compiled callers hold the code of _eig_jit's and _null_jit's kernels
    compile_in(globals(), ("_quantile_sorted", "_align", "_needed", "_axis", "_measure", "_band_pair",
                           "_band", "_band_all"), depends=(_eig_jit.__file__, _null_jit.__file__))
