"""All caps of a layer at once: the answers of the count's tests where rounding cannot matter.

`count_lines` asks the tests of _structures.py (band test, gap split, null model, arc width)
about every cap of a layer. Here each test is evaluated for all caps (or all pairs of caps) at
once (compiled loops in _count_jit.py; the array code below where numba is missing), in
another order than _structures.py uses, so with other rounding:
mean lines and angles differ from its values by far less than 1e-6 degrees where they are
well-posed (flagged where not). Where every compared angle clears its threshold by
MARGIN_DEG, and the null model's p-value stays on one side of NULL_ALPHA when every angle
moves by MARGIN_DEG either way (it grows with every angle), the answer is the full test's
answer; every other case is left undecided (-1) for the full test of _structures.py.

Well-posed: a cap's mean line (principal axis) is trusted only where the top two eigenvalues
of its Gram matrix (of TᵀT) are apart by more than EIG_GAP of the top one, so that the
eigenvector's rounding stays ~1e-10 rad; an angle from atan2 only where its arguments are
not both below _TINY.
"""

from __future__ import annotations

import numpy as np
from scipy.special import bdtrc

from condlab.analysis import _count_jit
from condlab.analysis._structures import (
    _FAR_COS,
    ARC_DEG,
    GAP_MARGIN,
    GAP_MIN_DEG,
    MERGE_MAX_DEG,
    MIN_FILL,
    NULL_ALPHA,
    R_MIN_DEG,
    SPLIT_DEPTH,
    cap_share,
)

MARGIN_DEG = 1e-4  # far above the rounding of an angle computed in another order
EIG_GAP = 1e-6
_TINY = 1e-6
# the constants of the compiled measures (_count_jit), in its order
_PARAMS = np.array([MARGIN_DEG, EIG_GAP, _TINY, ARC_DEG, GAP_MIN_DEG, GAP_MARGIN, SPLIT_DEPTH, _FAR_COS,
                    MERGE_MAX_DEG, MIN_FILL, R_MIN_DEG, NULL_ALPHA])


def _needed(span: np.ndarray, n: np.ndarray) -> np.ndarray:
    """needed_gap of _structures.py, elementwise."""
    return np.maximum(GAP_MIN_DEG, span / (n + 1) * (np.log(n + 1) + GAP_MARGIN))


def _tri(sure: np.ndarray, value: np.ndarray) -> list[int]:
    """1 / 0 where sure (value True / False), -1 (undecided) elsewhere."""
    return np.where(sure, value.astype(np.int64), -1).tolist()


class Batch:
    """Groups of unit rows of U (n, k), each a sorted index array of >= 2 rows, and their tests.

    Per group, 1 / 0 / -1 (undecided): ``whole`` (split_by_gap at ``depth`` leaves it whole),
    ``arc`` (is_arc), ``condensed`` (chance <= NULL_ALPHA, for m rows in all); ``split[i]``,
    when split_by_gap surely cuts group i, its two parts (the cut of split_by_gap: angles
    below / above the middle of the widest gap, which is at least GAP_MIN_DEG wide), else None.
    ``means`` (c, k): the groups' mean lines, up to rounding (``trusted`` where well-posed).
    """

    def __init__(self, U: np.ndarray, groups: list[np.ndarray], piece_min: int, m: int,
                 depth: np.ndarray | None = None, min_count: int = 2, rows: np.ndarray | None = None):
        """`rows` (with groups of views into it): the groups' rows one after the other, if known."""
        c, k = len(groups), U.shape[1]
        self.groups, self.piece_min, self.min_count = groups, piece_min, min_count
        self.means = np.zeros((0, k))
        self.whole: list[int] = []
        self.arc: list[int] = []
        self.condensed: list[int] = []
        self.split: list[tuple[np.ndarray, np.ndarray] | None] = [None] * c
        if c == 0:
            return
        self.depth = np.zeros(c, np.int64) if depth is None else depth
        self.n = np.array([len(g) for g in groups])
        self.starts = np.cumsum(self.n) - self.n
        self.rows = np.concatenate(groups) if rows is None else rows
        X = U[self.rows]
        if _count_jit.numba is not None:
            self._measure_compiled(X, m)
            return
        self.owner = np.repeat(np.arange(c), self.n)
        w, V = np.linalg.eigh(np.add.reduceat(np.einsum("ni,nj->nij", X, X), self.starts))
        self.means = np.ascontiguousarray(V[:, :, -1])
        self.trusted = (w[:, -1] - w[:, -2] > EIG_GAP * w[:, -1]) if k > 1 else np.ones(c, bool)
        M = self.means[self.owner]
        x = np.einsum("ij,ij->i", X, M)
        self.A = X * np.where(x < 0, -1.0, 1.0)[:, None]  # members aligned to their mean line
        x = np.abs(x)
        self.condensed = self._null_model(np.degrees(np.arccos(np.minimum(x, 1.0))), k, m)
        self.whole, self.arc = [-1] * c, [-1] * c
        if k > 1:
            self._axis_tests(x, M)

    def _measure_compiled(self, X: np.ndarray, m: int) -> None:
        """What the array code below measures, by _count_jit._measure (numba)."""
        self.means, self.trusted, self.A, whole, arc, cut, phi, condensed, self.radii = _count_jit._measure(
            X, self.starts, self.n, self.depth, self.piece_min, self.min_count, m, _PARAMS)
        self.whole, self.arc, self.condensed = whole.tolist(), arc.tolist(), condensed.tolist()
        for i in np.flatnonzero(~np.isnan(cut)).tolist():
            sl = slice(self.starts[i], self.starts[i] + self.n[i])
            left = phi[sl] < cut[i]
            self.split[i] = (self.rows[sl][left], self.rows[sl][~left])

    def _null_model(self, radii: np.ndarray, k: int, m: int) -> list[int]:
        """chance_p of each group <= NULL_ALPHA, decided when the angles +- MARGIN_DEG agree
        (chance_p grows with every angle); -1 for groups below min_count (never asked)."""
        c = len(self.n)
        if k < 2:
            return [0] * c  # chance_p is 1 in R^1
        order = np.lexsort((radii, self.owner))  # by group, then angle: owner stays in order
        pos = np.arange(len(order)) - self.starts[self.owner]
        later = (pos >= 1) & (self.n >= self.min_count)[self.owner]  # j-th closest, j = 2..n
        r, j, g = radii[order][later], pos[later] + 1, self.owner[later]

        def smallest_p(sel: np.ndarray, shift: float) -> np.ndarray:
            p = m * bdtrc(j[sel] - 2, m - 1, cap_share(2 * np.maximum(r[sel] + shift, R_MIN_DEG), k))
            out = np.full(c, np.inf)
            np.minimum.at(out, g[sel], p)
            return np.minimum(1.0, out)

        high = smallest_p(np.ones(len(r), bool), MARGIN_DEG) <= NULL_ALPHA  # condensed for sure
        low = np.zeros(c, bool)
        if not high[g].all():  # the others: not condensed for sure?
            low = smallest_p(~high[g], -MARGIN_DEG) > NULL_ALPHA
        sure = self.trusted & (self.n >= self.min_count) & (high | low)
        return _tri(sure, high)

    def _axis_tests(self, x: np.ndarray, M: np.ndarray) -> None:
        """whole and arc of every cap from its members' angles along its principal axis."""
        c, ms, owner = len(self.n), self.piece_min, self.owner
        T = self.A - x[:, None] * M
        w, V = np.linalg.eigh(np.add.reduceat(np.einsum("ni,nj->nij", T, T), self.starts))
        y = np.einsum("ij,ij->i", T, V[:, :, -1][owner])
        phi = np.degrees(np.arctan2(y, x))
        ok = self.trusted & (w[:, -1] - w[:, -2] > EIG_GAP * w[:, -1])
        tiny = np.zeros(c, bool)
        tiny[owner[np.hypot(x, y) < _TINY]] = True
        ok &= ~tiny
        ps = phi[np.lexsort((phi, owner))]  # sorted within each cap
        n, last = self.n, self.starts + self.n - 1
        span = ps[last] - ps[self.starts]
        # split_by_gap: the widest gap leaving piece_min angles on each side vs needed_gap
        pos = np.arange(len(ps)) - self.starts[owner]
        inner = (pos >= ms - 1) & (pos <= n[owner] - ms - 1)
        widest = np.full(c, -np.inf)
        np.maximum.at(widest, owner[:-1][inner[:-1]], np.diff(ps)[inner[:-1]])
        needed = _needed(span, n)
        small = (n < 2 * ms) | (self.depth >= SPLIT_DEPTH)  # split_by_gap leaves these whole
        self.whole = _tri(small | (ok & (widest + MARGIN_DEG < needed)), np.ones(c, bool))
        # a sure cut: the widest gap clears needed_gap and every other gap by the margin
        d_owner, gaps = owner[:-1][inner[:-1]], np.diff(ps)[inner[:-1]]
        top = gaps >= widest[d_owner] - MARGIN_DEG
        unique = np.bincount(d_owner[top], minlength=c) == 1
        cuts = ~small & ok & unique & (widest - MARGIN_DEG >= needed)
        if cuts.any():
            at = np.flatnonzero(inner[:-1])[top]  # sorted position of each group's widest gap
            cut = np.full(c, np.nan)
            cut[d_owner[top]] = (ps[at] + ps[at + 1]) / 2
            left = phi < cut[owner]
            for i in np.flatnonzero(cuts).tolist():
                sl = slice(self.starts[i], self.starts[i] + n[i])
                self.split[i] = (self.rows[sl][left[sl]], self.rows[sl][~left[sl]])
        # is_arc: the range first, then the 5 %-95 % span (np.quantile's linear interpolation)
        width = self._quantile(ps, 0.95) - self._quantile(ps, 0.05)
        narrow = span + MARGIN_DEG < ARC_DEG - 1e-6
        self.arc = _tri(ok & (narrow | (np.abs(width - ARC_DEG) > MARGIN_DEG)), ~narrow & (width >= ARC_DEG))

    def _quantile(self, ps: np.ndarray, q: float) -> np.ndarray:
        """q-quantile (c,) of each cap's sorted angles (ps grouped by cap), as np.quantile."""
        h = (self.n - 1) * q
        f = np.floor(h).astype(np.int64)
        a, b = ps[self.starts + f], ps[self.starts + np.minimum(f + 1, self.n - 1)]
        return a + (b - a) * (h - f)



class Caps(Batch):
    """The caps (pieces) of one clustering of U (n, k), as a Batch, and their band tests.

    ``groups[i]`` = np.flatnonzero(labels == b) for the i-th label b with at least piece_min
    members: the pieces of `_structures`, in its order.
    """

    def __init__(self, U: np.ndarray, labels: np.ndarray, sizes: np.ndarray, piece_min: int, m: int,
                 min_count: int = 2):
        keep = np.flatnonzero(sizes >= piece_min)
        rank = np.full(len(sizes), -1)
        rank[keep] = np.arange(keep.size)
        rows = np.flatnonzero(labels >= 0)
        owner = rank[labels[rows]]
        rows, owner = rows[owner >= 0], owner[owner >= 0]
        rows = rows[np.argsort(owner, kind="stable")]  # one sort: each piece's rows, ascending
        ends = np.cumsum(sizes[keep]).tolist()
        pieces = [rows[a:b] for a, b in zip([0] + ends[:-1], ends, strict=True)] if ends else []
        super().__init__(U, pieces, piece_min, m, None, min_count, rows)

    def band_pairs(self) -> list[tuple[int, int, int]]:
        """(i, j, 1 / -1) for the pairs of caps, i < j in merge_by_band's order, whose band test
        says yes (1) or is undecided (-1); every other pair surely stays apart."""
        if len(self.groups) < 2:
            return []
        if _count_jit.numba is not None:
            ijs = _count_jit._band_all(self.means, self.trusted, self.A, self.radii, self.starts,
                                       self.n, _PARAMS)
            return list(zip(*(x.tolist() for x in ijs), strict=True))
        pairs = np.argwhere(np.triu(np.abs(self.means @ self.means.T) >= _FAR_COS, 1))  # i, then j
        return [(i, j, s) for (i, j), s in zip(pairs.tolist(), self.band_tests(pairs), strict=True) if s != 0]

    def band_tests(self, pairs: np.ndarray) -> list[int]:
        """`_joined` of caps (i, j) for each row of pairs (p, 2): 1 / 0, or -1 when undecided."""
        if len(pairs) == 0:
            return []
        if _count_jit.numba is not None:
            return _count_jit._band(self.means, self.trusted, self.A, self.radii, self.starts, self.n,
                                    pairs, _PARAMS).tolist()
        P = len(pairs)
        ca, cb = self.means[pairs[:, 0]], self.means[pairs[:, 1]]
        dot = np.einsum("ij,ij->i", ca, cb)
        flip = np.where(dot < 0, -1.0, 1.0)
        cb = cb * flip[:, None]
        alpha = np.degrees(np.arccos(np.minimum(1.0, np.abs(dot))))
        e2 = cb - np.abs(dot)[:, None] * ca
        # a pair on one line (alpha ~ 0) has no plane: left to _joined below (alpha < 1e-3)
        e2 /= np.maximum(np.linalg.norm(e2, axis=1, keepdims=True), 1e-300)
        # each pair's rows: cap i aligned to ca, cap j aligned to its own mean, flipped to cb
        seg = pairs.ravel()
        length = self.n[seg]
        idx = np.repeat(self.starts[seg] - (np.cumsum(length) - length), length) + np.arange(length.sum())
        q = np.repeat(np.arange(2 * P) // 2, length)
        R = self.A[idx] * np.repeat(np.stack([np.ones(P), flip], axis=1).ravel(), length)[:, None]
        x, y = np.einsum("ij,ij->i", R, ca[q]), np.einsum("ij,ij->i", R, e2[q])
        phi = np.degrees(np.arctan2(y, x))
        a = alpha[q]
        close = np.minimum.reduce([np.abs(phi - t) for t in (0.0, a, a / 4, 3 * a / 4)])
        doubt = np.bincount(q[(close <= MARGIN_DEG) | (np.hypot(x, y) < _TINY)], minlength=P) > 0
        inside = (phi > 0) & (phi < a)
        n_in = np.bincount(q[inside], minlength=P)
        middle = np.bincount(q[inside & (phi > a / 4) & (phi < 3 * a / 4)], minlength=P)
        # the band: 0, alpha and the angles inside, sorted per pair; its widest gap
        vals = np.concatenate([phi[inside], np.zeros(P), alpha])
        who = np.concatenate([q[inside], np.arange(P), np.arange(P)])
        o = np.lexsort((vals, who))
        v, w = vals[o], who[o]
        widest = np.full(P, -np.inf)
        same = w[1:] == w[:-1]
        np.maximum.at(widest, w[1:][same], np.diff(v)[same])
        needed = _needed(alpha, n_in)
        doubt |= (np.abs(widest - needed) <= MARGIN_DEG) | (alpha < 1e-3) | (np.abs(dot) < _FAR_COS)
        doubt |= (np.abs(alpha - MERGE_MAX_DEG) <= MARGIN_DEG) | ~self.trusted[pairs].all(axis=1)
        joined = (middle >= np.maximum(2, MIN_FILL * n_in)) & (widest < needed) & (alpha <= MERGE_MAX_DEG)
        return _tri(~doubt, joined)
