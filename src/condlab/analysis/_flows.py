"""Integrating the leading-order flow (F) of analysis/_theory.py for any p and any q: test neurons
from random directions under gradient flow or sign flow, grouped into the lines they reach.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._leading import _canonical_sign, _check_flow, _check_p, _data, _unit_rows


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
