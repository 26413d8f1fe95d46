"""Properties of the line counter (count_orientations, count_lines, count_lines_many) and of the
cosine helpers. Planted layers come from condlab.analysis._planted (development seeds
[class, 10000 + i], not the benchmark's); each claim and tolerance is stated at its assert.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from condlab.analysis import _line_counts as line_counts
from condlab.analysis._cosine import cosine_matrix, nearest_line, row_norms, unit_rows
from condlab.analysis._line_counts import count_lines, count_lines_many
from condlab.analysis._orientations import Orientations, cosine_order, count_orientations
from condlab.analysis._planted import planted


def angle_deg(u: np.ndarray, v: np.ndarray) -> float:
    """Angle between the lines of u and v, in degrees."""
    c = abs(u @ v) / (np.linalg.norm(u) * np.linalg.norm(v))
    return float(np.degrees(np.arccos(min(1.0, c))))


def three_lines(seed: int = 0, m: int = 150, k: int = 5, scattered: int = 0) -> np.ndarray:
    """m rows on 3 lines (2 deg spread, >= 30 deg apart) then `scattered` isotropic rows."""
    rng = np.random.default_rng([99, seed])
    from condlab.analysis._planted import _axes, line_members

    L = _axes(rng, 3, k, 30.0)
    U = np.concatenate([line_members(rng, u, m // 3, 2.0) for u in L] + [rng.standard_normal((scattered, k))])
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    return U * rng.choice([-1.0, 1.0], size=(len(U), 1)) * rng.uniform(1.0, 2.0, size=(len(U), 1))


def test_planted_lines_and_their_means():
    # claim: 3 lines of 50 rows -> 3 lines, 6 directions, each mean within 1 deg of a row's line
    W = three_lines()
    o = count_orientations(W)
    assert (o.n_lines, o.n_directions, o.n_arcs) == (3, 6, 0) and o.stable
    U, _ = unit_rows(W)
    for line in o.lines:
        assert abs(np.linalg.norm(line.mean) - 1) < 1e-12
        assert line.mean[np.argmax(np.abs(line.mean))] > 0  # sign convention of lines
        assert np.median(np.degrees(np.arccos(np.minimum(np.abs(U[line.members] @ line.mean), 1)))) < 5.0
    for d in o.directions:  # a direction's mean points the way of its members
        assert np.all(W[d.members] @ d.mean > 0)


def test_permuting_and_flipping_rows_changes_nothing_but_indices():
    # claim: the count is exactly invariant under row permutations and sign flips of rows
    W = three_lines(1, scattered=30)
    rng = np.random.default_rng(5)
    perm = rng.permutation(len(W))
    flip = rng.choice([-1.0, 1.0], size=(len(W), 1))
    a, b, c = count_orientations(W), count_orientations(W[perm]), count_orientations(W * flip)
    assert a.counts_by_threshold == b.counts_by_threshold == c.counts_by_threshold
    for ca, cb in zip(a.lines, b.lines, strict=True):
        assert np.array_equal(ca.members, np.sort(perm[cb.members]))
        assert np.allclose(ca.mean, cb.mean, atol=1e-9)
    assert [list(x.members) for x in a.lines] == [list(x.members) for x in c.lines]
    assert np.array_equal(a.scattered, np.sort(perm[b.scattered]))


def test_zero_and_tiny_layers_have_no_lines():
    # claim: a layer of zero rows, or with fewer than 4 active rows, counts 0 lines, every row
    # of zero amplitude negligible, by every entry point
    Z = np.zeros((10, 3))
    o = count_orientations(Z)
    assert (o.n_lines, o.n_directions, len(o.negligible)) == (0, 0, 10)
    assert count_lines(Z) == 0 and count_lines_many(np.stack([Z, Z])) == [0, 0]
    assert count_orientations(np.eye(3)).n_lines == 0
    assert count_orientations(np.ones((1, 4))).n_lines == 0


def test_row_norms_are_exact_where_the_squares_underflow():
    # claim: rows of 1e-200 (weight decay leaves such neurons) get their norm to rounding (np.linalg
    # .norm squares them into subnormals: 0.1 % off, or 0), other rows np.linalg.norm's bits
    W = np.random.default_rng(4).standard_normal((50, 6))
    assert np.array_equal(row_norms(W), np.linalg.norm(W, axis=1))
    for scale in (1e-160, 1e-200, 1e-300):
        assert np.allclose(row_norms(W * scale) / scale, np.linalg.norm(W, axis=1), rtol=1e-13, atol=0)
    assert row_norms(np.zeros((2, 3))).tolist() == [0.0, 0.0]
    U, norms = unit_rows(W * 1e-200)
    assert np.allclose(np.linalg.norm(U, axis=1), 1.0, rtol=1e-14)


def test_a_layer_counts_the_same_at_any_scale():
    # claim: the count depends on directions and amplitude ratios only, down to rows of 1e-200,
    # and runs without a warning there (a row scaled by an inexact norm had |cos| > 1: log of < 0)
    for name, i in (("tight", 0), ("background", 1), ("arc", 0)):
        W = planted(name, i).W
        a = count_orientations(W, band=False)
        for scale in (1e-200, 1e100):
            b = count_orientations(W * scale, band=False)
            assert (b.n_lines, b.n_arcs, len(b.negligible)) == (a.n_lines, a.n_arcs, len(a.negligible))


def test_m_at_most_k_rows():
    # claim: 6 orthogonal rows in R^8 are no line; 8 near-copies of one row in R^16 are one line
    Q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((8, 8)))
    assert count_orientations(Q[:6] * np.linspace(1.0, 2.0, 6)[:, None]).n_lines == 0
    u = np.random.default_rng(1).standard_normal(16)
    W = u + 1e-3 * np.random.default_rng(2).standard_normal((8, 16))
    W[::2] *= -1
    o = count_orientations(W)
    assert (o.n_lines, o.n_directions) == (1, 2)


def test_tiny_rows_are_negligible_and_a_lognormal_population_is_not():
    # claim: rows 1e-4 x the others are set aside; lognormal amplitudes (log-sd 2) keep all rows
    W = three_lines(2)
    tiny = np.array([3, 17, 42, 99])
    W[tiny] *= 1e-4
    W[50] = 0.0
    o = count_orientations(W)
    assert np.array_equal(o.negligible, np.sort(np.r_[tiny, 50]))
    assert o.params["m_active"] == len(W) - 5 and o.n_lines == 3
    amp = np.exp(2.0 * np.random.default_rng(3).standard_normal(len(W)))
    W = three_lines(2) * amp[:, None]
    assert len(count_orientations(W).negligible) == 0


def test_the_negligible_rules_median_is_numpys_nanmedian_over_the_valid_entries():
    # the cutoff's median (no masked arrays) must give np.nanmedian's numbers bit for bit:
    # odd and even counts, ties, rows with one valid entry
    from condlab.analysis._counting import _median

    rng = np.random.default_rng(0)
    for trial in range(300):
        x = rng.standard_normal((4, int(rng.integers(1, 30))))
        if trial % 3 == 0:
            x = np.round(x, 1)
        valid = rng.random(x.shape) < 0.7
        valid[:, 0] = True
        assert np.array_equal(_median(x, valid), np.nanmedian(np.where(valid, x, np.nan), axis=1))


def test_shares_scattered_and_negligible_partition_the_rows():
    # claim: every row is in exactly one of lines, arcs, scattered, negligible; shares add up
    W = three_lines(3, scattered=40)
    W[:5] *= 1e-5
    o = count_orientations(W)
    everyone = np.concatenate([c.members for c in o.lines + o.arcs] + [o.scattered, o.negligible])
    assert np.array_equal(np.sort(everyone), np.arange(len(W)))
    total = sum(c.share for c in o.lines + o.arcs) + (len(o.scattered) + len(o.negligible)) / len(W)
    assert abs(total - 1.0) < 1e-12


def test_a_stack_is_split_over_threads_only_into_parts_of_layers_per_call(monkeypatch):
    # claim: count_lines_many(threads=2) hands a stack to the pool only when each part gets at
    # least LAYERS_PER_CALL layers (a smaller part costs more per layer than a thread saves)
    import condlab._accel as accel

    parts = []
    monkeypatch.setattr(accel, "in_parallel", lambda tasks: parts.append(len(tasks)) or [t() for t in tasks])
    rng = np.random.default_rng(0)
    n = 2 * line_counts.LAYERS_PER_CALL
    stack = rng.standard_normal((n, 12, 3))
    alone = count_lines_many(stack)
    assert count_lines_many(stack[: n - 1], threads=2) == alone[: n - 1] and parts == []
    assert count_lines_many(stack, threads=2) == alone and parts == [2]


def test_count_lines_equals_the_single_count_of_count_orientations(monkeypatch):
    # claim: count_lines, count_lines_many (any batch, any order, any split over threads) ==
    # count_orientations(band=False); small layers (m <= 200) of four classes, development seeds
    layers = [p.W for name in ("tight", "background", "random", "arc") for i in range(4)
              if len((p := planted(name, i, dev=True)).W) <= 200]
    want = [count_orientations(W, band=False).n_lines for W in layers]
    assert [count_lines(W) for W in layers] == want
    assert count_lines_many(layers) == want
    monkeypatch.setattr(line_counts, "LAYERS_PER_CALL", 1)   # split even this small stack
    assert count_lines_many(layers[::-1], threads=2) == want[::-1]


def clumps(seed: int, m: int = 50, k: int = 6) -> np.ndarray:
    """A trained-like layer: clumps of 2-12 rows with sub-degree spreads, random signs, the rest
    scattered (layers of one shape but different structures: padded components in a batch)."""
    rng = np.random.default_rng(seed)
    rows, left = [], m
    while left > 4:
        n = int(min(left, rng.integers(2, 13)))
        mu = rng.standard_normal(k)
        spread = np.radians(rng.uniform(0.05, 0.5))
        rows.append(mu / np.linalg.norm(mu) + spread * rng.standard_normal((n, k)))
        left -= n
    W = np.concatenate(rows + [rng.standard_normal((left, k))])
    return W * rng.choice([-1.0, 1.0], size=(m, 1)) * rng.uniform(1.0, 2.0, size=(m, 1))


def test_a_layer_counts_the_same_alone_and_in_any_batch_of_its_shape():
    # claim: count_lines_many and count_orientations_many give each layer of a same-shape stack
    # exactly its own count_orientations(band=False), in any order (layers with fewer components
    # than others of the batch are padded inside the fit; the padding must not matter)
    from condlab.analysis import count_orientations_many

    S = np.stack([clumps(seed) for seed in range(24)])
    alone = [count_orientations(W, band=False) for W in S]
    assert count_lines_many(S) == [o.n_lines for o in alone]
    assert count_lines_many(S[::-1])[::-1] == [o.n_lines for o in alone]
    assert [o.to_dict() for o in count_orientations_many(S)] == [o.to_dict() for o in alone]
    # a list of layers of several shapes: each shape fitted apart, results in the list's order
    mixed = [S[0], S[1][:40], S[2], clumps(99, m=40)]
    want = [count_orientations(W, band=False).to_dict() for W in mixed]
    assert [o.to_dict() for o in count_orientations_many(mixed)] == want


def test_the_band_and_its_keys():
    # claim: the band repeats the count at penalty x {2/3, 1, 3/2} and MADs c - 1, c, c + 1
    o = count_orientations(three_lines(4), penalty=1.5, negligible_mads=5.0)
    assert set(o.counts_by_threshold) == {1.0, 1.5, 2.25} and set(o.counts_by_amplitude) == {4.0, 5.0, 6.0}
    assert set(o.arcs_by_threshold) == set(o.counts_by_threshold)
    single = count_orientations(three_lines(4), band=False)
    assert single.counts_by_threshold == {1.5: 3} and single.n_lines == 3


def test_torch_input_gives_the_same_result():
    torch = pytest.importorskip("torch")
    W = three_lines(6, m=60, k=3)
    Wt = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    assert np.allclose(cosine_matrix(Wt), cosine_matrix(W), atol=0)
    assert count_orientations(Wt).to_dict() == count_orientations(W).to_dict()


def test_to_dict_round_trips_through_json():
    o = count_orientations(three_lines(7))
    assert isinstance(o, Orientations)
    d = o.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["n_lines"] == 3 and set(d["params"]) >= {"penalty", "negligible_mads", "min_share"}


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="shape"):
        count_orientations(np.ones(5))  # not (m, k)
    with pytest.raises(ValueError, match="non-finite"):
        count_orientations(np.array([[1.0, np.nan], [1.0, 0.0]]))  # diverged weights
    with pytest.raises(ValueError, match="non-finite"):
        count_lines_many([np.ones((5, 2)), np.array([[np.inf, 1.0]] * 5)])
    with pytest.raises(ValueError, match="penalty"):
        count_orientations(np.ones((5, 2)), penalty=0.0)
    with pytest.raises(ValueError, match="threads"):
        count_lines_many([np.ones((5, 2))], threads=0)


def test_cosine_matrix_matches_direct_computation_and_marks_zero_rows():
    rng = np.random.default_rng(1)
    W = rng.standard_normal((7, 4))
    W[2] = 0.0
    D = cosine_matrix(W)
    keep = np.arange(7) != 2
    norms = np.linalg.norm(W, axis=1)
    direct = (W @ W.T)[np.ix_(keep, keep)] / np.outer(norms[keep], norms[keep])
    assert np.allclose(D[np.ix_(keep, keep)], direct, atol=1e-12)  # tolerance: rounding
    assert np.isnan(D[2]).all() and np.isnan(D[:, 2]).all()


def test_nearest_line_is_chunk_independent():
    rng = np.random.default_rng(8)
    U, _ = unit_rows(rng.standard_normal((50, 5)))
    C, _ = unit_rows(rng.standard_normal((9, 5)))
    arg, best = nearest_line(U, C, chunk=4)
    A = np.abs(U @ C.T)
    assert np.array_equal(arg, A.argmax(1)) and np.allclose(best, A.max(1), atol=1e-15)


def test_cosine_order_puts_each_cluster_contiguously():
    W = three_lines(12, scattered=30)
    W[:5] *= 1e-5
    o = count_orientations(W)
    order = cosine_order(W, o)
    assert np.array_equal(np.sort(order), np.arange(len(W)))  # a permutation
    pos = np.empty(len(W), int)
    pos[order] = np.arange(len(W))
    for c in o.lines + o.directions:
        p = np.sort(pos[c.members])
        assert p[-1] - p[0] == len(p) - 1  # a contiguous block
    assert np.array_equal(order, cosine_order(W))  # computes the same clusters itself


def test_top_vector_is_the_same_from_the_scatter_side_and_the_gram_side():
    # claim: the top eigenvector of Σ M_i x_i x_iᵀ (with a vector projected out of the rows, or
    # not) is the same vector, up to sign, whether computed from the k x k scatter (k <= members)
    # or from the members' Gram matrix (k > members); an empty member set gives the fallback
    from condlab.analysis._arcs import top_vector

    rng = np.random.default_rng(7)
    X = rng.standard_normal((4, 30, 12)) * np.linspace(3.0, 0.5, 12)  # a clear top direction
    M = (rng.random((4, 30)) < 0.5).astype(float)
    M[3] = 0.0
    fallback = np.eye(12)[:4]
    out = rng.standard_normal((4, 12))
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    for proj in (None, out):
        wide = top_vector(X, M, fallback, proj)  # members <= 30 > k = 12: the scatter side
        narrow = top_vector(np.concatenate([X, np.zeros((4, 30, 40))], axis=2), M,  # k = 52 > members
                            np.concatenate([fallback, np.zeros((4, 40))], axis=1),
                            None if proj is None else np.concatenate([proj, np.zeros((4, 40))], axis=1))
        assert np.allclose(np.abs((wide * narrow[:, :12]).sum(axis=1))[:3], 1.0, atol=1e-10)
        assert np.allclose(narrow[:3, 12:], 0.0, atol=1e-12)
        assert np.array_equal(wide[3], fallback[3]) and np.array_equal(narrow[3, :12], fallback[3])
        if proj is not None:
            assert np.allclose((wide * proj).sum(axis=1)[:3], 0.0, atol=1e-10)


def test_top_vector_by_lanczos_is_the_dense_solvers_vector():
    # claim: above LANCZOS_MIN on both sides (dims and members) the top eigenvector comes from
    # Lanczos iterations; where the top eigenvalue stands apart it is the dense eigh's vector to
    # 1e-8 (up to sign), orthogonal to a projected-out vector, and an empty set gives the fallback
    from condlab.analysis._arcs import LANCZOS_MIN, top_vector

    rng = np.random.default_rng(11)
    k, n = LANCZOS_MIN + 40, LANCZOS_MIN + 60
    X = rng.standard_normal((3, n, k)) * np.linspace(1.0, 0.3, k)
    X[:, :, 5] *= 6.0  # a clear top direction (and a second one, for the projection)
    X[:, :, 9] *= 3.0
    M = np.ones((3, n))
    M[2] = 0.0
    fallback = np.full((3, k), 1 / np.sqrt(k))
    out = np.eye(k)[5][None].repeat(3, axis=0)
    for proj in (None, out):
        got = top_vector(X, M, fallback, proj)
        Y = X[:2] if proj is None else X[:2] - (X[:2] @ out[0])[..., None] * out[0]
        dense = np.linalg.eigh(Y.transpose(0, 2, 1) @ Y)[1][..., -1]
        assert np.allclose(np.abs((got[:2] * dense).sum(axis=1)), 1.0, atol=1e-8)
        assert np.array_equal(got[2], fallback[2])
        if proj is not None:
            assert np.allclose(got[:2, 5], 0.0, atol=1e-8)


def test_top_vector_falls_back_to_the_dense_solver_where_lanczos_does_not_converge(monkeypatch):
    import scipy.sparse.linalg as sparse

    from condlab.analysis._arcs import LANCZOS_MIN, top_vector

    def no_convergence(*args, **kwargs):
        raise sparse.ArpackNoConvergence("planted", np.zeros(0), np.zeros((0, 0)))

    monkeypatch.setattr(sparse, "eigsh", no_convergence)
    rng = np.random.default_rng(12)
    X = rng.standard_normal((1, LANCZOS_MIN + 20, LANCZOS_MIN + 10))
    X[:, :, 3] *= 5.0
    got = top_vector(X, np.ones((1, X.shape[1])), np.full((1, X.shape[2]), 1.0))
    dense = np.linalg.eigh(X[0].T @ X[0])[1][:, -1]
    assert abs(got[0] @ dense) == pytest.approx(1.0, abs=1e-10)


def test_a_wide_layer_with_few_rows_per_line_is_counted():
    # a 256 x 768 layer (3 planted lines of 64 rows each): the arc search's eigenproblems are on
    # the 64-row side, not 768 x 768 (which took ~10 s here, a 768 x 3072 layer ~10 min)
    rng = np.random.default_rng(3)
    axes = rng.standard_normal((3, 768))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    W = np.concatenate([axes[i] * rng.uniform(1, 2, (64, 1)) * rng.choice([-1, 1], (64, 1))
                        + 1e-3 * rng.standard_normal((64, 768)) for i in range(3)]
                       + [rng.standard_normal((64, 768)) / np.sqrt(768) * 1.5])
    assert count_orientations(W).n_lines == 3


def test_ems_close_pair_test_is_the_redundant_rule_asked_for_any():
    # claim: EM's cheap stop test (two live axes within 5 deg) answers exactly what the decisions'
    # rule asks, whether some live component is a lighter copy of another, on random stacks with
    # dropped components, ties of weight and near-copies of axes
    from condlab.analysis import _fitting, _mixture

    rng = np.random.default_rng(7)
    for _ in range(200):
        B, K, k = 6, int(rng.integers(1, 7)), int(rng.integers(2, 5))
        mu = rng.standard_normal((B, K, k))
        copy = rng.random((B, K)) < 0.3  # some axes 0-8 deg from axis 0
        noise = rng.uniform(0, 0.14) * rng.standard_normal((copy.sum(), k))
        mu[copy] = mu[:, :1].repeat(K, axis=1)[copy] + noise
        mu /= np.linalg.norm(mu, axis=2, keepdims=True)
        log_pi = np.log(rng.choice([0.1, 0.2, 0.3], size=(B, K + 1)))
        log_pi[:, 1:][rng.random((B, K)) < 0.3] = -np.inf
        assert np.array_equal(_mixture.close_pair(mu, log_pi), _fitting.redundant(mu, log_pi).any(axis=1))
