"""Direction fields, stable lines and output fits for 1-D inputs (the paper's Figs. 5 and 6).

Equations implemented:

* Fig. 6's direction field for a 2-D input weight omega = (w, b) on inputs x_i = (x_i, 1),
  the gradient flow of Section 4 divided by the output weight a:
      omega' = -(1/n) sum_i e_i x_i sigma'(omega . x_i),          e_i = f(x_i) - y_i.
  Its stable lines near the origin are the attracting zeros of the tangential velocity
  omega' . u_perp on a small circle; to leading order they are Case 2's roots (Section 5).
* Fig. 5: least-squares polynomial fits of degree 1..p of the network output on test points; at
  small initialization an activation of multiplicity p makes the output a degree-p polynomial.
* Orientation trajectories (Figs. 5-6 settings): theta = sign(b) arccos(w / |(w, b)|) in
  (-pi, pi] and amplitude |(w, b)|_2 (the bias is part of the input weight, as in the paper).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

SigmaPrime = Callable[[Any], Any]
ROW_BLOCK = 1 << 21  # values of sigma'(w . x) held at once by `velocities`


def _np(a: Any) -> np.ndarray:
    """Any array-like (numpy, list, torch tensor on any device) -> float64 numpy array."""
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    return np.asarray(a, dtype=np.float64)


def _apply(sigma_prime: SigmaPrime, z: np.ndarray) -> np.ndarray:
    """sigma'(z) elementwise for numpy callables and for torch callables alike."""
    try:
        out = sigma_prime(z)
    except (TypeError, AttributeError):  # torch functions refuse numpy arrays
        import torch

        out = sigma_prime(torch.as_tensor(z, dtype=torch.float64))
    out = _np(out)
    if out.shape != z.shape:
        out = np.broadcast_to(out, z.shape)  # e.g. sigma' = lambda z: 1.0
    return out


def _data_2d(X: Any, e: Any, q: int | None = 2) -> tuple[np.ndarray, np.ndarray]:
    X, e = _np(X), _np(e)
    if X.ndim != 2 or e.shape != (X.shape[0],) or (q is not None and X.shape[1] != q):
        want = f"(n, {q})" if q else "(n, q)"
        raise ValueError(
            f"expected X {want} with a trailing-1 column, e (n,); got {X.shape}, {e.shape}"
        )
    return X, e


def velocities(W: Any, X: Any, e: Any, sigma_prime: SigmaPrime) -> np.ndarray:
    """W (m, q) -> (m, q): omega' = -(1/n) sum_i e_i x_i sigma'(w_j . x_i) at each neuron's w_j."""
    X, e = _data_2d(X, e, q=None)
    W = np.atleast_2d(_np(W))
    out = np.empty_like(W)
    step = max(1, ROW_BLOCK // max(len(e), 1))  # blocks of rows: a wide layer never holds (m, n)
    for r in range(0, W.shape[0], step):
        S = _apply(sigma_prime, W[r:r + step] @ X.T)  # (block, n)
        out[r:r + step] = -(S * e) @ X / len(e)
    return out


def direction_field(
    X: Any, e: Any, sigma_prime: SigmaPrime, *, lim: float = 1.0, size: int = 21
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fig. 6 field on a size x size grid over [-lim, lim]^2 -> (W, B, dW, dB), each (size, size).

    X is (n, 2) with rows (x_i, 1); the grids use meshgrid's "xy" indexing (for plt.quiver).
    """
    X, e = _data_2d(X, e)
    axis = np.linspace(-lim, lim, size)
    W, B = np.meshgrid(axis, axis)
    V = velocities(np.column_stack([W.ravel(), B.ravel()]), X, e, sigma_prime)
    return W, B, V[:, 0].reshape(W.shape), V[:, 1].reshape(W.shape)


def _tangential(theta: np.ndarray, X, e, sigma_prime, radius: float) -> np.ndarray:
    """Tangential velocity omega' . u_perp at radius * u(theta); positive means theta increases."""
    theta = np.atleast_1d(theta)
    c, s = np.cos(theta), np.sin(theta)
    V = velocities(radius * np.column_stack([c, s]), X, e, sigma_prime)
    return -V[:, 0] * s + V[:, 1] * c


def stable_lines_2d(
    X: Any,
    e: Any,
    sigma_prime: SigmaPrime,
    *,
    radius: float = 1e-3,
    n_angles: int = 3600,
    output_sign: float | None = 1.0,
) -> np.ndarray:
    """Attracting lines of Fig. 6's field on a small circle -> (r, 2) unit rows, theta in [0, pi).

    A direction is attracting where the tangential velocity of the field times output_sign (the
    sign of the neuron's output weight a; the field is omega'/a) changes from + to - as theta
    increases; a line counts if either end attracts. output_sign=None keeps lines attracting for
    either sign of a, i.e. what a network with output weights of both signs condenses on.
    """
    from scipy.optimize import brentq  # scipy (~0.6 s to import) only where a field is analysed

    X, e = _data_2d(X, e)
    if output_sign == 0:
        raise ValueError("output_sign must be positive, negative or None")
    signs = (1.0, -1.0) if output_sign is None else (float(np.sign(output_sign)),)
    grid = np.linspace(0.0, 2 * np.pi, n_angles, endpoint=False)
    T = _tangential(grid, X, e, sigma_prime, radius)
    found = []
    for sgn in signs:
        f = sgn * T
        g = np.roll(f, -1)  # value at the next angle (wrapping around the circle)
        for k in np.flatnonzero((f > 0) & (g <= 0)):
            lo, hi = grid[k], grid[k] + 2 * np.pi / n_angles
            if g[k] == 0:
                found.append(hi)
                continue

            def fun(t: float, sgn: float = sgn) -> float:
                return float(sgn * _tangential(t, X, e, sigma_prime, radius)[0])

            try:
                found.append(brentq(fun, lo, hi, xtol=1e-13))
            except ValueError:  # rounding flipped a sign at an end point: root is at that end
                found.append(lo if abs(f[k]) < abs(g[k]) else hi)
    return _lines_from_angles(np.asarray(found))


def _lines_from_angles(theta: np.ndarray, tol: float = 1e-6) -> np.ndarray:
    """Angles (k,) -> distinct lines (r, 2) with theta mod pi, sorted, merged within tol rad."""
    theta = np.sort(np.mod(theta, np.pi))
    keep: list[float] = []
    for t in theta:
        if not keep or t - keep[-1] > tol:
            keep.append(t)
    if len(keep) > 1 and keep[0] + np.pi - keep[-1] <= tol:  # 0 and pi are the same line
        keep.pop()
    keep_arr = np.asarray(keep)
    return np.column_stack([np.cos(keep_arr), np.sin(keep_arr)]).reshape(-1, 2)


@dataclass(frozen=True)
class PolyFit:
    """Least-squares polynomial fit; coefficients in the plain power basis, lowest degree first."""

    degree: int
    coefficients: np.ndarray  # (degree + 1,): c0 + c1 x + ... + c_d x^d
    r2: float  # 1 - SS_res / SS_tot on the fitted points

    def __call__(self, x: Any) -> np.ndarray:
        """Evaluate the fit at x."""
        return np.polynomial.polynomial.polyval(_np(x), self.coefficients)


def polynomial_fits(x: Any, y: Any, max_degree: int) -> list[PolyFit]:
    """Fig. 5: fits of degree 1..max_degree to outputs y (k,) at 1-D test points x (k,)."""
    x, y = _np(x).ravel(), _np(y).ravel()
    if x.shape != y.shape or max_degree < 1 or len(x) <= max_degree:
        raise ValueError(f"need 1-D x, y of length > max_degree >= 1, got {x.shape}, {y.shape}")
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0:
        raise ValueError("y is constant: R^2 is undefined")
    fits = []
    for d in range(1, max_degree + 1):
        # Polynomial.fit works in a scaled window for conditioning; convert() undoes the scaling
        poly = np.polynomial.Polynomial.fit(x, y, d).convert()
        coef = np.pad(poly.coef, (0, d + 1 - len(poly.coef)))  # convert() may trim zeros
        ss_res = float(np.sum((y - np.polynomial.polynomial.polyval(x, coef)) ** 2))
        fits.append(PolyFit(degree=d, coefficients=coef, r2=1.0 - ss_res / ss_tot))
    return fits


def orientation_trajectories(snapshots: Any) -> tuple[np.ndarray, np.ndarray]:
    """Snapshots (S, m, 2) of (w, b) -> theta (S, m) in (-pi, pi], amplitude (S, m) = |(w, b)|_2.

    theta = sign(b) arccos(w / |(w, b)|) with sign(0) = +1; a zero weight gets theta = 0.
    """
    Z = _np(snapshots)
    if Z.ndim != 3 or Z.shape[-1] != 2:
        raise ValueError(f"expected snapshots (S, m, 2), got {Z.shape}")
    w, b = Z[..., 0], Z[..., 1]
    amplitude = np.hypot(w, b)
    cos = np.divide(w, amplitude, out=np.ones_like(w), where=amplitude > 0)
    theta = np.where(b < 0, -1.0, 1.0) * np.arccos(np.clip(cos, -1.0, 1.0))
    return theta, amplitude
