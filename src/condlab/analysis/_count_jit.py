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

from condlab.analysis._cluster_jit import compile_in

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


def _eig(S):
    """Eigenvalues (k,) of symmetric S (k, k), descending, and unit eigenvectors (k, k), as columns.

    Cyclic Jacobi rotations until the off-diagonal's squared norm is below 1e-30 of S's (entries
    ~1e-15 of its norm: backward stable, as LAPACK's eigh; the margins need no more), without a
    LAPACK call per 6 x 6 matrix. Each rotation updates rows / columns p, q of the symmetric
    matrix once (the diagonal pair from apq and t alone).
    """
    k = S.shape[0]
    A, V = S.copy(), np.eye(k)
    total = 0.0
    for i in range(k):
        for j in range(k):
            total += A[i, j] * A[i, j]
    for _ in range(60):
        off = 0.0
        for i in range(k):
            for j in range(i + 1, k):
                off += A[i, j] * A[i, j]
        if off <= 1e-30 * total:
            break
        for p in range(k - 1):
            for q in range(p + 1, k):
                apq = A[p, q]
                if apq * apq <= 1e-34 * total:
                    continue
                theta = (A[q, q] - A[p, p]) / (2.0 * apq)
                t = (1.0 if theta >= 0 else -1.0) / (abs(theta) + math.sqrt(theta * theta + 1.0))
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                A[p, p] -= t * apq
                A[q, q] += t * apq
                A[p, q] = A[q, p] = 0.0
                for r in range(k):
                    if r != p and r != q:
                        arp, arq = A[r, p], A[r, q]
                        A[r, p] = A[p, r] = c * arp - s * arq
                        A[r, q] = A[q, r] = s * arp + c * arq
                for r in range(k):
                    vrp, vrq = V[r, p], V[r, q]
                    V[r, p], V[r, q] = c * vrp - s * vrq, s * vrp + c * vrq
    w = np.empty(k)
    for i in range(k):
        w[i] = A[i, i]
    order = np.argsort(-w)
    return w[order], V[:, order]


def _unit_vector(v):
    norm = 0.0
    for i in range(len(v)):
        norm += v[i] * v[i]
    return v / math.sqrt(norm)


def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for i in range(1, 100000):
        m2 = 2 * i
        aa = i * (b - i) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + i) * (qab + i) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _ibeta(a, b, x):
    """Regularized incomplete beta I_x(a, b) (scipy's betainc), to ~1e-13 relative."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
                     + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _null(r, m, k, margin, r_min, alpha):
    """Whether chance_p (_structures.py) of a group is <= alpha: 1 / 0, or -1 when undecided.

    r (n,): the members' angles to the group's mean line, ascending. chance_p = min over j of
    m·Pr[Bin(m - 1, P(2 r_j)) >= j - 1] (capped at 1), P the cap share I_{sin²}((k - 1)/2, 1/2),
    the binomial tail I_P(j - 1, m - j + 1) (scipy's bdtrc(j - 2, m - 1, P)). Each term grows
    with r_j, so terms at r_j + margin bound chance_p from above (1 as soon as one is <= alpha)
    and terms at r_j - margin from below (0 when all stay above alpha); a relative margin of
    1e-6 covers the incomplete beta's rounding (~1e-13).
    """
    # The result is 1 as soon as any term's upper value clears alpha, whatever the others, so
    # the upper values are tried first, last terms first (a tight group's smallest is there),
    # and the lower values only for a group that none of them decides.
    half = (k - 1) / 2
    for j in range(len(r), 1, -1):
        share = _ibeta(half, 0.5, _sin2(r[j - 1] + margin, r_min))
        if math.floor((m - 1) * share * (1 - 1e-6)) >= j - 1:
            # j - 1 <= floor of the mean, at or below the median: the tail is >= 1/2, so the
            # term is >= m / 2 > alpha (alpha < 1/2), at r_j + margin and r_j - margin alike
            continue
        if m * _ibeta(j - 1.0, m - j + 1.0, share) * (1 + 1e-6) <= alpha:
            return 1
    for j in range(len(r), 1, -1):
        share = _ibeta(half, 0.5, _sin2(r[j - 1] - margin, r_min))
        if math.floor((m - 1) * share * (1 - 1e-6)) >= j - 1:
            continue
        if min(1.0, m * _ibeta(j - 1.0, m - j + 1.0, share)) * (1 - 1e-6) <= alpha:
            return -1
    return 0


def _sin2(r, r_min):
    """sin² of twice the angle r (degrees), floored at r_min and capped at 90: cap_share's x."""
    return math.sin(math.radians(min(90.0, 2 * max(r, r_min)))) ** 2


def _power(G, eig_gap):
    """Top unit eigenvector of a Gram matrix G (k, k) by power iteration, and whether it is
    certain: the residual r = |Gv - ρv| (ρ = vᵀGv) and the gap δ = ρ - l2, with l2 <= tr G - ρ
    (G is positive semi-definite), bound its angle to the true one by r / δ (Davis-Kahan);
    certain where that is <= 1e-11 rad and δ > eig_gap · (ρ + r) (well-posed, as the
    eigendecomposition's test). A tight group's l2 / l1 is ~0.01: a few steps."""
    k = G.shape[0]
    tr, big = 0.0, 0
    for i in range(k):
        tr += G[i, i]
        if G[i, i] > G[big, big]:
            big = i
    v = np.empty(k)
    norm = math.sqrt(G[big, big])
    if norm == 0.0:
        return v, False
    for i in range(k):
        v[i] = G[i, big] / norm  # the column of the largest diagonal entry: near the top one
    v = _unit_vector(v)
    u = np.empty(k)
    for _ in range(40):
        rho, uu = 0.0, 0.0
        for i in range(k):
            u[i] = 0.0
            for j in range(k):
                u[i] += G[i, j] * v[j]
            rho += v[i] * u[i]
        res = 0.0
        for i in range(k):
            res += (u[i] - rho * v[i]) ** 2
            uu += u[i] * u[i]
        res = math.sqrt(res)
        gap = rho - (tr - rho) - 1e-13 * tr  # rho - l2, l2 <= tr - l1 <= tr - rho (+ rounding)
        if gap > eig_gap * (rho + res) and res <= 1e-11 * gap:
            return v, True
        if gap <= 0.0 and _ > 3:
            return v, False  # no dominant eigenvalue: left to the eigendecomposition
        uu = math.sqrt(uu)
        for i in range(k):
            v[i] = u[i] / uu
    return v, False


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


def _gram(X):
    """XᵀX (k, k) of rows X (n, k) (loops: no BLAS binding to compile)."""
    n, k = X.shape
    G = np.zeros((k, k))
    for i in range(n):
        for a in range(k):
            for b in range(k):
                G[a, b] += X[i, a] * X[i, b]
    return G


def _dots(X, v):
    """X @ v (n,) for rows X (n, k) and v (k,)."""
    out = np.zeros(X.shape[0])
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            out[i] += X[i, j] * v[j]
    return out


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
        if math.hypot(x[i], y[i]) < tiny:
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
        if axis:  # the full eigendecomposition: mean line and tangent axis
            w, V = _eig(G)
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
        if close <= margin or math.hypot(x, y) < tiny:
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


if numba is not None:
    compile_in(globals(), ("_betacf", "_ibeta", "_null", "_sin2", "_eig", "_unit_vector", "_power", "_align",
                           "_gram", "_dots", "_quantile_sorted", "_needed", "_axis", "_measure", "_band_pair",
                           "_band", "_band_all"))
