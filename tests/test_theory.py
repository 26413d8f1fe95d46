"""Scientific checks of the leading-order condensation theory (condlab.analysis._theory)."""

import json
import math

import numpy as np
import pytest
import sympy
import torch

from condlab.analysis._flows import flow_lines
from condlab.analysis._leading import flow_for_optimizer
from condlab.analysis._theory import (
    Prediction,
    case2_coefficients,
    line_angles,
    match_report,
    p1_line,
    p2_lines,
    predict_lines,
    roots_1d,
)


def layer_data(n=80, q=6, seed=0):
    """Hidden-layer-like inputs (last column the bias 1) and residuals, as in the paper's Sec. 4."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(-4, 2, (n, q - 1)), np.ones(n)])
    return X, rng.standard_normal(n)


def data_1d(n=40, seed=0):
    """Fig. 5's data: x in [-1, 1.5], residual e = f - y with f ~ 0 at small initialization."""
    x = np.random.default_rng(seed).uniform(-1, 1.5, n)
    return np.column_stack([x, np.ones(n)]), -(np.sin(3 * x) + np.sin(6 * x) / 2)


def fixed_point_residual(U, X, e, p):
    """|F(u) x u| / sum_i |e_i| |x_i|^p for 2-D u: zero exactly at fixed orientations (eq. 9)."""
    F = ((U @ X.T) ** (p - 1) * e) @ X
    scale = np.sum(np.abs(e) * np.linalg.norm(X, axis=1) ** p)
    return np.abs(F[:, 0] * U[:, 1] - F[:, 1] * U[:, 0]) / scale


def rotation(deg):
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[c, -s], [s, c]])


# ------------------------------------------------------------------------------ optimizer / p = 1


def test_flow_for_optimizer():
    assert flow_for_optimizer("adam") == flow_for_optimizer("AdamW") == "sign"
    assert flow_for_optimizer("gd") == flow_for_optimizer("sgd") == "gradient"
    with pytest.raises(ValueError, match="adam"):  # the message lists the accepted names
        flow_for_optimizer("rmsprop")


def test_p1_line_is_normalized_sum_e_x():
    X, e = layer_data()
    g = (e[:, None] * X).sum(axis=0)
    np.testing.assert_allclose(p1_line(X, e), g / np.linalg.norm(g), rtol=0, atol=1e-12)
    # sign flow: every coordinate moves at the same speed -> sign(g) / sqrt(q)
    np.testing.assert_allclose(p1_line(X, e, "sign"), np.sign(g) / math.sqrt(6), rtol=0, atol=1e-12)
    # torch tensors are accepted and give the same float64 answer
    got = p1_line(torch.tensor(X, dtype=torch.float32), torch.tensor(e, dtype=torch.float32))
    np.testing.assert_allclose(got, g / np.linalg.norm(g), rtol=0, atol=1e-5)


def test_p2_lines_against_eigh():
    rng = np.random.default_rng(3)
    X, e = rng.standard_normal((30, 5)), rng.standard_normal(30)
    M = sum(ei * np.outer(xi, xi) for ei, xi in zip(e, X, strict=True))  # random symmetric
    vals, vecs = np.linalg.eigh(M)
    lines = p2_lines(X, e)
    assert lines.shape == (2, 5)
    np.testing.assert_allclose(np.linalg.norm(lines, axis=1), 1.0, atol=1e-12)
    assert abs(lines[0] @ vecs[:, -1]) > 1 - 1e-12  # top eigenvector
    assert abs(lines[1] @ vecs[:, 0]) > 1 - 1e-12  # bottom eigenvector
    np.testing.assert_allclose(M @ lines[0], vals[-1] * lines[0], atol=1e-10)


# ------------------------------------------------------------------------------ Case 2 polynomial


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_case2_coefficients_match_symbolic_expansion(p):
    X, e = data_1d(n=7, seed=p)
    u = sympy.Symbol("u")
    rows = [(sympy.Rational(str(a)), sympy.Rational(str(b))) for a, b in X]
    es = [sympy.Rational(str(v)) for v in e]
    lhs = sum(ei * x1 * (u * x1 + x2) ** (p - 1) for ei, (x1, x2) in zip(es, rows, strict=True))
    rhs = u * sum(ei * x2 * (u * x1 + x2) ** (p - 1) for ei, (x1, x2) in zip(es, rows, strict=True))
    exact = [float(c) for c in sympy.Poly(sympy.expand(lhs - rhs), u).all_coeffs()]
    exact = [0.0] * (p + 1 - len(exact)) + exact
    np.testing.assert_allclose(case2_coefficients(X, e, p), exact, rtol=1e-10, atol=1e-12)


def test_roots_1d_known_roots():
    # orthonormal inputs v1, v2 with residuals e1, e2: F(u) = e1 c1^(p-1) v1 + e2 c2^(p-1) v2 for
    # u = c1 v1 + c2 v2, so the fixed lines are v1, v2 and c2/c1 = e1/e2 (p = 3) or
    # c2/c1 = +-sqrt(e1/e2) (p = 4, real only when e1/e2 > 0)
    R = rotation(30.0)
    v1, v2 = R[:, 0], R[:, 1]
    X = np.stack([v1, v2])
    cases = {
        (1, (2.0, 3.0)): [2 * v1 + 3 * v2],
        (2, (2.0, 3.0)): [v1, v2],
        (3, (2.0, 3.0)): [v1, v2, 3 * v1 + 2 * v2],
        (4, (2.0, 3.0)): [v1, v2, v1 + math.sqrt(2 / 3) * v2, v1 - math.sqrt(2 / 3) * v2],
        (4, (2.0, -3.0)): [v1, v2],
    }
    for (p, e), expected in cases.items():
        got = roots_1d(X, np.array(e), p)
        assert len(got) == len(expected) <= p, (p, e, got)
        np.testing.assert_array_less(line_angles(got, np.stack(expected)), 1e-7)  # degrees
        np.testing.assert_array_less(line_angles(np.stack(expected), got), 1e-7)


def test_roots_1d_includes_u2_zero_orientation():
    # axis-aligned inputs: (1, 0) solves eq. 9 while the polynomial in u1/u2 loses its top degree
    got = roots_1d(np.eye(2), np.array([2.0, 3.0]), 3)
    np.testing.assert_array_less(line_angles(np.array([[1.0, 0.0]]), got), 1e-9)
    assert len(got) == 3


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5])
def test_roots_1d_solve_fixed_point_equation(p):
    X, e = data_1d(seed=10 + p)
    U = roots_1d(X, e, p)
    assert 1 <= len(U) <= p
    np.testing.assert_allclose(np.linalg.norm(U, axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_less(fixed_point_residual(U, X, e, p), 1e-8)


# ------------------------------------------------------------------------------ integrated flow


def test_flow_lines_p1_converges_to_closed_form():
    X, e = layer_data()
    lines = flow_lines(X, e, 1)
    assert len(lines) == 1
    assert line_angles(lines, p1_line(X, e)[None])[0] < 1.0  # degrees


def test_flow_lines_sign_flow_p1():
    X, e = layer_data(seed=1)
    lines = flow_lines(X, e, 1, flow="sign")
    assert len(lines) == 1
    assert line_angles(lines, p1_line(X, e, "sign")[None])[0] < 1.0  # degrees


def test_flow_lines_p2_matches_eigenvectors():
    X, e = layer_data(seed=2)
    top, bottom = p2_lines(X, e)
    lines = flow_lines(X, e, 2, coefficient=2.0)
    assert len(lines) == 2
    np.testing.assert_array_less(line_angles(lines, np.stack([top, bottom])), 1.0)
    np.testing.assert_array_less(line_angles(np.stack([top, bottom]), lines), 1.0)
    # w' = -a sigma''(0)/n M w: with a * sigma''(0) > 0 the neuron grows along the smallest
    # eigenvalue of M, with a * sigma''(0) < 0 along the largest
    only_pos = flow_lines(X, e, 2, coefficient=2.0, output_signs=(1.0,))
    only_neg = flow_lines(X, e, 2, coefficient=2.0, output_signs=(-1.0,))
    assert len(only_pos) == len(only_neg) == 1
    assert line_angles(only_pos, bottom[None])[0] < 1.0
    assert line_angles(only_neg, top[None])[0] < 1.0
    # only the product a * sigma''(0) matters: flipping the coefficient swaps the lines
    flipped = flow_lines(X, e, 2, coefficient=-2.0, output_signs=(1.0,))
    assert len(flipped) == 1 and line_angles(flipped, top[None])[0] < 1.0


@pytest.mark.parametrize("p", [1, 2, 3])
def test_flow_lines_1d_reach_only_roots(p):
    # on the circle theta' = -a c h(u) with h of degree p and h(-u) = (-1)^p h(u): every simple
    # real root attracts for one sign of a, so flow lines are roots and never more than p
    X, e = data_1d(seed=20 + p)
    roots = roots_1d(X, e, p)
    lines = flow_lines(X, e, p)
    assert 1 <= len(lines) <= p
    np.testing.assert_array_less(line_angles(lines, roots), 1.0)  # degrees


def test_flow_lines_1d_reach_all_simple_roots():
    # three simple real roots v1, v2, 3 v1 + 2 v2 (see test_roots_1d_known_roots)
    R = rotation(-20.0)
    X, e = R.T.copy(), np.array([2.0, 3.0])
    roots = roots_1d(X, e, 3)
    lines = flow_lines(X, e, 3)
    assert len(roots) == len(lines) == 3
    np.testing.assert_array_less(line_angles(roots, lines), 1.0)
    # with a single sign of a, odd p still reaches every line (one end of each)
    one_sign = flow_lines(X, e, 3, output_signs=(1.0,))
    np.testing.assert_array_less(line_angles(roots, one_sign), 1.0)


# ------------------------------------------------------------------------------ predictions


def test_predict_lines_methods():
    X, e = layer_data()
    X1, e1 = data_1d()
    expected = [
        ((X, e, 1, "gradient"), "p1-closed-form"),
        ((X, e, 1, "sign"), "p1-sign"),
        ((X, e, 2, "gradient"), "p2-eigen"),
        ((X, e, 3, "gradient"), "flow-gradient"),
        ((X, e, 2, "sign"), "flow-sign"),
        ((X1, e1, 3, "gradient"), "1d-roots"),
    ]
    for (Xi, ei, p, flow), method in expected:
        pred = predict_lines(Xi, ei, p, flow=flow)
        assert isinstance(pred, Prediction)
        assert (pred.method, pred.flow, pred.p) == (method, flow, p)
        assert (pred.bound_lines, pred.bound_directions) == (p, 2 * p)
        np.testing.assert_allclose(np.linalg.norm(pred.lines, axis=1), 1.0, atol=1e-12)
        assert json.loads(json.dumps(pred.to_dict()))["method"] == method
    forced = predict_lines(X, e, 2, method="flow-gradient")
    np.testing.assert_array_less(line_angles(forced.lines, p2_lines(X, e)), 1.0)
    with pytest.raises(ValueError, match="p = 2"):
        predict_lines(X, e, 3, method="p2-eigen")


def test_line_angles_modulo_sign():
    u = np.array([[0.6, 0.8, 0.0]])
    np.testing.assert_allclose(line_angles(u, -u), [0.0], atol=1e-6)
    np.testing.assert_allclose(line_angles(u, [[0.8, -0.6, 0.0]]), [90.0], atol=1e-9)
    # nearest of several predicted lines, unnormalized input is fine
    meas = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -5.0]])
    pred = np.array([[math.cos(math.radians(30)), math.sin(math.radians(30)), 0.0], [0, 0, 1.0]])
    np.testing.assert_allclose(line_angles(meas, pred), [30.0, 0.0], atol=1e-6)


def test_match_report():
    X, e = layer_data()
    pred = predict_lines(X, e, 2)
    report = match_report(pred.lines[:1] * -1.0, pred)
    assert report["measured_lines"] == 1 and report["predicted_lines"] == 2
    assert report["bound_lines"] == 2 and report["within_bound"] is True
    assert report["angles_deg"][0] < 1e-6
    assert match_report(np.eye(6)[:3], pred)["within_bound"] is False
    json.dumps(report)
