"""Tests for condlab.analysis._cosine and condlab.analysis._orientations.

Synthetic layers: planted lines (pairwise >= 30 deg apart) whose members sit at an angle
sigma·|N(0,1)| from the line, with random signs and amplitudes in [0.5, 1], plus
optional isotropic rows. All seeds are fixed; tolerances are stated at each assert.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from _planted import random_lines
from condlab.analysis._cosine import (
    abs_cosine_neighbors,
    cosine_matrix,
    nearest_line,
    unit_rows,
)
from condlab.analysis._orientations import Orientations, cosine_order, count_orientations


def planted(rng, lines, m, sigma_deg=3.0, two_signs=True, n_scattered=0):
    """W (m, k) around the given unit lines; returns W, line label per row (-1: isotropic), signs."""
    n, k = lines.shape
    label = np.concatenate([np.arange(m - n_scattered) % n, -np.ones(n_scattered, int)])
    sign = rng.choice([-1.0, 1.0], size=m) if two_signs else np.ones(m)
    W = rng.standard_normal((m, k))  # isotropic rows keep this
    for i in np.flatnonzero(label >= 0):
        u = lines[label[i]]
        w = W[i] - (W[i] @ u) * u
        theta = np.radians(sigma_deg) * abs(rng.standard_normal())
        W[i] = sign[i] * (np.cos(theta) * u + np.sin(theta) * w / np.linalg.norm(w))
    W *= rng.uniform(0.5, 1.0, size=(m, 1)) / np.linalg.norm(W, axis=1, keepdims=True)
    perm = rng.permutation(m)
    return W[perm], label[perm], sign[perm]


def angle_deg(u: np.ndarray, v: np.ndarray) -> float:
    """Angle between the lines of u and v, in degrees."""
    c = abs(u @ v) / (np.linalg.norm(u) * np.linalg.norm(v))
    return float(np.degrees(np.arccos(min(1.0, c))))


# (n_lines, dim, m, two_signs, n_scattered): k = 1..4 lines, dims 2..10, m = 50..500.
PLANTED_CASES = [
    (1, 2, 50, True, 0),
    (2, 2, 120, True, 0),
    (2, 3, 80, False, 0),
    (3, 4, 200, True, 20),
    (3, 6, 300, False, 30),
    (4, 8, 400, True, 40),
    (4, 10, 500, True, 50),
]


@pytest.mark.parametrize("n_lines,dim,m,two_signs,n_scattered", PLANTED_CASES)
def test_planted_lines_are_counted_exactly(n_lines, dim, m, two_signs, n_scattered):
    rng = np.random.default_rng(100 * n_lines + dim)
    L = random_lines(rng, n_lines, dim)
    W, label, sign = planted(rng, L, m, 3.0, two_signs, n_scattered)
    o = count_orientations(W)
    min_count = o.params["min_count"]
    # Exact: every planted line, and every (line, sign) with enough members.
    used = {(a, s) for a, s in zip(label, sign, strict=True) if a >= 0}
    expected_dirs = sum(np.sum((label == a) & (sign == s)) >= min_count for a, s in used)
    assert o.n_lines == n_lines
    assert o.n_directions == expected_dirs == n_lines * (2 if two_signs else 1)
    assert o.stable and set(o.counts_by_threshold.values()) == {n_lines}


def test_mean_is_within_two_degrees_of_planted_line():
    rng = np.random.default_rng(7)
    L = random_lines(rng, 3, 5)
    W, label, sign = planted(rng, L, 300, 3.0, True, 30)
    o = count_orientations(W)
    assert o.n_lines == 3
    for line in o.lines:
        truth = L[np.bincount(label[line.members][label[line.members] >= 0]).argmax()]
        assert angle_deg(line.mean, truth) < 2.0  # tolerance: 2 degrees
        assert abs(np.linalg.norm(line.mean) - 1) < 1e-12
        assert line.mean[np.argmax(np.abs(line.mean))] > 0  # sign convention of lines
        assert line.tightness > 0.99  # 3 deg noise: mean |cos| ~ cos(3 deg)
    for d in o.directions:
        # A direction mean points the way of its members, not merely along the line.
        assert np.all(W[d.members] @ d.mean > 0)


def test_u_and_minus_u_is_one_line_two_directions():
    u = np.array([0.3, -1.2, 0.5, 2.0])
    o = count_orientations(np.stack([u, -u]), min_share=0.0)
    assert (o.n_lines, o.n_directions) == (1, 2)
    # The same with 20 noisy copies of each side and default settings.
    rng = np.random.default_rng(3)
    W, _, _ = planted(rng, (u / np.linalg.norm(u))[None], 40, 2.0, True)
    o = count_orientations(W)
    assert (o.n_lines, o.n_directions) == (1, 2)
    assert angle_deg(o.directions[0].mean, -o.directions[1].mean) < 2.0  # tolerance: 2 deg


def test_orthogonal_rows_give_m_lines_when_singletons_count():
    Q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((8, 8)))
    W = Q[:6] * np.linspace(1.0, 2.0, 6)[:, None]  # m = 6 <= k = 8, pairwise orthogonal
    o = count_orientations(W, min_share=0.0)
    assert (o.n_lines, o.n_directions) == (6, 6)
    assert o.scattered.size == 0 and o.negligible.size == 0
    # With the default size rule no orientation holds 2 rows: nothing is condensed.
    assert count_orientations(W).n_lines == 0


def test_tiny_amplitude_neurons_are_negligible():
    rng = np.random.default_rng(11)
    W, _, _ = planted(rng, random_lines(rng, 2, 4), 100, 3.0)
    tiny = np.array([3, 17, 42, 99])
    W[tiny] *= 1e-3  # amplitude <= 1e-3 < 0.1 × (largest >= 0.5)
    W[50] = 0.0  # a zero row has no orientation at all
    o = count_orientations(W)
    assert np.array_equal(o.negligible, np.sort(np.r_[tiny, 50]))
    assert o.params["m_active"] == 100 - 5
    assert o.n_lines == 2
    assert not set(o.negligible) & set(np.concatenate([c.members for c in o.lines]))


def test_isotropic_rows_have_no_condensed_lines():
    layers = [np.random.default_rng(s).standard_normal((50, 6)) for s in range(20)]
    counts = [count_orientations(W).n_lines for W in layers]
    # Tolerance: at most one false line in any layer, and in at most 2 of 20 layers
    # (benchmarks/threshold_sweep.py measures 0.1 false lines per layer at this size).
    assert max(counts) <= 1 and sum(counts) <= 2


def test_permuting_rows_permutes_the_result():
    rng = np.random.default_rng(5)
    W, _, _ = planted(rng, random_lines(rng, 3, 6), 240, 4.0, True, 40)
    W[7] *= 1e-4
    perm = rng.permutation(len(W))
    a, b = count_orientations(W), count_orientations(W[perm])
    assert (a.n_lines, a.n_directions) == (b.n_lines, b.n_directions) == (3, 6)
    assert a.counts_by_threshold == b.counts_by_threshold
    for ca, cb in zip(a.lines + a.directions, b.lines + b.directions, strict=True):
        assert np.array_equal(ca.members, np.sort(perm[cb.members]))
        assert np.allclose(ca.mean, cb.mean, atol=1e-12)
    assert np.array_equal(a.scattered, np.sort(perm[b.scattered]))
    assert np.array_equal(a.negligible, np.sort(perm[b.negligible]))


def test_shares_scattered_and_negligible_sum_to_one():
    rng = np.random.default_rng(9)
    W, _, _ = planted(rng, random_lines(rng, 3, 5), 200, 3.0, True, 40)
    W[:10] *= 1e-3
    o = count_orientations(W)
    m = len(W)
    total = sum(c.share for c in o.lines) + (len(o.scattered) + len(o.negligible)) / m
    assert abs(total - 1.0) < 1e-12  # tolerance: rounding only
    assert abs(sum(c.share for c in o.directions) - sum(c.share for c in o.lines)) < 1e-12
    everyone = np.concatenate([c.members for c in o.lines] + [o.scattered, o.negligible])
    assert np.array_equal(np.sort(everyone), np.arange(m))  # a partition of the rows


def test_tiny_chunks_give_the_direct_result():
    rng = np.random.default_rng(13)
    W, _, _ = planted(rng, random_lines(rng, 3, 6), 300, 3.0, True, 60)
    a, b = count_orientations(W, chunk=3), count_orientations(W, chunk=10**6)
    assert (a.n_lines, a.n_directions) == (b.n_lines, b.n_directions) == (3, 6)
    assert a.counts_by_threshold == b.counts_by_threshold
    for ca, cb in zip(a.lines + a.directions, b.lines + b.directions, strict=True):
        assert np.array_equal(ca.members, cb.members)
        assert np.allclose(ca.mean, cb.mean, atol=1e-12)  # tolerance: BLAS rounding
    assert np.array_equal(a.scattered, b.scattered)


def test_gap_rule_separates_lines_closer_than_the_cap():
    # Two lines 17 deg apart (|cos| = 0.956) with 0.3 deg noise: at 0.93-0.95 one cap holds
    # both, but the band between them is empty, so the gap rule counts 2 at every threshold.
    u, v = np.array([1.0, 0, 0]), np.array([np.cos(np.radians(17)), np.sin(np.radians(17)), 0])
    W, _, _ = planted(np.random.default_rng(2), np.stack([u, v]), 100, 0.3, True)
    o = count_orientations(W)
    assert o.counts_by_threshold == {0.93: 2, 0.94: 2, 0.95: 2, 0.96: 2, 0.97: 2}
    assert o.stable and o.n_arcs == 0
    assert o.params["sweep_thresholds"] == [0.93, 0.94, 0.95, 0.96, 0.97]


def test_amplitude_sweep_reports_an_unstable_count():
    # Line B's neurons sit at 0.15 x the reference amplitude: active at ratios 0.05 and 0.1,
    # set aside at 0.2, so the count is 2, 2, 1 over the amplitude sweep and not stable.
    rng = np.random.default_rng(21)
    L = random_lines(rng, 2, 4)
    W, label, _ = planted(rng, L, 100, 2.0, True)
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    W[label == 1] *= 0.15
    keep = (label == 0) | (np.cumsum(label == 1) <= 12)
    o = count_orientations(W[keep])
    assert o.counts_by_amplitude == {0.05: 2, 0.1: 2, 0.2: 1}
    assert not o.stable


def test_cosine_matrix_matches_direct_computation_and_marks_zero_rows():
    rng = np.random.default_rng(1)
    W = rng.standard_normal((7, 4))
    W[2] = 0.0
    D = cosine_matrix(W)
    for i in range(7):
        for j in range(7):
            if 2 in (i, j):
                assert np.isnan(D[i, j])
            else:
                direct = W[i] @ W[j] / (np.linalg.norm(W[i]) * np.linalg.norm(W[j]))
                assert abs(D[i, j] - direct) < 1e-12  # tolerance: rounding
    assert np.allclose(np.delete(np.diag(D), 2), 1.0, atol=0)


def test_torch_input_gives_the_same_result():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    W, _, _ = planted(rng, random_lines(rng, 2, 3), 60, 3.0)
    Wt = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    assert np.allclose(cosine_matrix(Wt), cosine_matrix(W), atol=0)
    a, b = count_orientations(Wt), count_orientations(W)
    assert a.to_dict() == b.to_dict()


def test_abs_cosine_neighbors_matches_the_full_matrix():
    rng = np.random.default_rng(6)
    W, _, _ = planted(rng, random_lines(rng, 2, 3), 40, 5.0, True, 10)
    W[5] = 0.0
    i, j = abs_cosine_neighbors(W, 0.95, chunk=7)
    D = np.abs(np.nan_to_num(cosine_matrix(W)))
    ei, ej = np.nonzero(np.triu(D >= 0.95, k=1))
    assert sorted(zip(i.tolist(), j.tolist(), strict=True)) == sorted(
        zip(ei.tolist(), ej.tolist(), strict=True)
    )


def test_nearest_line_is_chunk_independent():
    rng = np.random.default_rng(8)
    U, _ = unit_rows(rng.standard_normal((50, 5)))
    C, _ = unit_rows(rng.standard_normal((9, 5)))
    arg, best = nearest_line(U, C, chunk=4)
    A = np.abs(U @ C.T)
    assert np.array_equal(arg, A.argmax(1)) and np.allclose(best, A.max(1), atol=1e-15)


def test_cosine_order_puts_each_cluster_contiguously():
    rng = np.random.default_rng(12)
    W, _, _ = planted(rng, random_lines(rng, 3, 5), 150, 3.0, True, 30)
    W[:5] *= 1e-3
    o = count_orientations(W)
    order = cosine_order(W, o)
    assert np.array_equal(np.sort(order), np.arange(len(W)))  # a permutation
    pos = np.empty(len(W), int)
    pos[order] = np.arange(len(W))
    for c in o.lines + o.directions:
        p = np.sort(pos[c.members])
        assert p[-1] - p[0] == len(p) - 1  # contiguous block
    assert np.array_equal(order, cosine_order(W))  # computes the same clusters itself


def test_large_layer_is_exact():
    # Speed is shown by benchmarks, not asserted here (project rule: no timed unit tests).
    rng = np.random.default_rng(20_000)
    W, _, _ = planted(rng, random_lines(rng, 3, 6), 20_000, 3.0, True, 2_000)
    o = count_orientations(W)
    assert o.n_lines == 3 and o.n_directions == 6 and o.stable


def test_to_dict_round_trips_through_json():
    rng = np.random.default_rng(0)
    W, _, _ = planted(rng, random_lines(rng, 2, 4), 80, 3.0, True, 8)
    o = count_orientations(W)
    assert isinstance(o, Orientations)
    d = o.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["n_lines"] == 2 and set(d["params"]) >= {"cos_threshold", "amplitude_ratio"}


def test_rejects_bad_input():
    with pytest.raises(ValueError):
        count_orientations(np.ones(5))  # not (m, k)
    with pytest.raises(ValueError):
        count_orientations(np.array([[1.0, np.nan], [1.0, 0.0]]))  # diverged weights


def test_an_all_zero_layer_has_no_lines_and_every_row_negligible():
    # claim: rows of zero amplitude have no orientation, so a layer of them (dead, or decayed to
    # zero) counts 0 lines and 0 directions, by every counter, instead of failing
    from condlab.analysis._line_counts import count_lines, count_lines_many

    W = np.zeros((10, 3))
    o = count_orientations(W)
    assert (o.n_lines, o.n_directions, len(o.negligible)) == (0, 0, 10)
    assert count_orientations(W, sweep=()).n_lines == count_lines(W) == 0
    assert count_lines_many(np.stack([W, W])) == [0, 0]
