"""The clustering step of ``count_orientations`` (steps 3-4 of its module docstring): leaders of
a sample seed the centres, then rows join their nearest centre by |cos| and centres move to
their members' sign-aligned mean, folding centres that come within the threshold, to a fixed
point. ``_cluster_jit`` compiles the same decisions (with margins) for ``count_lines``.
"""

from __future__ import annotations

import numpy as np

from condlab.analysis._cosine import leaders, nearest_line

MAX_ITER = 30  # refinement rounds; a fixed point is usually reached in 2-4
SEED_ROWS = 4096  # rows sampled to seed centres on large layers


def _line_sums(U: np.ndarray, labels: np.ndarray, centres: np.ndarray, n: int) -> np.ndarray:
    """(n, k) sums of members' unit rows, each flipped to the side of its centre."""
    rows = np.flatnonzero(labels >= 0)
    Ur, lab = (U, labels) if rows.size == len(labels) else (U[rows], labels[rows])
    sign = np.sign(np.einsum("ij,ij->i", Ur, centres[lab]))
    return _add_rows(lab, sign[:, None] * Ur, n)


def _add_rows(index: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """(n, k) sums of rows of values (r, k) by index (r,): ``np.add.at(zeros, index, values)``.

    Row by row in index order, as the sparse product sign-matrix @ U adds them, so the sums
    are the same bits; a weighted bincount over the flattened (row-major) values adds each
    (index, column) bin in that order too (from 0.0, one double at a time) and costs far less
    than np.add.at or a CSR matrix.
    """
    k = values.shape[1]
    bins = (index[:, None] * k + np.arange(k)).ravel()
    return np.bincount(bins, weights=values.ravel(), minlength=n * k).reshape(n, k)


def _normalize(V: np.ndarray) -> np.ndarray:
    # np.linalg.norm(V, axis=1, keepdims=True) of a real array, without its checks: the same bits
    return V / np.sqrt(np.add.reduce(V * V, axis=1, keepdims=True))


def _seed_centres(U: np.ndarray, thr: float, min_count: int, chunk: int) -> np.ndarray:
    """Candidate centres (c, k): leaders of a sample of U whose caps hold enough sample rows."""
    n = U.shape[0]
    if n == 0:  # no row with an orientation (an all-zero layer): no centre
        return U[:0]
    if min_count == 1 or n <= SEED_ROWS:
        sample = U  # singletons count (or U is small): every row must be able to lead
    else:
        # Even spread over the canonical (amplitude) order: deterministic, order-free.
        sample = U[np.unique(np.linspace(0, n - 1, SEED_ROWS).round().astype(np.int64))]
    lead = leaders(sample, thr, chunk)
    joined = _assign(sample, sample[lead], thr, chunk)
    # At |cos| thresholds near 1 rounding can leave even a leader outside its own cap (-1).
    sizes = np.bincount(joined[joined >= 0], minlength=len(lead))
    # Half the size rule, scaled to the sample, so that sampling noise cannot drop a
    # condensed line; clusters that stay too small are filtered out at the end anyway.
    need = 1 if min_count == 1 else max(2, (min_count * sample.shape[0]) // (2 * n))
    return sample[lead[sizes >= need]]


def _cluster_lines(U: np.ndarray, thr: float, min_count: int, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """Line labels (n,) (-1: no centre within thr) and unit centres (c, k) of canonical U (n, k)."""
    centres = _seed_centres(U, thr, min_count, chunk)
    labels = np.full(U.shape[0], -2, dtype=np.int64)
    for _ in range(MAX_ITER):
        new = _assign(U, centres, thr, chunk)
        if (new == labels).all():  # np.array_equal of two (n,) arrays
            break
        labels = new
        sizes = np.bincount(labels[labels >= 0], minlength=len(centres))
        sums = _line_sums(U, labels, centres, len(centres))
        alive = np.flatnonzero(sizes > 0)
        # Largest clusters first (ties: earlier centre, i.e. larger leader amplitude).
        alive = alive[np.argsort(-sizes[alive], kind="stable")]
        means = _normalize(sums[alive])
        keep = leaders(means, thr, chunk)
        if len(keep) == len(alive):
            # Nothing to fold (every centre leads, so each is its own nearest leader, sign +1):
            # what np.add.at below adds to zeros, 0.0 + 1.0 * sums, is sums + 0.0.
            centres = _normalize(sums[alive] + 0.0)
            continue
        # Fold every dropped centre into its nearest surviving one, weighted by size:
        # sums already carry the member counts, so sign-align and add them.
        host = nearest_line(means, means[keep], chunk)[0]
        sign = np.sign(np.einsum("ij,ij->i", means, means[keep][host]))
        merged = np.zeros((len(keep), U.shape[1]))
        np.add.at(merged, host, sign[:, None] * sums[alive])
        centres = _normalize(merged)
    else:  # no fixed point within MAX_ITER: labels must still refer to the final centres
        labels = _assign(U, centres, thr, chunk)
    return labels, centres


def _assign(U: np.ndarray, centres: np.ndarray, thr: float, chunk: int) -> np.ndarray:
    """Nearest centre by |cos| for each row, or -1 when no centre is within thr."""
    labels, best = nearest_line(U, centres, chunk)
    labels[best < thr] = -1
    return labels
