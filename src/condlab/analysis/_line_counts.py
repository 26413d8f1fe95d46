"""Line counts of many layers (sweep summaries, trackers): the count and nothing else.

``count_lines(W)`` is ``count_orientations(W, sweep=()).n_lines``: the same clustering, gap
rule and null model (analysis/_structures.py) on the same arrays, so the same integer, but
without building what a count does not need (members, means and directions of the clusters,
the scattered and negligible rows, the parameters) and with most per-group Python steps
replaced by a few array operations over all caps of the layer (analysis/_count_caps.py):

* the caps' mean lines come from one stacked ``eigh`` of their Gram matrices ``U[g].T @ U[g]``
  (the same LAPACK call per matrix as ``mean_line``, so the same bits);
* the band test, the gap split and the arc test are evaluated for all caps (pairs of caps)
  at once, in another order; where every compared angle clears its threshold by a margin far
  above that order's rounding, that is the full test's answer, and every other case runs the
  full test of _structures.py on the same arrays;
* the null model's binomial tails of all groups come from one scipy call (elementwise, so
  each value is the one ``chance_p`` computes from the same angles).

tests/test_line_counts.py holds ``count_lines`` to ``count_orientations`` on planted, random
and trained layers, and each shortcut to the full test it replaces.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from condlab.analysis._cosine import DEFAULT_CHUNK
from condlab.analysis._count_caps import Caps
from condlab.analysis._orientations import (
    AMPLITUDE_RATIO,
    COS_THRESHOLD,
    MIN_SHARE,
    _cluster_lines,
    _min_count,
    _prepare,
)
from condlab.analysis._structures import _FAR_COS, NULL_ALPHA, Groups, _joined, split_by_gap


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
    caps = Caps(U, labels, sizes, piece_min, len(U))
    G = Groups(U)
    groups = []  # (rows, its cap, or -1 where the merge or a split made a new group)
    for members in _merged(G, caps):
        i = members[0]
        if len(members) == 1 and caps.whole[i] == 1:
            groups.append((caps.pieces[i], i))
            continue
        rows = caps.pieces[i] if len(members) == 1 else \
            np.sort(np.concatenate([caps.pieces[j] for j in members]))
        parts = split_by_gap(G, rows, piece_min)
        groups += [(g, i if len(parts) == 1 and len(members) == 1 else -1) for g in parts]
    lines = 0
    for g, i in groups:
        if len(g) < min_count:
            continue
        condensed = caps.condensed[i] if i >= 0 else -1
        if condensed == 0 or (condensed == -1 and G.chance(g, len(U)) > NULL_ALPHA):
            continue
        arc = caps.arc[i] if i >= 0 else -1
        lines += not (arc == 1 or (arc == -1 and G.is_arc(g)))
    return lines


def _merged(G: Groups, caps: Caps) -> list[list[int]]:
    """Indices of the caps that `merge_by_band` unites, per group, in its order.

    The pairs are visited in merge_by_band's order, with its screen (centres farther apart
    than MERGE_MAX_DEG are never joined); each band test is answered by `Caps.band_tests`
    where it decides, else by `_joined` on the same arrays as merge_by_band.
    """
    c = len(caps.pieces)
    parent = list(range(c))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    if c > 1:
        pairs = np.argwhere(np.triu(np.abs(caps.means @ caps.means.T) >= _FAR_COS, 1))  # i, then j
        for (i, j), known in zip(pairs.tolist(), caps.band_tests(pairs), strict=True):
            if root(i) == root(j):
                continue
            a, b = caps.pieces[i], caps.pieces[j]
            if known == 1 or (known == -1 and _joined(G, a, b, G.mean(a), G.mean(b))):
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(c):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())
