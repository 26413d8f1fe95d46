"""Inputs of the leading-order theory (analysis/_theory.py): layer inputs X (n, q) and residuals
e (n,) or (n, d_out) checked and reduced to one effective residual; the flow an optimizer implies.

With d_out > 1 outputs the p = 1 line is the top right singular vector of G = EᵀX/n, and the
output weights align with its top left singular vector (`output_direction`); for p >= 2 the
theory uses the residual along that direction (`effective_residual`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

FLOWS = ("gradient", "sign")




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
