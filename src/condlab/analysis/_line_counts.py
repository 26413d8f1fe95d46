"""Line counts of many layers (sweep summaries, trackers): the count and nothing else.

``count_lines(W)`` is ``count_orientations(W, sweep=()).n_lines``: the same clustering, gap
rule and null model (analysis/_structures.py) on the same arrays, so the same integer, but
without building what a count does not need (members, means and directions of the clusters,
the scattered and negligible rows, the parameters) and with most of the per-group Python
steps replaced by one array operation over all caps of the layer:

* the caps' mean lines come from one stacked ``eigh`` of their Gram matrices ``U[g].T @ U[g]``
  (the same LAPACK call per matrix as ``mean_line``, so the same bits);
* the band test, the gap split and the arc test are first decided by *bounds* from the
  members' angles to their mean line (computed for all caps at once): a member's angle in
  the plane of two centres, or along a group's principal axis, is at most its angle to the
  group's mean line. A bound that decides with a margin of BOUND_MARGIN_DEG (far above the
  rounding of an angle computed in another order, ~1e-6 degrees) gives the answer of the
  full test; every other case runs the full test of _structures.py on the same arrays;
* the null model's binomial tails of all groups come from one scipy call (elementwise, so
  each value is the one ``chance_p`` computes).

tests/test_line_counts.py holds ``count_lines`` to ``count_orientations`` on planted, random
and trained layers, and each shortcut to the full test it replaces.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from scipy.special import bdtrc

from condlab.analysis._cosine import DEFAULT_CHUNK
from condlab.analysis._orientations import (
    AMPLITUDE_RATIO,
    COS_THRESHOLD,
    MIN_SHARE,
    _cluster_lines,
    _min_count,
    _prepare,
)
from condlab.analysis._structures import (
    _FAR_COS,
    ARC_DEG,
    GAP_MIN_DEG,
    NULL_ALPHA,
    R_MIN_DEG,
    Groups,
    _joined,
    cap_share,
    split_by_gap,
)

BOUND_MARGIN_DEG = 1e-4  # bounds from angles computed in another order decide only beyond this


def count_lines(
    W: Any,
    *,
    cos_threshold: float = COS_THRESHOLD,
    amplitude_ratio: float = AMPLITUDE_RATIO,
    min_share: float = MIN_SHARE,
    chunk: int = DEFAULT_CHUNK,
) -> int:
    """Condensed lines of W (m, k): ``count_orientations(W, sweep=(), ...).n_lines``, cheaper."""
    order, U = _prepare(W, cos_threshold, amplitude_ratio)[4:]
    return _count(U, cos_threshold, _min_count(min_share, len(order)), chunk)


def count_lines_many(layers: Iterable[Any], **count_kwargs: Any) -> list[int]:
    """``count_lines`` of each (m, k) layer of `layers` (a list, or an (R, m, k) array)."""
    return [count_lines(W, **count_kwargs) for W in layers]


def _count(U: np.ndarray, thr: float, min_count: int, chunk: int) -> int:
    """``len(_structures(U, thr, min_count, chunk)[0])`` for canonical unit rows U (n, k)."""
    labels = _cluster_lines(U, thr, min_count, chunk)[0]
    sizes = np.bincount(labels[labels >= 0]) if np.any(labels >= 0) else np.zeros(0, np.int64)
    if min_count == 1:  # every cap is a line of its own: no gap rule, null model or arcs
        return int(np.count_nonzero(sizes >= 1))
    piece_min = max(2, (min_count + 1) // 2)
    caps = _Caps(U, labels, sizes, piece_min)
    if not caps.pieces:
        return 0
    G = Groups(U)
    for p, mean in zip(caps.pieces, caps.means, strict=True):
        G.know_mean(p, mean)
    groups = []  # (rows, index of its cap or -1 when the merge or a split made a new group)
    for members in _merged(G, caps):
        if len(members) == 1 and not caps.may_split(members[0]):
            groups.append((caps.pieces[members[0]], members[0]))
            continue
        rows = caps.pieces[members[0]] if len(members) == 1 else np.sort(
            np.concatenate([caps.pieces[i] for i in members]))
        parts = split_by_gap(G, rows, piece_min)
        groups += [(g, members[0] if len(parts) == 1 and len(members) == 1 else -1) for g in parts]
    groups = [(g, i) for g, i in groups if len(g) >= min_count]
    passed = _chance_many(G, [g for g, _ in groups], len(U)) <= NULL_ALPHA
    return sum(1 for (g, i), ok in zip(groups, passed, strict=True)
               if ok and (caps.surely_narrow(i) or not G.is_arc(g)))


class _Caps:
    """The caps (pieces) of a clustering, their mean lines and bounds on their members' angles.

    ``pieces[i]`` = np.flatnonzero(labels == b) for the i-th label b with at least piece_min
    members (the pieces of `_structures`, in the same order); ``means`` (c, k) their mean lines;
    ``top`` (c, piece_min) the largest angles (degrees) of each cap's members to its mean line,
    descending (from an elementwise product: equal to ``Groups.radii`` up to rounding).
    """

    def __init__(self, U: np.ndarray, labels: np.ndarray, sizes: np.ndarray, piece_min: int):
        self.piece_min = piece_min
        keep = np.flatnonzero(sizes >= piece_min)
        self.pieces: list[np.ndarray] = []
        if keep.size == 0:
            return
        # One stable sort instead of a flatnonzero per label: the same sorted index arrays.
        rank = np.full(len(sizes), -1)
        rank[keep] = np.arange(keep.size)
        owner = rank[labels[labels >= 0]]
        rows = np.flatnonzero(labels >= 0)[owner >= 0]
        owner = owner[owner >= 0]
        by = np.argsort(owner, kind="stable")
        rows, owner = rows[by], owner[by]
        self.pieces = np.split(rows, np.cumsum(sizes[keep])[:-1])
        self.means = np.linalg.eigh(np.stack([U[p].T @ U[p] for p in self.pieces]))[1][:, :, -1]
        cos = np.abs(np.einsum("ij,ij->i", U[rows], self.means[owner]))
        radii = np.degrees(np.arccos(np.minimum(cos, 1.0)))
        desc = np.lexsort((-radii, owner))  # by cap, largest angle first
        start = np.r_[0, np.cumsum(sizes[keep])[:-1]]
        self.sizes = sizes[keep]
        self.top = radii[desc][start[:, None] + np.arange(piece_min)]

    def may_split(self, i: int) -> bool:
        """False when cap i surely has no gap wide enough to split it (see `split_by_gap`).

        The widest gap split_by_gap looks at lies between the piece_min-th smallest and
        largest axis angle, each at most the piece_min-th largest angle to the mean line.
        """
        if self.sizes[i] < 2 * self.piece_min:
            return False
        return 2 * self.top[i, self.piece_min - 1] + BOUND_MARGIN_DEG >= GAP_MIN_DEG

    def surely_narrow(self, i: int) -> bool:
        """True when cap i (-1: none) is surely no arc: its axis angles span at most its two
        largest angles to the mean line, below ARC_DEG (see `Groups.is_arc`)."""
        return i >= 0 and self.top[i, 0] + self.top[i, 1] + BOUND_MARGIN_DEG < ARC_DEG - 1e-6


def _merged(G: Groups, caps: _Caps) -> list[list[int]]:
    """Indices of the caps that `merge_by_band` unites, per group, in its order.

    Pairs are tested in merge_by_band's order; a pair is skipped only when the band test
    surely says no: centres farther apart than MERGE_MAX_DEG (the same screen), or fewer than
    two members at least alpha / 4 from their own mean line (the screen inside `_joined`,
    here with every pair's bound at once).
    """
    c = len(caps.pieces)
    parent = list(range(c))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    if c > 1:
        means = np.ascontiguousarray(caps.means)
        C = np.abs(means @ means.T)
        alpha = np.degrees(np.arccos(np.minimum(C, 1.0)))
        r = alpha / 4 - 1e-3 - BOUND_MARGIN_DEG  # below every member angle _joined counts
        first, second = caps.top[:, 0], caps.top[:, 1]
        many = (second[:, None] >= r) | (second[None, :] >= r) | \
            ((first[:, None] >= r) & (first[None, :] >= r))
        # alpha ~ 0: _joined may answer "same line" before its screen
        test = (C >= _FAR_COS) & (many | (alpha < 1e-3))
        for i, j in zip(*np.nonzero(np.triu(test, 1)), strict=True):
            i, j = int(i), int(j)
            if root(i) != root(j) and _joined(G, caps.pieces[i], caps.pieces[j],
                                              caps.means[i], caps.means[j]):
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(c):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


def _chance_many(G: Groups, groups: list[np.ndarray], m: int) -> np.ndarray:
    """``[G.chance(g, m) for g in groups]`` with one scipy call for all groups (n_groups,)."""
    U = G.U
    if not groups or U.shape[1] < 2:
        return np.ones(len(groups))
    k = U.shape[1]
    # As _chance, group by group: the angles of each group's rows to its mean line, sorted.
    r = [np.sort(np.degrees(np.arccos(np.clip(np.abs(U[g] @ G.mean(g)), 0.0, 1.0)))) for g in groups]
    P = cap_share(2 * np.maximum(np.concatenate([x[1:] for x in r]), R_MIN_DEG), k)
    j = np.concatenate([np.arange(2, len(g) + 1) for g in groups])
    p = m * bdtrc(j - 2, m - 1, P)
    starts = np.r_[0, np.cumsum([len(g) - 1 for g in groups])[:-1]]
    return np.minimum(1.0, np.minimum.reduceat(p, starts))
