"""Leading-order theory of where a layer's input weights condense at small initialization.

Notation: a layer has input x_i (q,) on sample i (the previous layer's output with a trailing 1
for the bias), residuals e_i = f(x_i) - y_i, and a neuron with input weight w (q,), output
weight a and an activation of multiplicity p (sigma^(s)(0) = 0 for s < p, sigma^(p)(0) != 0).

Equations implemented (numbers refer to the paper's text):

* Leading-order flow, eq. 10 with the Taylor expansion eq. 7:
      w' = -(a/n) * sigma^(p)(0)/(p-1)! * sum_i e_i x_i (w . x_i)^(p-1)              (F)
  Only the orientation u = w/|w| matters (F is homogeneous of degree p-1 in w), and by eq. 8
  it follows the projected flow u' = Pw = w' - (w' . u) u, up to a positive time change.
* Condensed orientations are the fixed orientations of (F), eq. 9: Pw = 0.
* Case 1 (p = 1, any q): u = +-sum_i e_i x_i / |sum_i e_i x_i|. With d_out > 1 outputs
  (residuals E (n, d_out), output weights a (d_out,)): w' = -Gᵀa, a' = -Gw with G = EᵀX/n,
  so u is the top right singular vector of G (the sum over outputs is wrong in general).
  Every function here takes residuals (n,) or (n, d_out); for p >= 2 they use the residual
  along G's top left singular vector (`effective_residual`).
* Case 2 (q = 2, any p): with u_hat = u1/u2,
      sum_i e_i x_i1 (u_hat x_i1 + x_i2)^(p-1) = u_hat sum_i e_i x_i2 (u_hat x_i1 + x_i2)^(p-1),
  a degree-p polynomial: at most p lines, i.e. 2p directions.
* p = 2, any q (not in the paper): w' = -a sigma''(0)/n M w with M = sum_i e_i x_i x_i^T, so
  the attracting lines are the eigenvectors of M with the largest and the smallest eigenvalue.
* Sign flow (not in the paper): Adam's first steps at small initialization act like
  w' = -sign(grad); for p = 1 its line is sign(sum_i e_i x_i) instead of sum_i e_i x_i.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._flows import flow_lines
from ._leading import (
    _canonical_sign,
    _check_flow,
    _check_p,
    _data,
    _np,
    _unit_rows,
)

METHODS = ("p1-closed-form", "p1-sign", "p2-eigen", "1d-roots", "flow-gradient", "flow-sign",
           "replay-adam", "replay-gd")



# ----------------------------------------------------------------------------------------------
# closed forms


def p1_line(X: Any, e: Any, flow: str = "gradient") -> np.ndarray:
    """Case 1 (p = 1): X (n, q), e (n,) or (n, d_out) -> unit (q,), the top right singular vector of
    G = EᵀX/n, i.e. along sum_i e_i x_i when d_out = 1 (sign flow: its sign)."""
    X, e = _data(X, e)
    g = e @ X
    if _check_flow(flow) == "sign":
        # sign descent moves every coordinate at the same speed, so w grows along sign(g)
        g = np.sign(g)
    if not np.any(g):
        raise ValueError("sum_i e_i x_i is zero: no leading-order condensation line")
    return g / np.linalg.norm(g)


def p2_lines(X: Any, e: Any) -> np.ndarray:
    """p = 2: (2, q) unit rows, the top and bottom eigenvectors of M = sum_i e_i x_i x_i^T."""
    X, e = _data(X, e)
    _, vecs = np.linalg.eigh((X * e[:, None]).T @ X)  # eigenvalues ascending
    return _canonical_sign(np.stack([vecs[:, -1], vecs[:, 0]]))


def case2_coefficients(X: Any, e: Any, p: int) -> np.ndarray:
    """Case 2: X (n, 2) -> (p + 1,) coefficients of the polynomial in u_hat, highest power first."""
    X, e = _data(X, e)
    p = _check_p(p)
    if X.shape[1] != 2:
        raise ValueError(f"Case 2 needs 2-D layer inputs (x, 1), got q = {X.shape[1]}")
    x1, x2 = X[:, 0], X[:, 1]
    # (u_hat x1 + x2)^(p-1) = sum_k C(p-1, k) u_hat^k x1^k x2^(p-1-k), expanded exactly, so
    # lhs - rhs = sum_k A_k u_hat^k - sum_k B_k u_hat^(k+1)
    k = np.arange(p)
    binom = np.array([math.comb(p - 1, int(j)) for j in k], dtype=np.float64)
    powers = x1[:, None] ** k * x2[:, None] ** (p - 1 - k)  # (n, p)
    A = binom * ((e * x1) @ powers)
    B = binom * ((e * x2) @ powers)
    ascending = np.zeros(p + 1)
    ascending[:p] += A
    ascending[1:] -= B
    return ascending[::-1]


def _polish(coeffs: np.ndarray, r: float, iters: int = 3) -> float:
    """Newton steps on a real root from np.roots (only backward stable); keep them if they help."""
    deriv = np.polyder(coeffs)
    for _ in range(iters):
        d = np.polyval(deriv, r)
        if d == 0:
            break
        new = r - np.polyval(coeffs, r) / d
        # never let a step jump towards a neighbouring root: accept only small improving steps
        if abs(new - r) > 1e-6 * (1.0 + abs(r)) or abs(np.polyval(coeffs, new)) > abs(
            np.polyval(coeffs, r)
        ):
            break
        r = new
    return float(r)


def roots_1d(X: Any, e: Any, p: int) -> np.ndarray:
    """Case 2: X (n, 2), e (n,) -> (r, 2) unit rows, r <= p: real fixed lines, theta in [0, pi)."""
    coeffs = case2_coefficients(X, e, p)
    scale = np.max(np.abs(coeffs))
    if scale == 0:
        raise ValueError("the Case-2 polynomial vanishes identically: every orientation is fixed")
    dirs = []
    # u2 = 0 (u_hat = infinity) solves the equation exactly when the top coefficient vanishes
    first = int(np.argmax(np.abs(coeffs) > 1e-12 * scale))
    if first > 0:
        dirs.append(np.array([1.0, 0.0]))
    for r in np.roots(coeffs[first:]):
        # double roots split into pairs with imaginary parts ~ sqrt(eps); accept those as real
        if abs(r.imag) > 1e-6 * (1.0 + abs(r.real)):
            continue
        dirs.append(np.array([_polish(coeffs, r.real), 1.0]))
    if not dirs:
        return np.zeros((0, 2))
    U = _unit_rows(np.stack(dirs))
    theta = np.mod(np.arctan2(U[:, 1], U[:, 0]), np.pi)
    keep = []
    for i in np.argsort(theta):  # dedupe lines closer than 1e-6 rad (circular mod pi)
        gaps = [abs(theta[i] - theta[j]) for j in keep]
        if all(min(g, np.pi - g) > 1e-6 for g in gaps):
            keep.append(i)
    return np.stack([np.cos(theta[keep]), np.sin(theta[keep])], axis=1)



# ----------------------------------------------------------------------------------------------
# predictions and comparison with measured condensation


@dataclass(frozen=True)
class Prediction:
    """Predicted condensation lines of one layer; each row u stands for the directions +-u."""

    lines: np.ndarray  # (L, q) unit rows
    method: str  # one of METHODS, or "replay-<optimizer>"
    flow: str  # "gradient" | "sign"
    p: int  # multiplicity of the activation
    bound_lines: int  # p: Proposition 1's bound on lines (proved for p = 1 or q = 2)
    bound_directions: int  # 2p
    note: str = ""  # e.g. why a prediction has no lines (a diverged replay)

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        lines = np.asarray(self.lines)
        return {**vars(self), "lines": lines.tolist(), "n_lines": len(lines)}


def _auto_method(q: int, p: int, flow: str) -> str:
    if flow == "sign":
        return "p1-sign" if p == 1 else "flow-sign"
    if p == 1:
        return "p1-closed-form"
    if q == 2:
        return "1d-roots"
    return "p2-eigen" if p == 2 else "flow-gradient"


def predict_lines(
    X: Any,
    e: Any,
    p: int,
    *,
    flow: str = "gradient",
    coefficient: float = 1.0,
    method: str = "auto",
) -> Prediction:
    """Predicted lines for layer inputs X (n, q), residuals e (n,): closed forms where they exist.

    method: "auto", or one of METHODS to force it (it must fit p, q and flow).
    """
    X, e = _data(X, e)
    p, flow = _check_p(p), _check_flow(flow)
    q = X.shape[1]
    if method == "auto":
        method = _auto_method(q, p, flow)
    needs = {  # method -> (fits?, what it needs)
        "p1-closed-form": (p == 1 and flow == "gradient", "p = 1, gradient flow"),
        "p1-sign": (p == 1 and flow == "sign", "p = 1, sign flow"),
        "p2-eigen": (p == 2 and flow == "gradient", "p = 2, gradient flow"),
        "1d-roots": (q == 2 and flow == "gradient", "q = 2, gradient flow"),
        "flow-gradient": (flow == "gradient", "gradient flow"),
        "flow-sign": (flow == "sign", "sign flow"),
    }
    if method not in needs:
        raise ValueError(f"method must be 'auto' or one of {METHODS}, got {method!r}")
    if not needs[method][0]:
        raise ValueError(f"method {method!r} needs {needs[method][1]} (got p={p}, q={q}, {flow})")
    if method in ("p1-closed-form", "p1-sign"):
        lines = p1_line(X, e, flow)[None, :]
    elif method == "p2-eigen":
        lines = p2_lines(X, e)
    elif method == "1d-roots":
        lines = roots_1d(X, e, p)
    else:
        lines = flow_lines(X, e, p, flow=flow, coefficient=coefficient)
    return Prediction(lines, method, flow, p, bound_lines=p, bound_directions=2 * p)


def line_angles(measured: Any, predicted: Any) -> np.ndarray:
    """(a, q), (b, q) -> (a,) degrees in [0, 90]: each measured line to its nearest predicted line.

    Lines have no sign (u and -u are the same line). With no predicted lines the angles are NaN.
    """
    M, P = np.atleast_2d(_np(measured)), np.atleast_2d(_np(predicted))
    if P.size == 0:
        return np.full(len(M), np.nan)
    if M.shape[1] != P.shape[1]:
        raise ValueError(f"dimension mismatch: {M.shape} vs {P.shape}")
    M, P = _unit_rows(M)[:, None, :], _unit_rows(P)[None, :, :]
    # chord lengths instead of arccos(|cos|), which loses all precision below ~1e-8 rad
    chord = np.minimum(np.linalg.norm(M - P, axis=-1), np.linalg.norm(M + P, axis=-1))
    return np.degrees(2 * np.arcsin(np.clip(chord.min(axis=1) / 2, 0.0, 1.0)))


def match_report(measured: Any, prediction: Prediction) -> dict:
    """Compare measured condensed lines (a, q) with a Prediction; JSON-ready dict."""
    M = np.atleast_2d(_np(measured))
    a = 0 if M.size == 0 else len(M)
    angles = line_angles(M, prediction.lines) if a else np.zeros(0)
    return {
        "measured_lines": a,
        "predicted_lines": int(len(prediction.lines)),
        "bound_lines": prediction.bound_lines,
        "angles_deg": [float(x) for x in angles],
        "within_bound": a <= prediction.bound_lines,
    }
