"""`count_lines` of a whole stack of layers in one compiled call (numba, GIL released).

The per-layer pipeline of `count_lines` -- unit rows, canonical order and amplitude filter
(`_prepare`), the clustering (`_cluster_jit._cluster`), the caps' measures and band tests
(`_count_jit._measure`, `_band_all`), the band merges, the breadth-first gap splits, the null
model, the arc rule and the final count -- as one loop over the layers, with no Python
between them. Every decision is taken only where `count_lines`' own margin rules take it; a
layer where one is not (an undecided -1, a clustering decision within its margin, a case not
handled here) is marked -1 and recounted by `count_lines` in Python, so a count never
depends on this path.

What _prepare computes with numpy's reductions is computed here in loops (another order of
the same float work), so it is trusted only where rounding cannot matter: the amplitudes'
order only where no two non-zero amplitudes are within a relative AMP_MARGIN (ties, e.g.
duplicate rows, go to Python: numpy breaks them by row values), the amplitude filter only
where no amplitude is within AMP_MARGIN of the cutoff. Unit rows then differ from numpy's by
~1e-16, far inside the clustering's 1e-9 and the caps' 1e-4 degree margins.
"""

from __future__ import annotations

import math

import numpy as np

from condlab.analysis import _cluster_jit, _count_jit, _eig_jit, _null_jit
from condlab.analysis._cluster_jit import compile_in

numba = _count_jit.numba
AMP_MARGIN = 1e-12  # relative; sums of k squares in another order differ by ~k ulp (1e-16)
FALLBACK = -1


def _unit_active(W, ratio, margin):
    """Canonical unit rows (n, k) of the active rows of W (m, k), as _prepare; ok False where
    rounding could change the order or the filter (or W is not finite)."""
    m, k = W.shape
    amp = np.zeros(m)
    for i in range(m):
        s = 0.0
        for j in range(k):
            s += W[i, j] * W[i, j]
        amp[i] = math.sqrt(s)
        if not math.isfinite(amp[i]):
            return np.empty((0, k)), False
    nonzero = np.flatnonzero(amp > 0)
    order = nonzero[np.argsort(-amp[nonzero], kind="mergesort")]
    a = amp[order]
    for i in range(len(a) - 1):
        if a[i] - a[i + 1] <= margin * a[i]:
            return np.empty((0, k)), False  # a (near) tie: numpy orders it by row values
    if len(a) == 0:
        return np.empty((0, k)), False
    # _amplitude_reference: np.quantile(linear) of the amplitudes at 0.9 (_sorted_quantile)
    s = a[::-1]
    v = (len(s) - 1) * 0.9
    if v >= len(s) - 1:
        ref = s[len(s) - 1]
    else:
        i = int(math.floor(v))
        g = v - i
        d = s[i + 1] - s[i]
        ref = s[i + 1] - d * (1 - g) if g >= 0.5 else s[i] + d * g
    cutoff = ratio * ref
    n = 0
    for i in range(len(a)):
        if abs(a[i] - cutoff) <= margin * cutoff:
            return np.empty((0, k)), False
        if a[i] >= cutoff:
            n += 1
    U = np.empty((n, k))
    for i in range(n):
        for j in range(k):
            U[i, j] = W[order[i], j] / a[i]
    return U, True


def _min_count(min_share, n):
    if min_share == 0:
        return 1
    return max(2, math.ceil(min_share * n - 1e-9))


def _labels(U, thr, min_count, seed_rows, max_iter, margin):
    """cluster_labels (n,) of canonical U and ok (False: a decision within margin, or a sample)."""
    n = U.shape[0]
    if n > seed_rows and min_count != 1:
        return np.full(n, -1, np.int64), False  # sampled seeds: left to Python
    sample = np.arange(n)
    need = 1 if min_count == 1 else max(2, (min_count * n) // (2 * n))
    return _cluster_jit._cluster(U, sample, thr, need, max_iter, margin)


def _batch(U, groups, depths, piece_min, min_count, m, p):
    """_count_jit._measure of groups (index arrays into U) at depths: rows, starts, sizes, results."""
    c, k = len(groups), U.shape[1]
    sizes, starts, depth = np.empty(c, np.int64), np.empty(c, np.int64), np.empty(c, np.int64)
    total = 0
    for g in range(c):
        sizes[g], starts[g], depth[g] = len(groups[g]), total, depths[g]
        total += len(groups[g])
    rows = np.empty(total, np.int64)
    for g in range(c):
        rows[starts[g]:starts[g] + sizes[g]] = groups[g]
    X = np.empty((total, k))
    for i in range(total):
        X[i] = U[rows[i]]
    out = _count_jit._measure(X, starts, sizes, depth, piece_min, min_count, m, p)
    return rows, starts, sizes, out


def _pieces(labels, piece_min):
    """Caps' rows: per label with >= piece_min members (label order), its rows ascending."""
    top = -1
    for t in labels:
        top = max(top, t)
    sizes = np.zeros(top + 1, np.int64)
    for t in labels:
        if t >= 0:
            sizes[t] += 1
    pieces = []
    for b in range(top + 1):
        if sizes[b] >= piece_min:
            pieces.append(np.flatnonzero(labels == b))
    return pieces, sizes


def _unions(caps, means, trusted, A, radii, starts, sizes, p):
    """merge_by_band's groups of caps (root order, members ascending); ok False where a band
    test it asks is undecided."""
    c = len(caps)
    parent = np.arange(c)
    if c > 1:
        first, second, state = _count_jit._band_all(means, trusted, A, radii, starts, sizes, p)
        for q in range(len(first)):
            i, j = _root(parent, first[q]), _root(parent, second[q])
            if i == j:
                continue
            if state[q] != 1:
                return [np.empty(0, np.int64)], False
            parent[j] = i
    roots = np.array([_root(parent, i) for i in range(c)], np.int64)
    groups = []
    for i in range(c):
        if roots[i] == i:
            groups.append(np.flatnonzero(roots == i))
    return groups, True


def _joined_rows(caps, members):
    """The rows of the caps `members`, ascending (np.sort of their concatenation)."""
    total = 0
    for i in members:
        total += len(caps[i])
    out = np.empty(total, np.int64)
    at = 0
    for i in members:
        out[at:at + len(caps[i])] = caps[i]
        at += len(caps[i])
    return np.sort(out)


def _root(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def _count_layer(W, thr, ratio, min_share, seed_rows, max_iter, margin, amp_margin, p):
    """count_lines of one layer W (m, k), or FALLBACK where a decision is left to Python."""
    U, ok = _unit_active(W, ratio, amp_margin)
    if not ok:
        return FALLBACK
    n = U.shape[0]
    if n == 0:
        return FALLBACK
    min_count = _min_count(min_share, n)
    labels, ok = _labels(U, thr, min_count, seed_rows, max_iter, margin)
    if not ok:
        return FALLBACK
    piece_min = max(2, (min_count + 1) // 2)
    if min_count == 1:
        piece_min = 1
    caps, sizes = _pieces(labels, piece_min)
    if min_count == 1:  # every cap is a line of its own
        return len(caps)
    rows, starts, n_rows, out = _batch(U, caps, np.zeros(len(caps), np.int64), piece_min, min_count, n, p)
    unions, ok = _unions(caps, out[0], out[1], out[2], out[8], starts, n_rows, p)
    if not ok:
        return FALLBACK
    groups, depths = [], []
    for u in unions:  # caps merged with others: measured again as one group, from depth 0
        if len(u) > 1:
            groups.append(_joined_rows(caps, u))
            depths.append(0)
    alone = np.zeros(len(caps), np.bool_)
    for u in unions:
        if len(u) == 1:
            alone[u[0]] = True
    lines = _tally(rows, starts, n_rows, np.zeros(len(caps), np.int64), out, alone, min_count,
                   groups, depths)
    while lines >= 0 and len(groups) > 0:  # split_by_gap, breadth first: one depth per round
        todo, todo_depth = groups, depths
        groups, depths = [np.empty(0, np.int64) for _ in range(0)], [0 for _ in range(0)]
        rows, starts, n_rows, out = _batch(U, todo, todo_depth, piece_min, min_count, n, p)
        more = _tally(rows, starts, n_rows, np.array(todo_depth, np.int64), out,
                      np.ones(len(todo), np.bool_), min_count, groups, depths)
        lines = -1 if more < 0 else lines + more
    return lines if lines >= 0 else FALLBACK


def _tally(rows, starts, n_rows, depth, out, use, min_count, groups, depths):
    """Lines among the groups of a measured batch (those with use[g]); the parts of sure cuts
    appended to groups / depths; -1 where an answer is undecided."""
    whole, arc, cut, phi, condensed = out[3], out[4], out[5], out[6], out[7]
    lines = 0
    for g in range(len(n_rows)):
        if not use[g]:
            continue
        lo, hi = starts[g], starts[g] + n_rows[g]
        if whole[g] == 1:
            if n_rows[g] < min_count or condensed[g] == 0:
                continue
            if condensed[g] == -1 or arc[g] == -1:
                return -1
            if arc[g] == 0:
                lines += 1
        elif not np.isnan(cut[g]):
            left = phi[lo:hi] < cut[g]
            groups.append(rows[lo:hi][left])
            groups.append(rows[lo:hi][~left])
            depths.append(depth[g] + 1)
            depths.append(depth[g] + 1)
        else:
            return -1
    return lines


def _count_stack(Ws, thr, ratio, min_share, seed_rows, max_iter, margin, amp_margin, p):
    """_count_layer of each layer of Ws (K, m, k) -> (K,) counts, FALLBACK where undecided."""
    out = np.empty(Ws.shape[0], np.int64)
    for r in range(Ws.shape[0]):
        out[r] = _count_layer(Ws[r], thr, ratio, min_share, seed_rows, max_iter, margin, amp_margin, p)
    return out


if numba is not None:  # the compiled callers hold the code of _cluster_jit's and _count_jit's kernels
    compile_in(globals(), ("_unit_active", "_min_count", "_labels", "_batch", "_pieces", "_unions",
                           "_root", "_joined_rows", "_count_layer", "_tally", "_count_stack"),
               depends=(_cluster_jit.__file__, _count_jit.__file__, _eig_jit.__file__, _null_jit.__file__))
