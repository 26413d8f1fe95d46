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

FLOWS = ("gradient", "sign")
METHODS = ("p1-closed-form", "p1-sign", "p2-eigen", "1d-roots", "flow-gradient", "flow-sign",
           "replay-adam", "replay-gd")


# ----------------------------------------------------------------------------------------------
# input handling


def _np(a: Any) -> np.ndarray:
    """Any array-like (numpy, list, torch tensor on any device) -> float64 numpy array."""
    if hasattr(a, "detach"):  # torch.Tensor: leave autograd and the device behind
        a = a.detach().cpu().numpy()
    return np.asarray(a, dtype=np.float64)


def _outputs(X: Any, e: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate and convert layer inputs X (n, q) and residuals e (n,) or (n, d_out) -> X, E (n, d_out)."""
    X, E = _np(X), _np(e)
    if E.ndim == 1:
        E = E[:, None]
    if X.ndim != 2 or E.ndim != 2 or E.shape[0] != X.shape[0]:
        raise ValueError(f"expected X (n, q) and e (n,) or (n, d_out), got {X.shape} and {_np(e).shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(E))):
        raise ValueError("X and e must be finite")
    return X, E


def output_direction(X: Any, e: Any) -> np.ndarray:
    """(d_out,) unit: the top left singular vector of G = EᵀX/n (the output that grows first).

    With vector output weights a, the leading-order p = 1 dynamics are w' = -Gᵀa, a' = -Gw:
    a aligns with this vector and w with the top right singular vector of G. For d_out = 1
    it is [1]; otherwise its largest-magnitude entry is positive.
    """
    X, E = _outputs(X, e)
    if E.shape[1] == 1:
        return np.ones(1)
    u = np.linalg.svd(E.T @ X / len(X), full_matrices=False)[0][:, 0]
    return u * np.sign(u[np.argmax(np.abs(u))])


def effective_residual(X: Any, e: Any) -> np.ndarray:
    """(n,) residual along output_direction: E @ u (e itself when d_out = 1).

    Exact for p = 1 (sum_i e_eff,i x_i = n σ₁ v₁); for p >= 2 and d_out > 1 it is the
    approximation that output weights have aligned with u (as they do at leading order).
    """
    X, E = _outputs(X, e)
    return E @ output_direction(X, E)


def _data(X: Any, e: Any) -> tuple[np.ndarray, np.ndarray]:
    """Layer inputs X (n, q) and residuals e (n,) or (n, d_out) -> X, effective residual (n,)."""
    X, E = _outputs(X, e)
    return X, E @ output_direction(X, E)


def _check_p(p: int) -> int:
    if int(p) != p or p < 1:
        raise ValueError(f"multiplicity p must be a positive integer, got {p!r}")
    return int(p)


def _check_flow(flow: str) -> str:
    if flow not in FLOWS:
        raise ValueError(f"flow must be one of {FLOWS}, got {flow!r}")
    return flow


def _unit_rows(U: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(U, axis=-1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError("zero vector where a direction was expected")
    return U / norms


def _canonical_sign(U: np.ndarray) -> np.ndarray:
    """Flip each row so that its largest-magnitude entry is positive (a line has no sign)."""
    idx = np.argmax(np.abs(U), axis=1)
    signs = np.sign(U[np.arange(len(U)), idx])
    return U * np.where(signs == 0, 1.0, signs)[:, None]


def flow_for_optimizer(optimizer: str) -> str:
    """Flow an optimizer implies: "sign" for the scale-free Adam family, else "gradient"."""
    from ..training import get_optimizer

    return "sign" if get_optimizer(optimizer.lower()).scale_free else "gradient"


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
# integrating the leading-order flow (any p, any q)


def _integrate(X, e, p, coef, U, a, flow, steps):
    """Integrate the projected flow for all test neurons at once until converged: U (N, q) -> U, moved.

    `steps` caps the number of steps; both integrators stop earlier once converged (below).
    moved (N,) is each neuron's last step in radians (gradient flow; zeros for the sign flow).
    """
    s = (a * coef / len(e))[:, None]  # grad_w L = s * F(u), F(u) = sum_i e_i x_i (u . x_i)^(p-1)
    if flow == "gradient":
        return _gradient_flow(X, e, p, s, U, steps, coef)
    return _sign_flow(X, e, p, s, U, steps), np.zeros(len(U))


def _tangent(v: np.ndarray, U: np.ndarray) -> np.ndarray:
    return v - np.sum(v * U, axis=1, keepdims=True) * U


def _gradient_flow(X, e, p, s, U, steps, coef, settle=1e-10):
    """Euler on the sphere with a per-neuron step h_j = 0.5 / L_j, L_j a secant estimate of the field's
    Lipschitz constant along the neuron's own path, kept in [1, 100] / lip.

    A per-neuron, state-dependent step is a positive time change, which leaves the orbits and their
    limits (eq. 9) unchanged (eq. 8); h_j L_j = 0.5 keeps Euler stable and monotone where the secant
    sees the curvature, and it speeds up the slow last approach to a fixed point, where the fixed
    1/lip of a global bound needed thousands of steps. Converged: every neuron's last step moved it
    less than `settle` radians, i.e. its projected field |P F| < settle * lip (checked every 10 steps).
    """
    # p * |coef| * mean(|e| |x|^p) bounds the Jacobian of the projected field on the tangent
    # space, so a step of 1/lip never oscillates nor blows up: the smallest step allowed
    lip = p * abs(coef) * np.mean(np.abs(e) * np.linalg.norm(X, axis=1) ** p)
    h = np.full(len(U), 1.0 / lip)
    moved = np.full(len(U), np.inf)
    U_prev = v_prev = None
    for k in range(steps):
        v = _tangent(-s * (((U @ X.T) ** (p - 1) * e) @ X), U)
        if v_prev is not None:
            dv, du = np.linalg.norm(v - v_prev, axis=1), np.linalg.norm(U - U_prev, axis=1)
            h = np.clip(0.5 * du / np.maximum(dv, 1e-300), 1.0 / lip, 100.0 / lip)
        step = h[:, None] * v
        U_prev, v_prev = U, v
        U = U + step
        U /= np.linalg.norm(U, axis=1, keepdims=True)
        if k % 10 == 0:
            moved = np.linalg.norm(step, axis=1)
            if moved.max() < settle:  # every neuron has settled
                break
    return U, moved


def _sign_flow(X, e, p, s, U, steps, window=50):
    """Euler on the sign flow with a geometrically shrinking step, 0.1 -> 1e-4 (/ sqrt(q)) over `steps`.

    The sign flow has speed up to sqrt(q) everywhere and chatters on switching surfaces; shrinking
    the step lets the chattering die out. Converged: the schedule's end. Skipping ahead: when, over
    the last `window` steps, no neuron moved more than 2 steps' length net (all chatter in place
    instead of travelling or sliding), the step is halved at once instead of waiting for the
    schedule; the limit is the same up to the chatter amplitude (measured: within 0.05 deg on
    the tests' layers, 0.8 deg at worst, against 5,000 fixed steps).
    """
    q = X.shape[1]
    lr, end = 0.1 / math.sqrt(q), 1e-4 / math.sqrt(q)
    decay = (end / lr) ** (1.0 / max(steps - 1, 1))
    start = U
    for k in range(1, steps + 1):
        v = -np.sign(s * (((U @ X.T) ** (p - 1) * e) @ X))
        U = U + lr * _tangent(v, U)
        U /= np.linalg.norm(U, axis=1, keepdims=True)
        if k % window == 0:
            if np.linalg.norm(U - start, axis=1).max() < 2 * lr * math.sqrt(q):
                lr *= 0.5
            start = U
        lr *= decay
        if lr < end:
            break
    return U


def _group_lines(U: np.ndarray, merge_deg: float) -> tuple[np.ndarray, np.ndarray]:
    """Group unit rows (N, q) into lines (|cos| >= cos(merge_deg)) -> lines (L, q), counts (L,)."""
    cos_min = math.cos(math.radians(merge_deg))
    left = np.ones(len(U), dtype=bool)
    lines, counts = [], []
    while left.any():  # one pass per line, not per neuron
        seed = U[np.argmax(left)]
        members = left & (np.abs(U @ seed) >= cos_min)
        # sign-free average of the members: top eigenvector of sum u u^T
        _, vecs = np.linalg.eigh(U[members].T @ U[members])
        lines.append(vecs[:, -1])
        counts.append(int(members.sum()))
        left &= ~members
    order = np.argsort(counts, kind="stable")[::-1]
    return _canonical_sign(np.stack(lines)[order]), np.asarray(counts)[order]


def flow_lines(
    X: Any,
    e: Any,
    p: int,
    *,
    flow: str = "gradient",
    coefficient: float = 1.0,
    n_neurons: int = 200,
    steps: int = 5000,
    seed: int = 0,
    merge_deg: float = 2.0,
    output_signs: tuple[float, ...] = (1.0, -1.0),
) -> np.ndarray:
    """Limit lines (L, q) of test neurons under the flow (F) with e frozen, most-visited first.

    coefficient is sigma^(p)(0) (the 1/(p-1)! is applied here); only its sign matters for which
    output-weight sign reaches which line. Test neurons start at random unit directions and are
    split evenly over output_signs. Under gradient flow, neurons still moving after `steps` (slow
    escapes from unstable fixed points) are left out of the grouping.
    """
    X, e = _data(X, e)
    p, flow = _check_p(p), _check_flow(flow)
    coef = coefficient / math.factorial(p - 1)
    if coef == 0 or not np.any(e):
        raise ValueError("the leading-order flow is zero (coefficient or residuals vanish)")
    rng = np.random.default_rng(seed)
    U = _unit_rows(rng.standard_normal((n_neurons, X.shape[1])))
    a = np.resize(np.asarray(output_signs, dtype=np.float64), n_neurons)
    U, moved = _integrate(X, e, p, coef, U, a, flow, steps)
    settled = moved < 1e-6
    if flow == "gradient" and settled.any():
        U = U[settled]
    return _group_lines(U, merge_deg)[0]


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
