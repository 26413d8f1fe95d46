"""Line counts of many layers (sweep summaries, trackers): the count and nothing else.

``count_lines(W)`` is ``count_orientations(W, sweep=()).n_lines``: the same clustering, gap
rule, null model and arc rule (analysis/_orientations.py, _clustering.py, _structures.py), so the same
integer, without what a count does not need (members, means and directions of the clusters,
scattered and negligible rows, parameters), and with the float work done in another order:

* the clustering compiled (analysis/_cluster_jit.py), every decision checked against a
  margin of 1e-9 in |cos|; `_cluster_lines` itself where one is too close to call;
* the gap rule's, null model's and arc rule's questions answered for all caps (and pairs of
  caps) at once (analysis/_count_caps.py, compiled in _count_jit.py), an answer counting
  only where every compared angle clears its threshold by 1e-4 degrees; the full tests of
  _structures.py, on the same arrays, for the rest. split_by_gap runs breadth first.

``count_lines_many(stack)`` counts a stack of same-shape layers in one compiled call (the
whole pipeline above, analysis/_count_many.py, GIL released), recounting with ``count_lines``
the layers where a decision is left open, so the integers are the same.

tests/test_line_counts.py holds ``count_lines`` to ``count_orientations`` on planted, random,
edge and trained layers, each decided answer to its full test, and the compiled clustering
to `_cluster_lines`; docs/sweeps.md ("Speed") has the measurements.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable
from functools import partial
from typing import Any

import numpy as np

from condlab.analysis import _count_many
from condlab.analysis._cluster_jit import MARGIN, cluster_labels
from condlab.analysis._clustering import MAX_ITER, SEED_ROWS, _cluster_lines
from condlab.analysis._cosine import DEFAULT_CHUNK
from condlab.analysis._count_caps import _PARAMS, Batch, Caps
from condlab.analysis._orientations import AMPLITUDE_RATIO, COS_THRESHOLD, MIN_SHARE, _min_count, _prepare
from condlab.analysis._structures import NULL_ALPHA, Groups, _joined, split_by_gap

COMPILE_NOTE_S = 5.0  # a first compiled count running longer than this is compiling: say so


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


def count_lines_many(
    layers: Iterable[Any],
    *,
    cos_threshold: float = COS_THRESHOLD,
    amplitude_ratio: float = AMPLITUDE_RATIO,
    min_share: float = MIN_SHARE,
    chunk: int = DEFAULT_CHUNK,
    threads: int = 1,
) -> list[int]:
    """``[count_lines(W) for W in layers]`` for a stack (K, m, k) or a list of (m, k) layers.

    Each group of same-shape layers is counted by one compiled call (analysis/_count_many.py,
    GIL released), split into `threads` contiguous ranges on condlab's thread pool; the layers
    it leaves undecided (margins) are recounted by `count_lines`. The same integers always.
    """
    if not 0 < cos_threshold <= 1:
        raise ValueError(f"cos_threshold must be in (0, 1], got {cos_threshold}")
    if amplitude_ratio < 0:
        raise ValueError(f"amplitude_ratio must be >= 0, got {amplitude_ratio}")
    if int(threads) < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    kwargs = {"cos_threshold": cos_threshold, "amplitude_ratio": amplitude_ratio,
              "min_share": min_share, "chunk": chunk}
    items = layers if isinstance(layers, np.ndarray) or hasattr(layers, "detach") else list(layers)
    counts = [-1] * len(items)
    for index, stack in _shape_groups(items):
        found = _compiled_counts(stack, cos_threshold, amplitude_ratio, min_share, int(threads))
        for i, c in zip(index.tolist(), found.tolist(), strict=True):
            counts[i] = c
    for i, c in enumerate(counts):
        if c < 0:  # undecided in the compiled pass, or no numba: the Python count
            counts[i] = count_lines(items[i], **kwargs)
    return counts


def _shape_groups(items: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """(indices, float64 stack (K_s, m, k)) per shape of the 2-D layers among items (the others,
    left to `count_lines` and its errors, in none)."""
    if hasattr(items, "detach"):  # a torch stack
        items = items.detach().cpu().double().numpy()
    if isinstance(items, np.ndarray) and items.ndim == 3:
        return [(np.arange(len(items)), np.ascontiguousarray(items, dtype=np.float64))]
    arrays = [np.asarray(W.detach().cpu().double().numpy() if hasattr(W, "detach") else W) for W in items]
    shapes: dict[tuple[int, ...], list[int]] = {}
    for i, W in enumerate(arrays):
        if W.ndim == 2 and W.dtype.kind in "biuf":
            shapes.setdefault(W.shape, []).append(i)
    return [(np.array(index), np.stack([arrays[i] for i in index]).astype(np.float64, copy=False))
            for index in shapes.values()]


def _compiled_counts(stack: np.ndarray, thr: float, ratio: float, min_share: float,
                     threads: int = 1) -> np.ndarray:
    """Counts (K,) of a float64 stack (K, m, k) by the compiled pipeline; -1 where it leaves a
    layer to `count_lines` (all of them without numba)."""
    out = np.full(len(stack), -1, np.int64)
    if _count_many.numba is None or len(stack) == 0:
        return out
    args = (float(thr), float(ratio), float(min_share), SEED_ROWS, MAX_ITER, MARGIN, _count_many.AMP_MARGIN,
            _PARAMS)
    threads = min(threads, len(stack))
    note = _compile_note()
    try:
        if threads <= 1:
            out[:] = _count_many._count_stack(stack, *args)
            return out
        from condlab._accel import in_parallel, split_ranges  # the training steps' pool (imports torch)

        def part(sl: slice) -> None:
            out[sl] = _count_many._count_stack(stack[sl], *args)

        in_parallel([partial(part, sl) for sl in split_ranges(len(stack), threads)])
        return out
    finally:
        if note is not None:
            note.cancel()


_CALLED = False  # whether this process has called the compiled pipeline yet


def _compile_note() -> threading.Timer | None:
    """At the process's first compiled count: a timer that says on stderr, if the call is still
    running after COMPILE_NOTE_S, that the kernels are being compiled (once per install: ~40 s
    on 2 cores, against ~0.5 s to load them from numba's cache), so a pause is not a hang."""
    global _CALLED
    if _CALLED:
        return None
    _CALLED = True
    timer = threading.Timer(COMPILE_NOTE_S, lambda: print(
        "condlab: compiling the line counter (first use after an install or upgrade, about a "
        "minute; cached afterwards)", file=sys.stderr, flush=True))
    timer.daemon = True
    timer.start()
    return timer


def _count(U: np.ndarray, thr: float, min_count: int, chunk: int) -> int:
    """``len(_structures(U, thr, min_count, chunk)[0])`` for canonical unit rows U (n, k)."""
    labels = cluster_labels(U, thr, min_count, SEED_ROWS, MAX_ITER)
    if labels is None:  # numba missing, or a decision too close to call in another order
        labels = _cluster_lines(U, thr, min_count, chunk)[0]
    sizes = np.bincount(labels[labels >= 0]) if np.any(labels >= 0) else np.zeros(0, np.int64)
    if min_count == 1:  # every cap is a line of its own: no gap rule, null model or arcs
        return int(np.count_nonzero(sizes >= 1))
    piece_min, m = max(2, (min_count + 1) // 2), len(U)
    caps, G = Caps(U, labels, sizes, piece_min, m, min_count), Groups(U)
    final: list[tuple[np.ndarray, int, int]] = []  # (rows, condensed, arc), -1: undecided
    unions = _merged(G, caps)
    todo = [members[0] for members in unions if len(members) == 1]  # caps left alone
    # groups of several caps: measured in the next batch, from depth 0
    merged = [np.sort(np.concatenate([caps.groups[i] for i in members]))
              for members in unions if len(members) > 1]
    batch, depth = caps, np.zeros(len(caps.groups), np.int64)
    while True:  # split_by_gap, breadth first: each round measures all groups of one depth at once
        parts, part_depth = [], []
        for i in todo:
            rows = batch.groups[i]
            if batch.whole[i] == 1:
                final.append((rows, batch.condensed[i], batch.arc[i]))
            elif batch.split[i] is not None:  # split_by_gap's first cut: go on with the parts
                parts += batch.split[i]
                part_depth += [depth[i] + 1] * 2
            else:
                cut = split_by_gap(G, rows, piece_min, int(depth[i]))  # undecided: the full test
                final += [(rows, batch.condensed[i], batch.arc[i])] if len(cut) == 1 else \
                    [(g, -1, -1) for g in cut]
        parts, part_depth = merged + parts, [0] * len(merged) + part_depth
        merged = []
        if not parts:
            break
        depth = np.array(part_depth, dtype=np.int64)
        batch = Batch(U, parts, piece_min, m, depth, min_count)
        todo = list(range(len(parts)))
    lines = 0
    for g, condensed, arc in final:
        if len(g) < min_count or condensed == 0 or (condensed == -1 and G.chance(g, m) > NULL_ALPHA):
            continue
        lines += not (arc == 1 or (arc == -1 and G.is_arc(g)))
    return lines


def _merged(G: Groups, caps: Caps) -> list[list[int]]:
    """Indices of the caps that `merge_by_band` unites, per group, in its order.

    The pairs are visited in merge_by_band's order; `Caps.band_pairs` leaves out the pairs
    whose band test surely says no (centres more than MERGE_MAX_DEG apart among them) and
    answers the others where it decides; the rest go to `_joined` on merge_by_band's arrays.
    """
    c = len(caps.groups)
    parent = list(range(c))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j, known in caps.band_pairs():  # merge_by_band's order; the pairs left out stay apart
        if root(i) == root(j):
            continue
        a, b = caps.groups[i], caps.groups[j]
        if known == 1 or _joined(G, a, b, G.mean(a), G.mean(b)):
            parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(c):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())
