"""Planted-data claims for the counting rules of issue 8: lines vs arcs, robust set-aside, null model.

Claims and tolerances were written before running them; seed sets are ranges fixed here
(never picked), and each claim states the share of seeds on which it must hold.
"""

from __future__ import annotations

import numpy as np
import pytest

from _planted import random_lines
from condlab.analysis import count_orientations
from condlab.analysis._structures import cap_share

SEEDS = range(10)


def _around(rng, u: np.ndarray, count: int, sigma_deg: float) -> np.ndarray:
    """count rows at angle sigma·|N(0,1)| from u in a random tangent direction, random signs."""
    out = []
    for _ in range(count):
        w = rng.standard_normal(len(u))
        w -= (w @ u) * u
        t = np.radians(sigma_deg) * abs(rng.standard_normal())
        out.append(rng.choice([-1.0, 1.0]) * (np.cos(t) * u + np.sin(t) * w / np.linalg.norm(w)))
    return np.array(out) * rng.uniform(0.5, 1.0, size=(count, 1))


def _arc(rng, k: int, width_deg: float, count: int) -> np.ndarray:
    """count rows spread uniformly over an arc of width_deg in a random plane of R^k, random signs."""
    Q = np.linalg.qr(rng.standard_normal((k, 2)))[0]
    phi = np.radians(rng.uniform(-width_deg / 2, width_deg / 2, size=count))
    W = np.cos(phi)[:, None] * Q[:, 0] + np.sin(phi)[:, None] * Q[:, 1]
    return W * rng.choice([-1.0, 1.0], size=(count, 1)) * rng.uniform(0.5, 1.0, size=(count, 1))


@pytest.mark.parametrize("k,dim", [(1, 3), (2, 4), (3, 6), (4, 8)])
def test_k_noisy_lines_count_k(k, dim):
    # Claim: k lines >= 30 deg apart, 3 deg noise, 30 rows each -> exactly k lines, no arc; 10/10 seeds.
    ok = 0
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        L = random_lines(rng, k, dim, 30.0)
        W = np.concatenate([_around(rng, u, 30, 3.0) for u in L])
        o = count_orientations(W)
        ok += (o.n_lines, o.n_arcs) == (k, 0)
    assert ok == len(SEEDS)


@pytest.mark.parametrize("width", [30.0, 45.0, 60.0])
@pytest.mark.parametrize("dim", [2, 5])
def test_uniform_arc_is_one_arc(width, dim):
    # Claim: 60 rows spread uniformly on an arc 30-60 deg wide -> one arc, no line; >= 9/10 seeds.
    ok = 0
    for seed in SEEDS:
        o = count_orientations(_arc(np.random.default_rng(seed), dim, width, 60))
        ok += (o.n_arcs, o.n_lines) == (1, 0)
    assert ok >= 9


def test_two_lines_25_degrees_apart_are_two_lines():
    # Claim: two lines 25 deg apart, 3 deg noise, 40 rows each -> 2 lines, no arc; >= 9/10 seeds.
    ok = 0
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        Q = np.linalg.qr(rng.standard_normal((5, 2)))[0]
        a = np.radians(25.0)
        u, v = Q[:, 0], np.cos(a) * Q[:, 0] + np.sin(a) * Q[:, 1]
        W = np.concatenate([_around(rng, u, 40, 3.0), _around(rng, v, 40, 3.0)])
        o = count_orientations(W)
        ok += (o.n_lines, o.n_arcs) == (2, 0)
    assert ok >= 9


def test_one_giant_neuron_does_not_empty_the_count():
    # Claim: 60 neurons on 3 lines plus one 20x larger neuron -> 3 lines, nothing else set aside.
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        L = random_lines(rng, 3, 6, 30.0)
        W = np.concatenate([_around(rng, u, 20, 3.0) for u in L])
        giant = rng.standard_normal((1, 6))
        W = np.concatenate([W, 20 * giant / np.linalg.norm(giant)])
        o = count_orientations(W)
        assert o.n_lines == 3
        assert list(o.negligible) == []


@pytest.mark.parametrize("m,k", [(50, 3), (40, 6), (50, 6), (100, 2), (200, 4)])
def test_random_gaussian_weights_have_no_lines(m, k):
    # Claim: isotropic Gaussian weights -> 0 condensed lines (and arcs) on >= 19 of 20 seeds.
    clean = sum(
        count_orientations(np.random.default_rng(1000 + s).standard_normal((m, k))).n_lines == 0
        for s in range(20))
    assert clean >= 19


def test_cap_share_matches_simulation():
    # The null model's cap share: within 0.01 of a 200000-sample simulation, for k = 2..6.
    rng = np.random.default_rng(0)
    for k in range(2, 7):
        U = rng.standard_normal((200_000, k))
        U /= np.linalg.norm(U, axis=1, keepdims=True)
        for r in (5.0, 18.2, 40.0):
            sim = np.mean(np.abs(U[:, 0]) >= np.cos(np.radians(r)))
            assert abs(float(cap_share(np.array(r), k)) - sim) < 0.01
    assert abs(float(cap_share(np.array(18.0), 2)) - 0.2) < 1e-12  # 2r/pi on the circle


def test_few_neurons_on_two_lines_are_not_joined():
    # Fig. 4's layers have 18 neurons: two lines 40 deg apart, 9 rows each, 2 deg noise -> 2
    # lines (few points cannot show an empty gap, so the band must be visibly filled); 10/10 seeds.
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        Q = np.linalg.qr(rng.standard_normal((19, 2)))[0]
        a = np.radians(40.0)
        u, v = Q[:, 0], np.cos(a) * Q[:, 0] + np.sin(a) * Q[:, 1]
        o = count_orientations(np.concatenate([_around(rng, u, 9, 2.0), _around(rng, v, 9, 2.0)]))
        assert (o.n_lines, o.n_arcs) == (2, 0)
