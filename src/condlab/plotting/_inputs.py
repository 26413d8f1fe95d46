"""Input coercion for the plotting functions: arrays in, float64 numpy out, shapes checked."""

from __future__ import annotations

from typing import Any

import numpy as np


def as_array(a: Any, name: str, ndim: int) -> np.ndarray:
    """`a` (numpy, list or torch tensor on any device) as a float64 array with `ndim` dimensions."""
    if hasattr(a, "detach"):
        a = a.detach().cpu().double().numpy()
    out = np.asarray(a, dtype=np.float64)
    if out.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {out.shape}")
    return out


def as_vector(a: Any, name: str) -> np.ndarray:
    """`a` as a 1-D float64 array; a single row or column, (n, 1) or (1, n), is flattened."""
    if hasattr(a, "detach"):
        a = a.detach().cpu().double().numpy()
    v = np.asarray(a, dtype=np.float64)
    if v.ndim == 2 and 1 in v.shape:
        v = v.reshape(-1)
    if v.ndim != 1:
        raise ValueError(f"{name} must be 1-D (or a single column), got shape {v.shape}")
    return v


def as_pairs(a: Any, name: str) -> np.ndarray:
    """`a` as an (n, 2) float64 array of (w, b) rows."""
    out = as_array(a, name, 2)
    if out.shape[1] != 2:
        raise ValueError(f"{name} must have shape (n, 2), got {out.shape}")
    return out
