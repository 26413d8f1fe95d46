"""All caps of a layer at once: the answers of the gap rule's tests where rounding cannot matter.

`count_lines` asks the tests of _structures.py (band test, gap split, arc width) about every
cap of a layer. Here each test is first evaluated for all caps (or all pairs of caps) in a
few array operations, in another order than _structures.py does it, so with other rounding
(angles differ by ~1e-12 degrees, ~1e-6 near ill-conditioned atan2 arguments, which are
flagged). Where every compared quantity clears its threshold by BOUND_MARGIN_DEG, the answer
is the full test's answer; everything else is left undecided (None) for the full test of
_structures.py on the same arrays. A principal axis is trusted only where the top two
eigenvalues of TᵀT are apart by more than AXIS_GAP of the top one (else the axis itself is
ill-conditioned: undecided).
"""

from __future__ import annotations

import numpy as np

from condlab.analysis._structures import _FAR_COS, ARC_DEG, GAP_MARGIN, GAP_MIN_DEG, MERGE_MAX_DEG, MIN_FILL

BOUND_MARGIN_DEG = 1e-4  # far above the rounding of an angle computed in another order
AXIS_GAP = 1e-6
_TINY = 1e-6  # atan2 arguments shorter than this: the angle is ill-conditioned, undecided


def _needed(span: np.ndarray, n: np.ndarray) -> np.ndarray:
    """needed_gap of _structures.py, elementwise."""
    return np.maximum(GAP_MIN_DEG, span / (n + 1) * (np.log(n + 1) + GAP_MARGIN))


def _max_by(values: np.ndarray, owner: np.ndarray, n_owner: int) -> np.ndarray:
    """Largest value per owner (-inf where none); owner (r,) in 0..n_owner-1."""
    out = np.full(n_owner, -np.inf)
    np.maximum.at(out, owner, values)
    return out


class Caps:
    """The caps (pieces) of one clustering of unit rows U (n, k), their means and decided tests.

    ``pieces[i]`` = np.flatnonzero(labels == b) for the i-th label b with at least piece_min
    members, the pieces of `_structures` in its order; ``means`` (c, k) their mean lines,
    from one stacked eigh (each row the bits of ``mean_line(U[piece])``, a view of stride k as
    there). ``no_split[i]`` / ``arc[i]``: the answer of split_by_gap (no cut) / is_arc for the
    whole cap i when decided, else None.
    """

    def __init__(self, U: np.ndarray, labels: np.ndarray, sizes: np.ndarray, piece_min: int):
        keep = np.flatnonzero(sizes >= piece_min)
        self.pieces: list[np.ndarray] = []
        if keep.size == 0:
            return
        self.U, self.piece_min, self.sizes = U, piece_min, sizes[keep]
        rank = np.full(len(sizes), -1)
        rank[keep] = np.arange(keep.size)
        rows = np.flatnonzero(labels >= 0)
        owner = rank[labels[rows]]
        rows, owner = rows[owner >= 0], owner[owner >= 0]
        by = np.argsort(owner, kind="stable")  # one sort for all pieces: sorted rows per cap
        self.rows, self.owner = rows[by], owner[by]
        self.starts = np.r_[0, np.cumsum(self.sizes)[:-1]]
        self.pieces = np.split(self.rows, self.starts[1:])
        self.means = np.linalg.eigh(np.stack([U[p].T @ U[p] for p in self.pieces]))[1][:, :, -1]
        self._axis_tests()

    def _axis_tests(self) -> None:
        """no_split and arc of every cap from its members' angles along its principal axis."""
        c, k = len(self.pieces), self.U.shape[1]
        self.no_split: list[bool | None] = [None] * c
        self.arc: list[bool | None] = [None] * c
        M = np.ascontiguousarray(self.means)[self.owner]
        X = self.U[self.rows]
        s = np.sign(np.einsum("ij,ij->i", X, M))
        self.A = X * np.where(s == 0, 1.0, s)[:, None]  # members aligned to their mean line
        if k < 2:
            return
        x = np.einsum("ij,ij->i", self.A, M)
        T = self.A - x[:, None] * M
        w, V = np.linalg.eigh(np.add.reduceat(np.einsum("ni,nj->nij", T, T), self.starts))
        y = np.einsum("ij,ij->i", T, V[:, :, -1][self.owner])
        phi = np.degrees(np.arctan2(y, x))
        trusted = w[:, -1] - w[:, -2] > AXIS_GAP * w[:, -1]
        trusted &= _max_by(-np.hypot(x, y), self.owner, c) < -_TINY  # every member well-posed
        order = np.lexsort((phi, self.owner))
        ps, n = phi[order], self.sizes
        lo, hi = ps[self.starts], ps[self.starts + n - 1]
        span = hi - lo
        # split_by_gap: the widest gap leaving piece_min angles on each side vs needed_gap.
        ms = self.piece_min
        pos = np.arange(len(ps)) - self.starts[self.owner[order]]
        ok = (pos >= ms - 1) & (pos <= n[self.owner[order]] - ms - 1)
        gaps = np.where(ok[:-1], np.diff(ps), -np.inf)
        widest = _max_by(gaps, self.owner[order][:-1], c) if len(gaps) else np.full(c, -np.inf)
        needed = _needed(span, n)
        # is_arc: range, then the 5 %-95 % span (np.quantile's linear interpolation)
        width = self._quantile(ps, 0.95) - self._quantile(ps, 0.05)
        for i in range(c):
            if n[i] < 2 * ms:
                self.no_split[i] = True  # split_by_gap never cuts so few members
            elif trusted[i] and abs(widest[i] - needed[i]) > BOUND_MARGIN_DEG and widest[i] < needed[i]:
                self.no_split[i] = True
            if trusted[i] and span[i] + BOUND_MARGIN_DEG < ARC_DEG - 1e-6:
                self.arc[i] = False
            elif trusted[i] and abs(width[i] - ARC_DEG) > BOUND_MARGIN_DEG:
                self.arc[i] = bool(width[i] >= ARC_DEG)

    def _quantile(self, ps: np.ndarray, q: float) -> np.ndarray:
        """q-quantile (c,) of each cap's sorted angles (ps grouped by cap), as np.quantile."""
        h = (self.sizes - 1) * q
        f = np.floor(h).astype(np.int64)
        nxt = np.minimum(f + 1, self.sizes - 1)
        a, b = ps[self.starts + f], ps[self.starts + nxt]
        return a + (b - a) * (h - f)

    def band_tests(self, pairs: np.ndarray) -> list[bool | None]:
        """`_joined` of caps (i, j) for each row of pairs (p, 2) where decided, else None."""
        if len(pairs) == 0:
            return []
        M = np.ascontiguousarray(self.means)
        i, j = pairs[:, 0], pairs[:, 1]
        dot = np.einsum("ij,ij->i", M[i], M[j])
        flip = np.where(dot < 0, -1.0, 1.0)
        ca, cb = M[i], M[j] * flip[:, None]
        alpha = np.degrees(np.arccos(np.minimum(1.0, np.abs(dot))))
        e2 = cb - np.einsum("ij,ij->i", cb, ca)[:, None] * ca
        e2 /= np.linalg.norm(e2, axis=1, keepdims=True)
        # each pair's rows: cap i aligned to ca, cap j aligned to cb (= its own mean, flipped)
        seg = pairs.ravel()  # segments: cap i, cap j of pair 0, then of pair 1, ...
        length = self.sizes[seg]
        first = np.cumsum(length) - length
        idx = np.repeat(self.starts[seg] - first, length) + np.arange(length.sum())
        q = np.repeat(np.arange(2 * len(pairs)) // 2, length)
        sgn = np.repeat(np.stack([np.ones(len(pairs)), flip], axis=1).ravel(), length)
        R = self.A[idx] * sgn[:, None]
        x, y = np.einsum("ij,ij->i", R, ca[q]), np.einsum("ij,ij->i", R, e2[q])
        phi = np.degrees(np.arctan2(y, x))
        a = alpha[q]
        near = np.minimum.reduce([np.abs(phi), np.abs(phi - a), np.abs(phi - a / 4), np.abs(phi - 3 * a / 4)])
        unsure = (near < BOUND_MARGIN_DEG) | (np.hypot(x, y) < _TINY)
        inside = (phi > 0) & (phi < a)
        n_in = np.bincount(q[inside], minlength=len(pairs))
        middle = np.bincount(q[inside & (phi > a / 4) & (phi < 3 * a / 4)], minlength=len(pairs))
        filled = middle >= np.maximum(2, MIN_FILL * n_in)
        # the band: 0, alpha and the angles inside, sorted per pair; its widest gap
        vals = np.concatenate([phi[inside], np.zeros(len(pairs)), alpha])
        who = np.concatenate([q[inside], np.arange(len(pairs)), np.arange(len(pairs))])
        o = np.lexsort((vals, who))
        v, w = vals[o], who[o]
        same = w[1:] == w[:-1]
        widest = _max_by(np.where(same, np.diff(v), -np.inf), w[:-1], len(pairs))
        needed = _needed(alpha, n_in)
        doubt = np.bincount(q[unsure], minlength=len(pairs)) > 0
        doubt |= (np.abs(widest - needed) <= BOUND_MARGIN_DEG) | (alpha < 1e-3)
        doubt |= np.abs(dot) < _FAR_COS  # not a pair merge_by_band tests: leave it to _joined
        doubt |= np.abs(alpha - MERGE_MAX_DEG) <= BOUND_MARGIN_DEG
        joined = filled & (widest < needed) & (alpha <= MERGE_MAX_DEG)
        return [None if doubt[p] else bool(joined[p]) for p in range(len(pairs))]
