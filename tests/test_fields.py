"""Checks of Fig. 6's direction field, its stable lines, Fig. 5's fits and orientation tracking."""

import math

import numpy as np
import pytest
import torch

from condlab.analysis._fields import (
    PolyFit,
    direction_field,
    orientation_trajectories,
    polynomial_fits,
    stable_lines_2d,
    velocities,
)
from condlab.analysis._flows import flow_lines
from condlab.analysis._theory import line_angles, roots_1d

# sigma' of the paper's activations, with multiplicity p and sigma^(p)(0)
SIGMA_PRIME = {
    1: lambda z: 1 - np.tanh(z) ** 2,  # tanh: sigma'(0) = 1
    2: lambda z: np.tanh(z) + z * (1 - np.tanh(z) ** 2),  # x tanh x: sigma''(0) = 2
    3: lambda z: 2 * z * np.tanh(z) + z**2 * (1 - np.tanh(z) ** 2),  # x^2 tanh x: sigma'''(0) = 6
}
SIGMA_P0 = {1: 1.0, 2: 2.0, 3: 6.0}


def data_1d(n=40, seed=0):
    """Fig. 5's data: x in [-1, 1.5], residual e = f - y with f ~ 0 at small initialization."""
    x = np.random.default_rng(seed).uniform(-1, 1.5, n)
    return np.column_stack([x, np.ones(n)]), -(np.sin(3 * x) + np.sin(6 * x) / 2)


def field_by_loop(omega, X, e, sigma_prime):
    total = np.zeros(2)
    for xi, ei in zip(X, e, strict=True):
        total += ei * xi * sigma_prime(omega @ xi)
    return -total / len(e)


def test_direction_field_matches_loop():
    X, e = data_1d()
    W, B, dW, dB = direction_field(X, e, SIGMA_PRIME[2], lim=0.5, size=11)
    assert W.shape == B.shape == dW.shape == dB.shape == (11, 11)
    np.testing.assert_allclose(W[0], np.linspace(-0.5, 0.5, 11), atol=1e-15)  # "xy" indexing
    for r, c in [(0, 0), (3, 7), (10, 5)]:
        expected = field_by_loop(np.array([W[r, c], B[r, c]]), X, e, SIGMA_PRIME[2])
        np.testing.assert_allclose([dW[r, c], dB[r, c]], expected, rtol=1e-12, atol=1e-15)


def test_direction_field_linear_activation_is_constant():
    # sigma' = 1 (p = 1, linear): omega' = -(1/n) sum_i e_i x_i everywhere (Case 1)
    X, e = data_1d(seed=1)
    _, _, dW, dB = direction_field(X, e, lambda z: np.ones_like(z))
    g = -(e[:, None] * X).mean(axis=0)
    np.testing.assert_allclose(dW, g[0], rtol=1e-12)
    np.testing.assert_allclose(dB, g[1], rtol=1e-12)


def test_torch_sigma_prime_and_velocities():
    X, e = data_1d(seed=2)
    numpy_field = direction_field(X, e, SIGMA_PRIME[1])
    torch_field = direction_field(X, e, lambda z: 1 - torch.tanh(z) ** 2)
    for a, b in zip(numpy_field, torch_field, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    Wts = np.random.default_rng(3).standard_normal((5, 2))
    V = velocities(Wts, X, e, SIGMA_PRIME[3])
    assert V.shape == (5, 2)
    for w, v in zip(Wts, V, strict=True):
        np.testing.assert_allclose(v, field_by_loop(w, X, e, SIGMA_PRIME[3]), rtol=1e-12)


def test_stable_lines_tanh_is_case1_line():
    X, e = data_1d(seed=4)
    lines = stable_lines_2d(X, e, SIGMA_PRIME[1])
    assert len(lines) == 1
    assert line_angles(lines, roots_1d(X, e, 1))[0] < 0.5  # degrees


@pytest.mark.parametrize("p", [2, 3])
def test_stable_lines_are_case2_roots(p):
    X, e = data_1d(seed=5)
    roots = roots_1d(X, e, p)
    for sign in (1.0, -1.0, None):
        lines = stable_lines_2d(X, e, SIGMA_PRIME[p], output_sign=sign)
        assert 1 <= len(lines) <= p
        np.testing.assert_array_less(line_angles(lines, roots), 1.0)  # degrees
    # a field with h(-u) = h(u) (p even) attracts at both ends of half of its lines, so one sign
    # of a gives 1 of the 2 lines; odd p attracts at one end of every line
    assert len(stable_lines_2d(X, e, SIGMA_PRIME[p])) == (1 if p == 2 else len(roots))


@pytest.mark.parametrize("p", [1, 2, 3])
def test_stable_lines_agree_with_integrated_flow(p):
    # same sign convention: field omega' = w'/a, flow coefficient sigma^(p)(0), a = +1
    X, e = data_1d(seed=6)
    field_lines = stable_lines_2d(X, e, SIGMA_PRIME[p], output_sign=1.0)
    flowed = flow_lines(X, e, p, coefficient=SIGMA_P0[p], output_signs=(1.0,))
    assert len(field_lines) == len(flowed)
    np.testing.assert_array_less(line_angles(flowed, field_lines), 1.0)  # degrees


def test_polynomial_fits_recover_cubic():
    x = np.linspace(-1, 1.5, 60)
    coef = np.array([0.3, -1.0, 0.5, 2.0])  # c0 + c1 x + c2 x^2 + c3 x^3
    y = np.polynomial.polynomial.polyval(x, coef)
    fits = polynomial_fits(x, y, 3)
    assert [f.degree for f in fits] == [1, 2, 3]
    assert all(isinstance(f, PolyFit) for f in fits)
    assert fits[2].r2 > 1 - 1e-12
    assert fits[0].r2 < 0.9  # a line misses the cubic clearly
    np.testing.assert_allclose(fits[2].coefficients, coef, atol=1e-9)
    np.testing.assert_allclose(fits[2](x), y, atol=1e-9)
    # R^2 by its definition for the linear fit
    resid = y - np.polynomial.polynomial.polyval(x, fits[0].coefficients)
    r2 = 1 - resid @ resid / np.sum((y - y.mean()) ** 2)
    np.testing.assert_allclose(fits[0].r2, r2, rtol=1e-12)


def test_orientation_trajectories_known_angles():
    snaps = np.array(
        [
            [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]],
            [[0.0, -2.0], [1.0, -1.0], [-math.sqrt(3), 1.0]],
        ]
    )
    theta, amp = orientation_trajectories(torch.tensor(snaps))
    expected = [[0.0, math.pi / 2, math.pi], [-math.pi / 2, -math.pi / 4, 5 * math.pi / 6]]
    np.testing.assert_allclose(theta, expected, atol=1e-12)
    np.testing.assert_allclose(amp, [[1, 1, 1], [2, math.sqrt(2), 2]], atol=1e-12)
