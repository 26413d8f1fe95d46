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
* ``count_lines`` equals ``count_orientations(W, sweep=()).n_lines`` on trained Fig. 3 layers
  (every snapshot, epochs 0-1000, of 8 runs: 2 learning rates x 2 init stds x 2 seeds), at the
  default and at shifted thresholds (cos_threshold 0.93 / 0.97, min_share 0.1), and on layers
  built to sit at the rules' edges (caps near MERGE_MAX_DEG apart, gaps near GAP_MIN_DEG,
  arcs near ARC_DEG wide); every layer must agree.
* Each answer `Caps` decides without the full test (band test, gap split, null model, arc)
  is the full test's answer, on every cap and pair of caps of those layers; and the shortcuts
  decide most of them (>= 80 %: otherwise the fast path is not exercised). Both for the
  compiled measures (numba) and for the array code that runs without numba.
* The compiled clustering gives `_cluster_lines`' labels wherever it answers, and answers on
  >= 95 % of those layers.
* The amplitude reference read from the canonical order equals np.quantile.
* ``count_lines_many(stack) == [count_lines(W) for W in stack]`` (the one compiled call per
  stack, analysis/_count_many.py, and its recounts) on 512 trained fig3 layers (final and
  epoch-500 weights of 256 runs, the sweep summary's stack) in float32 and float64, at the
  default and shifted thresholds, with 1 and 2 threads; on the planted, random and edge layers
  above (as lists of differently shaped layers); on stacks of 0 and 1 layers; and on layers
  the compiled pass must leave to Python (duplicate rows, zero layers), which it does. The
  compiled pass decides >= 95 % of the trained layers (else it is not exercised).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from _planted import random_lines
from condlab.analysis import _cluster_jit, _count_jit, _count_many, count_orientations
from condlab.analysis._cluster_jit import cluster_labels
from condlab.analysis._clustering import MAX_ITER, SEED_ROWS, _cluster_lines, _line_sums
from condlab.analysis._cosine import _nearest_blocked, nearest_line
from condlab.analysis._count_caps import Caps
from condlab.analysis._line_counts import _compiled_counts, count_lines, count_lines_many
from condlab.analysis._orientations import (
    COS_THRESHOLD,
    _amplitude_reference,
    _min_count,
    _prepare,
    _ranked,
)
from condlab.analysis._structures import (
    _FAR_COS,
    ARC_DEG,
    MERGE_MAX_DEG,
    NULL_ALPHA,
    Groups,
    _aligned,
    _joined,
    _largest_gap,
    axis_angles,
    chance_p,
    joined_by_band,
    mean_line,
    merge_by_band,
    needed_gap,
    split_by_gap,
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


# --- trained layers, edge layers, and the shortcuts of the fast count -------------------------

THRESHOLDS = [{}, {"cos_threshold": 0.93}, {"cos_threshold": 0.97}, {"min_share": 0.1}]


@pytest.fixture(scope="module")
def trained_layers() -> list[np.ndarray]:
    """Every snapshot (epochs 0, 100, ..., 1000) of layer 1 (50, 6) of 8 fig3 runs."""
    import condlab

    cfg = condlab.preset("fig3").with_overrides([
        "train.lr=[0.001,0.002]", "model.init_std=[0.005,0.01]", "train.seeds=[0,1]",
        "train.epochs=1000", "train.snapshots=every:100"])
    runs = condlab.train(cfg, progress=False).runs
    return [np.asarray(w) for run in runs for w in run.weights["layer1"]]


def _edge_layer(seed: int) -> np.ndarray:
    """Layers whose caps sit near the rules' edges: two lines ~MERGE_MAX_DEG apart with rows
    between them, two clusters a gap of ~GAP_MIN_DEG apart, or an arc ~ARC_DEG wide."""
    rng = np.random.default_rng(1000 + seed)
    k = int(rng.integers(2, 7))
    e1, e2 = random_lines(rng, 2, k, 0.0)
    e2 = e2 - (e2 @ e1) * e1
    e2 /= np.linalg.norm(e2)
    kind = seed % 3
    if kind == 0:  # two lines MERGE_MAX_DEG +- 1 degree apart, a few rows in the band
        sep = MERGE_MAX_DEG + rng.uniform(-1.0, 1.0)
        phi = np.concatenate([rng.normal(0, 2, 20), rng.normal(sep, 2, 20), rng.uniform(0, sep, 4)])
    elif kind == 1:  # one cap cut by an empty band of about GAP_MIN_DEG
        gap = 4.0 + rng.uniform(-0.5, 0.5)
        phi = np.concatenate([rng.uniform(-8, 0, 15), rng.uniform(gap, gap + 8, 15)])
    else:  # an arc about ARC_DEG wide (its 5-95 % span)
        half = ARC_DEG / 0.9 / 2 + rng.uniform(-1.0, 1.0)
        phi = rng.uniform(-half, half, 40)
    phi = np.radians(phi)
    W = np.outer(np.cos(phi), e1) + np.outer(np.sin(phi), e2)
    W += np.radians(0.5) * rng.standard_normal(W.shape) / math.sqrt(k)
    W = np.concatenate([W, rng.standard_normal((6, k))])  # a few scattered rows
    return W * rng.choice([-1.0, 1.0], (len(W), 1)) * rng.uniform(0.5, 2.0, (len(W), 1))


EDGE_SEEDS = range(60)


@pytest.fixture(params=["compiled", "arrays"])
def paths(request, monkeypatch):
    """Both implementations of the fast count's measures: compiled (numba) and array code."""
    if request.param == "arrays":
        monkeypatch.setattr(_count_jit, "numba", None)
        monkeypatch.setattr(_cluster_jit, "numba", None)
    return request.param


def test_count_lines_equals_count_orientations_on_trained_layers(trained_layers, paths):
    assert len(trained_layers) == 88
    for kwargs in THRESHOLDS:
        fast = [count_lines(W, **kwargs) for W in trained_layers]
        assert fast == [count_orientations(W, sweep=(), **kwargs).n_lines for W in trained_layers]
    assert len(set(fast)) > 1  # the layers are not all alike (e.g. all 0 lines)


@pytest.mark.parametrize("seed", EDGE_SEEDS)
def test_count_lines_equals_count_orientations_at_the_edges(seed, paths):
    W = _edge_layer(seed)
    for kwargs in THRESHOLDS:
        assert count_lines(W, **kwargs) == count_orientations(W, sweep=(), **kwargs).n_lines


def _check_caps(U: np.ndarray, thr: float, min_count: int) -> tuple[int, int]:
    """Assert each answer Caps decides equals the full test's; (decided, asked)."""
    labels = _cluster_lines(U, thr, min_count, 4096)[0]
    sizes = np.bincount(labels[labels >= 0]) if np.any(labels >= 0) else np.zeros(0, np.int64)
    piece_min = max(2, (min_count + 1) // 2)
    caps, G = Caps(U, labels, sizes, piece_min, len(U), min_count), Groups(U)
    decided = asked = 0
    for i, p in enumerate(caps.groups):
        assert np.array_equal(p, np.flatnonzero(labels == np.flatnonzero(sizes >= piece_min)[i]))
        full = {"whole": len(split_by_gap(G, p, piece_min)) == 1, "arc": G.is_arc(p),
                "condensed": G.chance(p, len(U)) <= NULL_ALPHA}
        for name, answer in full.items():
            known = getattr(caps, name)[i]
            assert known in (-1, int(answer)), (name, i)
            decided, asked = decided + (known != -1), asked + 1
        if caps.split[i] is not None:  # a sure cut: split_by_gap's first cut, the same two parts
            phi = G.axis(p)  # (in either order: the sign of a principal axis is arbitrary)
            gap, cut = _largest_gap(phi, piece_min)
            assert gap >= needed_gap(float(phi.max() - phi.min()), len(p))
            assert sorted(x.tolist() for x in caps.split[i]) == sorted([p[phi < cut].tolist(),
                                                                        p[phi >= cut].tolist()])
    if len(caps.groups) > 1:  # the pairs merge_by_band tests: centres within MERGE_MAX_DEG
        pairs = np.argwhere(np.triu(np.abs(caps.means @ caps.means.T) >= _FAR_COS, 1))
        for (i, j), known in zip(pairs.tolist(), caps.band_tests(pairs), strict=True):
            a, b = caps.groups[i], caps.groups[j]
            full = _joined(G, a, b, G.mean(a), G.mean(b))
            assert known in (-1, int(full)), (i, j)
            decided, asked = decided + (known != -1), asked + 1
        # band_pairs: merge_by_band's pairs in its order, less those that surely stay apart
        may_join = caps.band_pairs()
        assert [(i, j) for i, j, _ in may_join] == sorted((i, j) for i, j, _ in may_join)
        listed = {(i, j): known for i, j, known in may_join}
        for i, j in pairs.tolist():
            a, b = caps.groups[i], caps.groups[j]
            assert listed.get((i, j), 0) in (-1, int(_joined(G, a, b, G.mean(a), G.mean(b))))
    return decided, asked


def test_caps_decide_only_what_the_full_tests_say(trained_layers, paths):
    decided = asked = 0
    layers = trained_layers + [_edge_layer(s) for s in EDGE_SEEDS] + [_layer(s)[0] for s in SEEDS]
    for W in layers:
        for thr, share in ((0.95, 0.05), (0.93, 0.05), (0.97, 0.1)):
            order, U = _prepare(W, thr, 0.1)[4:]
            mc = max(2, math.ceil(share * len(order) - 1e-9))
            d, a = _check_caps(U, thr, mc)
            decided, asked = decided + d, asked + a
    assert asked > 5000 and decided >= 0.8 * asked, (decided, asked)


def test_compiled_clustering_gives_the_same_labels(trained_layers):
    """cluster_labels equals _cluster_lines wherever it answers, and answers on >= 95 % of them."""
    answered = asked = 0
    layers = trained_layers + [_edge_layer(s) for s in EDGE_SEEDS] + [_layer(s)[0] for s in SEEDS]
    for W in layers:
        for thr, share in ((0.95, 0.05), (0.93, 0.0), (0.97, 0.1), (0.999, 0.05)):
            order, U = _prepare(W, thr, 0.1)[4:]
            mc = _min_count(share, len(order))
            labels = cluster_labels(U, thr, mc, SEED_ROWS, MAX_ITER)
            if labels is not None:
                assert np.array_equal(labels, _cluster_lines(U, thr, mc, 4096)[0])
            answered, asked = answered + (labels is not None), asked + 1
    assert answered >= 0.95 * asked, (answered, asked)


def test_compiled_clustering_on_large_layers_with_sampled_seeds():
    rng = np.random.default_rng(3)
    for seed in range(4):
        W = np.concatenate([_layer(seed)[0]] * 60)[:5000]  # > SEED_ROWS rows: seeds from a sample
        W = W + 1e-3 * rng.standard_normal(W.shape)
        order, U = _prepare(W, 0.95, 0.1)[4:]
        mc = _min_count(0.05, len(order))
        labels = cluster_labels(U, 0.95, mc, SEED_ROWS, MAX_ITER)
        assert labels is not None and np.array_equal(labels, _cluster_lines(U, 0.95, mc, 4096)[0])


def test_amplitude_reference_from_the_canonical_order_equals_np_quantile():
    rng = np.random.default_rng(7)
    for t in range(2000):
        m = int(rng.integers(1, 200))
        W = rng.standard_normal((m, int(rng.integers(1, 7)))) * rng.choice([1e-3, 1.0, 1e3], (m, 1))
        if t % 3 == 0:
            W[rng.integers(0, m, m // 2)] = W[0]  # ties
        if t % 5 == 0:
            W[rng.integers(0, m, m // 3)] = 0.0  # zero rows
        amp = np.linalg.norm(W, axis=1)
        U = np.nan_to_num(W / amp.clip(1e-300)[:, None])
        assert _amplitude_reference(amp, _ranked(U, amp)) == _amplitude_reference(amp)


@pytest.mark.slow
def test_count_lines_equals_count_orientations_on_thousands_of_layers(trained_layers):
    """The same claim on 3000 random layers, 2816 trained fig3 layers (256 runs x 11 snapshots)
    and 132 trained wide ones (1000 x 2, 1000 x 6, 100 x 2); and count_lines_many on each group
    of them gives count_lines' integers."""
    import condlab

    randoms = [_layer(10_000 + seed) for seed in range(3000)]
    for seed, (W, kwargs) in enumerate(randoms):
        assert count_lines(W, **kwargs) == count_orientations(W, sweep=(), **kwargs).n_lines, seed
    for share in (None, 0.0):
        some = [W for W, kw in randoms if kw.get("min_share") == share]
        kwargs = {} if share is None else {"min_share": share}
        assert count_lines_many(some, **kwargs) == [count_lines(W, **kwargs) for W in some]
    lrs = [1e-3 * 1.25**i for i in range(8)]
    stds = [0.005 * 1.25**i for i in range(8)]
    cfg = condlab.preset("fig3").with_overrides([
        f"train.lr={lrs}", f"model.init_std={stds}", "train.seeds=[0,1,2,3]",
        "train.epochs=1000", "train.snapshots=every:100"])
    trained = [W for run in condlab.train(cfg, progress=False).runs for W in run.weights["layer1"]]
    for W in trained:
        assert count_lines(W) == count_orientations(W, sweep=()).n_lines
    assert count_lines_many(np.stack(trained)) == [count_lines(W) for W in trained]
    for width, d in ((1000, 1), (1000, 5), (100, 1)):  # wide layers: big caps, long null-model sums
        cfg = condlab.preset("fig3").with_overrides([
            "train.lr=[0.001,0.002]", "model.init_std=[0.005,0.01]", f"model.width={width}",
            f"data.d={d}", "train.epochs=1000", "train.snapshots=every:100"])
        wide = [W for run in condlab.train(cfg, progress=False).runs for W in run.weights["layer1"]]
        for W in wide:
            assert count_lines(W) == count_orientations(W, sweep=()).n_lines
        assert count_lines_many(np.stack(wide)) == [count_lines(W) for W in wide]


# --- count_lines_many: one compiled call per stack ---------------------------------------------

MANY_THRESHOLDS = THRESHOLDS + [{"amplitude_ratio": 0.3}, {"min_share": 0.0}]


@pytest.fixture(scope="module")
def sweep_stack() -> np.ndarray:
    """(512, 50, 6) float32: final and epoch-500 layer 1 of 256 fig3 runs (8 lr x 8 init std x 4
    seeds, 1000 epochs), rows 2r and 2r + 1 of run r, as the sweep summary stacks them."""
    import condlab

    lrs = [1e-3 * 1.25**i for i in range(8)]
    stds = [0.005 * 1.25**i for i in range(8)]
    cfg = condlab.preset("fig3").with_overrides([
        f"train.lr={lrs}", f"model.init_std={stds}", "train.seeds=[0,1,2,3]",
        "train.epochs=1000", "train.snapshots=every:100"])
    runs = condlab.train(cfg, progress=False).runs
    return np.stack([np.asarray(run.weights["layer1"][s]) for run in runs for s in (-1, 5)])


def test_count_lines_many_equals_count_lines_on_the_sweep_stack(sweep_stack):
    assert sweep_stack.shape == (512, 50, 6) and sweep_stack.dtype == np.float32
    for kwargs in MANY_THRESHOLDS:
        plain = [count_lines(W, **kwargs) for W in sweep_stack]
        assert count_lines_many(sweep_stack, **kwargs) == plain, kwargs
        assert count_lines_many(sweep_stack.astype(np.float64), threads=2, **kwargs) == plain, kwargs
    assert len(set(plain)) > 3
    compiled = _compiled_counts(sweep_stack.astype(np.float64), COS_THRESHOLD, 0.1, 0.05)
    assert np.count_nonzero(compiled >= 0) >= 0.95 * len(sweep_stack)


def test_count_lines_many_equals_count_lines_on_planted_random_and_edge_layers():
    layers = [_layer(s) for s in SEEDS]
    for share in (None, 0.0):  # the layers with their own kwargs (min_share = 0) apart
        some = [W for W, kw in layers if kw.get("min_share") == share]
        kwargs = {} if share is None else {"min_share": share}
        assert count_lines_many(some, **kwargs) == [count_lines(W, **kwargs) for W in some]
    edges = [_edge_layer(s) for s in EDGE_SEEDS]
    for kwargs in THRESHOLDS:
        assert count_lines_many(edges, **kwargs) == [count_lines(W, **kwargs) for W in edges]


def test_count_lines_many_leaves_undecidable_layers_to_count_lines(sweep_stack):
    """Duplicate rows and rows of (nearly) tied amplitudes (numpy orders ties by row values) are
    left to Python by the compiled pass, and still counted as count_lines counts them."""
    stack = sweep_stack[:6].astype(np.float64)
    stack[1, 1:4] = stack[1, 0]
    stack[3, 5] = stack[3, 6][::-1]  # another direction, the same amplitude up to rounding
    stack[4, 10:20] = stack[4, :10] * -1.0  # sign-flipped duplicates: the same amplitudes
    compiled = _compiled_counts(stack, COS_THRESHOLD, 0.1, 0.05)
    assert compiled[[1, 3, 4]].tolist() == [-1, -1, -1] and (compiled[[0, 2, 5]] >= 0).all()
    assert count_lines_many(stack) == [count_lines(W) for W in stack]


def test_count_lines_many_takes_empty_single_mixed_and_torch_stacks(sweep_stack, monkeypatch):
    import torch

    assert count_lines_many(np.zeros((0, 50, 6))) == [] and count_lines_many([]) == []
    assert count_lines_many(sweep_stack[:1]) == [count_lines(sweep_stack[0])]
    mixed = [sweep_stack[0], _layer(0)[0], sweep_stack[1], torch.from_numpy(sweep_stack[2])]
    assert count_lines_many(mixed) == [count_lines(W) for W in mixed]
    assert count_lines_many(torch.from_numpy(sweep_stack[:4])) == [count_lines(W) for W in sweep_stack[:4]]
    with pytest.raises(ValueError, match="cos_threshold"):
        count_lines_many(sweep_stack[:2], cos_threshold=1.5)
    bad = sweep_stack[:2].copy()
    bad[1, 0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        count_lines_many(bad)
    monkeypatch.setattr(_count_many, "numba", None)  # no numba: count_lines for every layer
    assert count_lines_many(sweep_stack[:8]) == [count_lines(W) for W in sweep_stack[:8]]


def test_count_lines_many_is_one_call_that_releases_the_gil():
    if _count_many.numba is None:
        pytest.skip("numba missing: count_lines_many is count_lines in a loop")
    assert _count_many._count_stack.targetoptions["nogil"] is True


def test_a_first_compiled_count_that_takes_long_says_it_is_compiling(monkeypatch, capsys):
    # claim: the process's first compiled count starts a timer that prints one note on stderr
    # if the call outlasts COMPILE_NOTE_S (compiling, ~40 s once per install), and is cancelled
    # when it returns sooner; later calls start none
    import time

    import condlab.analysis._line_counts as lc

    layers = np.stack([np.eye(6)[:5] + 0.01 * k for k in range(3)])
    slow = lc._count_many._count_stack

    def slow_stack(*args):
        time.sleep(0.3)
        return slow(*args)

    monkeypatch.setattr(lc, "_CALLED", False)
    monkeypatch.setattr(lc, "COMPILE_NOTE_S", 0.05)
    monkeypatch.setattr(lc._count_many, "_count_stack", slow_stack)
    assert count_lines_many(layers) == [count_lines(w) for w in layers]
    assert "compiling the line counter" in capsys.readouterr().err
    assert count_lines_many(layers) == [count_lines(w) for w in layers]  # not the first call
    monkeypatch.setattr(lc, "_CALLED", False)
    monkeypatch.setattr(lc, "COMPILE_NOTE_S", 30.0)
    count_lines_many(layers)
    assert capsys.readouterr().err == ""  # returned before the timer: cancelled, no note
