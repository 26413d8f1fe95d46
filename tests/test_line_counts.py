"""The fast counting paths give exactly what the plain ones give (sweep summaries rely on it).

Claims, fixed before looking at any result, each exact (no tolerance: the same integers, the
same bits):

* ``count_lines(W) == count_orientations(W, sweep=()).n_lines`` on planted lines (1-5 lines,
  noise 1-8 degrees, with and without isotropic rows), isotropic layers, arcs, duplicate and
  zero rows, float32 input and min_share = 0; seeds 0-59, every seed must agree.
* The memoized group measures (``Groups``) equal ``mean_line``, ``axis_angles``,
  ``width_deg`` and ``chance_p`` of the same rows, bit for bit, and ``is_arc`` equals
  ``width_deg >= ARC_DEG``.
* The band test with its shortcuts (radius bound, far pairs skipped) equals the band test as
  first written (copied below) on every pair of pieces of those layers, and so does the merge.
* The line sums without a sparse matrix equal the sparse product; the one-block nearest line
  equals the blocked loop.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from _planted import random_lines
from condlab.analysis import count_orientations
from condlab.analysis._cosine import _nearest_blocked, nearest_line
from condlab.analysis._line_counts import count_lines, count_lines_many
from condlab.analysis._orientations import _cluster_lines, _line_sums, _prepare
from condlab.analysis._structures import (
    ARC_DEG,
    MERGE_MAX_DEG,
    Groups,
    _aligned,
    axis_angles,
    chance_p,
    joined_by_band,
    mean_line,
    merge_by_band,
    needed_gap,
    width_deg,
)

SEEDS = range(60)


def _layer(seed: int) -> tuple[np.ndarray, dict]:
    """One test layer per seed, cycling through the kinds named in the module docstring."""
    rng = np.random.default_rng(seed)
    kind, k = seed % 6, int(rng.integers(2, 8))
    m = int(rng.integers(20, 120))
    if kind == 5:  # isotropic
        return rng.standard_normal((m, k)), {}
    n_lines = int(rng.integers(1, 6))
    L = random_lines(rng, n_lines, k, 30.0)
    sigma = np.radians(rng.choice([1.0, 3.0, 5.0, 8.0]))
    W = L[rng.integers(0, n_lines, m)] * rng.choice([-1.0, 1.0], (m, 1))
    W = W + sigma * np.abs(rng.standard_normal((m, 1))) * rng.standard_normal((m, k)) / math.sqrt(k)
    W *= rng.uniform(0.5, 2.0, (m, 1))
    if kind == 1:  # a fifth of the rows isotropic, of comparable amplitude
        W[: m // 5] = rng.standard_normal((m // 5, k))
    if kind == 2:  # an arc: rows spread over 40 degrees in a plane
        phi = np.radians(rng.uniform(-20, 20, m // 3))
        W[: m // 3] = np.outer(np.cos(phi), L[0]) + np.outer(np.sin(phi), random_lines(rng, 1, k, 0.0)[0])
    if kind == 3:  # duplicate and zero rows, float32
        W[1:4] = W[0]
        W[-2:] = 0.0
        return W.astype(np.float32), {}
    return W, ({"min_share": 0.0} if kind == 4 and m < 40 else {})


@pytest.mark.parametrize("seed", SEEDS)
def test_count_lines_equals_count_orientations(seed):
    W, kwargs = _layer(seed)
    assert count_lines(W, **kwargs) == count_orientations(W, sweep=(), **kwargs).n_lines


def test_count_lines_many_takes_a_stack():
    layers = np.stack([_layer(s)[0][:20, :3] for s in (0, 6, 12)])
    assert count_lines_many(layers) == [count_orientations(w, sweep=()).n_lines for w in layers]


def _pieces(seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Canonical active rows of a test layer and its caps at the default threshold (>= 2 rows)."""
    W, _ = _layer(seed)
    U = _prepare(W, 0.95, 0.1)[5]
    labels = _cluster_lines(U, 0.95, 2, 4096)[0]
    sizes = np.bincount(labels[labels >= 0]) if np.any(labels >= 0) else np.zeros(0, np.int64)
    return U, [np.flatnonzero(labels == b) for b in np.flatnonzero(sizes >= 2)]


@pytest.mark.parametrize("seed", SEEDS[:30])
def test_group_measures_equal_the_plain_functions(seed):
    U, pieces = _pieces(seed)
    G = Groups(U)
    for g in pieces:
        for _ in range(2):  # computed, then memoized
            assert np.array_equal(G.mean(g), mean_line(U[g]))
            assert np.array_equal(G.axis(g), axis_angles(U[g])[0])
            assert G.width(g) == width_deg(U[g])
            assert G.is_arc(g) == (width_deg(U[g]) >= ARC_DEG)
            assert G.chance(g, len(U)) == chance_p(U[g], len(U))


def _plain_joined(U: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """joined_by_band as first written, without memo or shortcuts."""
    ca, cb = mean_line(U[a]), mean_line(U[b])
    if ca @ cb < 0:
        cb = -cb
    alpha = math.degrees(math.acos(min(1.0, float(ca @ cb))))
    if alpha > MERGE_MAX_DEG:
        return False
    e2 = cb - (cb @ ca) * ca
    if np.linalg.norm(e2) < 1e-12:
        return True
    e2 /= np.linalg.norm(e2)
    rows = np.concatenate([_aligned(U[a], ca), _aligned(U[b], cb)])
    phi = np.degrees(np.arctan2(rows @ e2, rows @ ca))
    inside = phi[(phi > 0) & (phi < alpha)]
    band = np.sort(np.concatenate([[0.0, alpha], inside]))
    middle = np.count_nonzero((inside > alpha / 4) & (inside < 3 * alpha / 4))
    filled = middle >= max(2, 0.25 * len(inside))
    return filled and float(np.diff(band).max()) < needed_gap(alpha, len(inside))


def test_band_test_equals_the_plain_one():
    pairs = joined = 0
    for seed in SEEDS:
        U, pieces = _pieces(seed)
        # finer pieces too (halves of each cap), so that many pairs lie close together
        pieces = pieces + [p[i::2] for p in pieces if len(p) >= 4 for i in (0, 1)]
        G = Groups(U)
        for i, a in enumerate(pieces):
            for b in pieces[i + 1:]:
                plain = _plain_joined(U, a, b)
                assert joined_by_band(G, a, b) == plain == joined_by_band(U, a, b)
                pairs, joined = pairs + 1, joined + plain
        plain_merge = _plain_merge(U, pieces)
        assert [g.tolist() for g in merge_by_band(U, pieces)] == [g.tolist() for g in plain_merge]
    assert pairs > 1000 and 0 < joined < pairs  # both answers were exercised


def _plain_merge(U: np.ndarray, pieces: list[np.ndarray]) -> list[np.ndarray]:
    parent = list(range(len(pieces)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(len(pieces)):
        for j in range(i + 1, len(pieces)):
            if root(i) != root(j) and _plain_joined(U, pieces[i], pieces[j]):
                parent[root(j)] = root(i)
    groups: dict[int, list[np.ndarray]] = {}
    for i, piece in enumerate(pieces):
        groups.setdefault(root(i), []).append(piece)
    return [np.sort(np.concatenate(g)) for g in groups.values()]


@pytest.mark.parametrize("seed", SEEDS[:20])
def test_line_sums_and_nearest_line_equal_their_plain_forms(seed):
    U, _ = _pieces(seed)
    rng = np.random.default_rng(seed)
    centres = U[rng.choice(len(U), size=min(5, len(U)), replace=False)]
    labels, best = nearest_line(U, centres)
    blocked = _nearest_blocked(U, centres, 4096)
    assert np.array_equal(labels, blocked[0]) and np.array_equal(best, blocked[1])
    labels[best < 0.9] = -1
    rows = np.flatnonzero(labels >= 0)
    sign = np.sign(np.einsum("ij,ij->i", U[rows], centres[labels[rows]]))
    S = sp.csr_matrix((sign, (labels[rows], rows)), shape=(len(centres), U.shape[0]))
    assert np.array_equal(_line_sums(U, labels, centres, len(centres)), np.asarray(S @ U))


def test_nearest_line_keeps_nan_rows_unassigned():
    U = np.array([[1.0, 0.0], [np.nan, np.nan], [0.0, 1.0]])
    labels, best = nearest_line(U, np.array([[0.0, 1.0]]))
    assert labels.tolist() == [0, -1, 0] and best[1] == -np.inf
