"""Cosine similarity between the input weights of hidden neurons.

The input weight of hidden neuron j is row j of a layer's weight matrix W of
shape (m, k) with the bias folded in as the last column, so a row is (w̄_j, b_j).
The paper (Zhou et al., NeurIPS 2022) draws condensation as heat maps of

    D(u, v) = uᵀv / (‖u‖₂ ‖v‖₂)                                   (eq. 5)

between all pairs of rows. `cosine_matrix` is that map. `nearest_line` is chunked: it works
on row blocks of U @ Cᵀ so that a layer with m up to 1e5 neurons never materializes a large
matrix; peak extra memory is about chunk² float64 values (128 MiB at the default chunk of 4096).
"""

from __future__ import annotations

from typing import Any

import numpy as np

DEFAULT_CHUNK = 4096


def as_matrix(W: Any) -> np.ndarray:
    """Return W (numpy array or torch tensor) as a float64 numpy array of shape (m, k)."""
    if hasattr(W, "detach"):  # torch tensor; .double() also handles bfloat16, which numpy lacks
        W = W.detach().cpu().double().numpy()
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2:
        raise ValueError(f"expected a 2-D weight matrix (m, k), got shape {W.shape}")
    return W


TINY = 1e-150  # below this a row's squared entries can underflow (the smallest normal: 2.2e-308)


def row_norms(W: np.ndarray) -> np.ndarray:
    """‖row‖₂ of W (..., m, k) -> (..., m), accurate also where the squares underflow.

    Weight decay can leave neurons at 1e-200 and below; there `np.linalg.norm` squares into
    subnormals and comes out 0.1 % off or 0, so W / norm is no unit vector (a |cos| > 1 broke the
    line counter's log). Such rows are divided by their largest |entry| first; the others keep
    `np.linalg.norm`'s value bit for bit.
    """
    norms = np.linalg.norm(W, axis=-1)
    small = norms < TINY
    if small.any():
        rows = W[small]
        scale = np.abs(rows).max(axis=-1, initial=0.0)
        safe = np.where(scale > 0, scale, 1.0)[:, None]
        norms[small] = scale * np.linalg.norm(rows / safe, axis=-1)
    return norms


def unit_rows(W: Any) -> tuple[np.ndarray, np.ndarray]:
    """Rows of W scaled to unit norm, (m, k), and their norms, (m,); zero rows become NaN."""
    W = as_matrix(W)
    norms = row_norms(W)
    U = np.full_like(W, np.nan)
    nonzero = norms > 0
    U[nonzero] = W[nonzero] / norms[nonzero, None]
    return U, norms


def cosine_matrix(W: Any) -> np.ndarray:
    """(m, k) -> (m, m) matrix of D(u, v), the paper's eq. 5; zero rows give NaN rows/columns."""
    U, norms = unit_rows(W)
    zero = norms == 0
    safe = np.where(zero[:, None], 0.0, U)  # keep NaN out of BLAS, then write it back explicitly
    D = np.clip(safe @ safe.T, -1.0, 1.0)
    # Rounding can leave the diagonal at 1 - 1e-16; a heat map should show exactly 1 there.
    np.fill_diagonal(D, 1.0)
    D[zero, :] = np.nan
    D[:, zero] = np.nan
    return D


def _blocks(n: int, chunk: int) -> range:
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    return range(0, n, chunk)


def nearest_line(U: np.ndarray, centres: np.ndarray, chunk: int = DEFAULT_CHUNK):
    """For unit rows U (n, k) and unit centres (c, k): index (n,) and value (n,) of max |cos|.

    Works on chunk × chunk blocks of U @ centresᵀ. With no centres, index is -1 and
    value is -inf. Ties go to the lowest centre index, as np.argmax does.
    """
    if 0 < U.shape[0] <= chunk and 0 < centres.shape[0] <= chunk:
        return _nearest_one_block(U, centres)
    return _nearest_blocked(U, centres, chunk)


def _nearest_blocked(U: np.ndarray, centres: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    n = U.shape[0]
    best = np.full(n, -np.inf)
    arg = np.full(n, -1, dtype=np.int64)
    for r in _blocks(n, chunk):
        rows = U[r : r + chunk]
        for c in _blocks(centres.shape[0], chunk):
            A = rows @ centres[c : c + chunk].T
            np.abs(A, out=A)  # in place: this block is the largest temporary
            j = np.argmax(A, axis=1)
            v = np.take_along_axis(A, j[:, None], axis=1)[:, 0]
            better = v > best[r : r + chunk]  # strict: an earlier centre block wins a tie
            best[r : r + chunk][better] = v[better]
            arg[r : r + chunk][better] = j[better] + c
    return arg, best


def _nearest_one_block(U: np.ndarray, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """nearest_line when U and centres each fit one block: the same values, fewer steps."""
    A = U @ centres.T
    np.abs(A, out=A)
    j = np.argmax(A, axis=1)
    v = A[np.arange(A.shape[0]), j]
    found = v > -np.inf  # as the blocked loop: a NaN row keeps index -1 and value -inf
    if found.all():
        return j.astype(np.int64, copy=False), v
    return np.where(found, j, -1).astype(np.int64), np.where(found, v, -np.inf)
