"""The line counter, batched: a stack of same-shape layers in, their lines and arcs out.

This is the one implementation behind ``count_orientations`` (one layer, full result) and
``count_lines`` / ``count_lines_many`` (counts only). docs/analysis.md, "Counting orientations",
states the method; the steps here are:

1. Amplitude a = ‖row‖ (bias included). A row is *negligible* when a = 0 or
   log a < median(log a) − max(mads · 1.4826 · MAD(log a), log NEGLIGIBLE_MIN_RATIO): an outlier
   below the bulk, never more than the bulk's spread allows (a lognormal population with log-sd 2
   keeps every row) and never less than 10x below the median.
2. Canonical order: amplitude descending, ties by the row values, so that a permutation of the
   rows changes nothing; the active rows form a prefix of it.
3. The mixture (analysis/_mixture.py, analysis/_fitting.py) is fitted to at most FIT_ROWS active
   rows, evenly spaced in that order (all of them in layers up to FIT_ROWS rows); a component needs
   n_min = max(MIN_ROWS, ⌈min_share · fitted active rows⌉) rows.
4. Kept groups that are arcs (analysis/_arcs.py) are arcs; the others are lines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from condlab.analysis import _arcs, _cosine, _fitting, _mixture

PENALTY = 1.5  # factor on the BIC cost of a component (measured on development seeds, docs)
NEGLIGIBLE_MADS = 5.0  # a negligible row lies this many robust std of log a below the median
NEGLIGIBLE_MIN_RATIO = 10.0  # ... and at least this factor below the median amplitude
MIN_SHARE = 0.05  # a line holds at least this share of the fitted active rows
MIN_ROWS = 4  # ... and at least this many rows
FIT_ROWS = 8192  # the mixture is fitted to at most this many rows of a layer


@dataclass
class Structures:
    """Lines and arcs of a stack (B layers of m rows), on the canonical order.

    order (B, m): canonical order (row indices of W); active (B, m): non-negligible rows, in W's
    row order; fitted (B, n): positions in the canonical order of the rows the mixture was fitted
    to; fit: the mixture (analysis/_mixture.Fit) on those rows; live (B, K) the kept groups (by
    their root component); arc (B, K) the arc each kept group belongs to (-1: a line); width (B, K)
    arc widths in degrees; n_lines, n_arcs (B,).
    """

    order: np.ndarray
    active: np.ndarray
    fitted: np.ndarray
    U: np.ndarray
    fit: _mixture.Fit
    live: np.ndarray
    arc: np.ndarray
    width: np.ndarray
    n_lines: np.ndarray
    n_arcs: np.ndarray
    n_min: np.ndarray


def negligible_cutoff(amp: np.ndarray, mads: np.ndarray) -> np.ndarray:
    """(B,) amplitude below which a row of amp (B, m) is negligible (step 1; 0 rows never count)."""
    pos = amp > 0
    some = pos.any(axis=1)
    la = np.log(np.where(pos, amp, 1.0))
    med = _median(la, pos)
    mad = 1.4826 * _median(np.abs(la - med[:, None]), pos)
    cut = np.exp(med - np.maximum(mads * mad, math.log(NEGLIGIBLE_MIN_RATIO)))
    return np.where(some, cut, np.inf)  # a layer of zero rows has no median: nothing is negligible


def _median(x: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(B,) median of each row of x (B, m) over its valid entries (the mean of the two middle ones
    for an even count, as np.median); 0 where none is valid. np.nanmedian would give the same
    numbers through masked arrays: 14 ms to import numpy.ma, and slow on small rows."""
    ranked = np.sort(np.where(valid, x, np.inf), axis=1)
    c = np.maximum(valid.sum(axis=1), 1)[:, None]
    lo = np.take_along_axis(ranked, (c - 1) // 2, axis=1)[:, 0]
    hi = np.take_along_axis(ranked, c // 2, axis=1)[:, 0]
    return np.where(valid.any(axis=1), (lo + hi) / 2, 0.0)


def canonical_order(W: np.ndarray, amp: np.ndarray) -> np.ndarray:
    """(B, m) row order: amplitude descending, ties by the row values (column 0 first)."""
    order = np.argsort(-amp, axis=1, kind="stable")
    a = np.take_along_axis(amp, order, axis=1)
    for b in np.flatnonzero((a[:, 1:] == a[:, :-1]).any(axis=1)):  # only layers with tied amplitudes
        starts = np.flatnonzero(np.r_[True, a[b, 1:] != a[b, :-1]])
        for s, e in zip(starts, np.r_[starts[1:], a.shape[1]], strict=True):
            if e - s > 1:  # lexsort: the last key is the primary one
                block = order[b, s:e]
                order[b, s:e] = block[np.lexsort(W[b][block].T[::-1])]
    return order


def as_stack(W) -> np.ndarray:
    """A float64 stack (B, m, k) of layers W (B, m, k), checked: finite entries only."""
    if hasattr(W, "detach"):  # torch; .double() also handles bfloat16, which numpy lacks
        W = W.detach().cpu().double().numpy()
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 3:
        raise ValueError(f"expected a stack of weight matrices (B, m, k), got shape {W.shape}")
    if not np.isfinite(W).all():
        raise ValueError("W has non-finite entries (NaN or inf): the weights diverged")
    return W


def shape_groups(items: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """(indices, float64 stack (B_s, m, k)) per shape of items; a layer that is not 2-D raises."""
    if hasattr(items, "detach"):  # a torch stack
        items = items.detach().cpu().double().numpy()
    if isinstance(items, np.ndarray) and items.ndim == 3:
        return [(np.arange(len(items)), as_stack(items))]
    arrays = [np.asarray(W.detach().cpu().double().numpy() if hasattr(W, "detach") else W, dtype=np.float64)
              for W in items]
    shapes: dict[tuple[int, ...], list[int]] = {}
    for i, W in enumerate(arrays):
        if W.ndim != 2:
            raise ValueError(f"expected a 2-D weight matrix (m, k), got shape {W.shape} (layer {i})")
        shapes.setdefault(W.shape, []).append(i)
    return [(np.array(index), as_stack(np.stack([arrays[i] for i in index]))) for index in shapes.values()]


def structures(W: np.ndarray, penalty: np.ndarray, mads: np.ndarray, min_share: float) -> Structures:
    """Lines and arcs of each layer of the float64 stack W (B, m, k), with per-layer knobs
    penalty (B,) and mads (B,) (steps 1-4 of the module docstring)."""
    B, m, k = W.shape
    amp = _cosine.row_norms(W)  # accurate also for rows of 1e-200 (weight decay leaves such neurons)
    active = amp >= negligible_cutoff(amp, mads)[:, None]
    active &= amp > 0
    order = canonical_order(W, amp)
    sorted_amp = np.take_along_axis(amp, order, axis=1)
    U = np.take_along_axis(W, order[..., None], axis=1) / np.where(sorted_amp > 0, sorted_amp, 1.0)[..., None]
    n_active = active.sum(axis=1)
    fitted = _mixture.spread(n_active, m, FIT_ROWS)
    Uf = np.take_along_axis(U, fitted[..., None], axis=1)
    wf = fitted < n_active[:, None]  # active rows are the prefix of the canonical order
    n_fit = wf.sum(axis=1)
    n_min = np.maximum(MIN_ROWS, np.ceil(min_share * n_fit - 1e-9)).astype(np.int64)
    h = max(3, math.ceil(min_share * min(Uf.shape[1], _mixture.SEED_ROWS) - 1e-9)) - 1
    if k == 1:  # one input: every row is on the only line there is
        return _one_dimensional(order, active, fitted, Uf, n_fit, n_min)
    fit = _fitting.fit(Uf, wf, n_min, h, np.asarray(penalty, dtype=float))
    row_group = np.where(fit.comp >= 0, np.take_along_axis(fit.root, np.maximum(fit.comp, 0), axis=1), -1)
    live = np.zeros(fit.alive.shape, dtype=bool)
    lay, comp = np.nonzero(fit.alive)
    live[lay, fit.root[lay, comp]] = True
    arc, width = _arcs.find_arcs(Uf, row_group, fit.mu, live)
    n_lines = (live & (arc < 0)).sum(axis=1)
    n_arcs = np.array([len(set(arc[b][live[b] & (arc[b] >= 0)].tolist())) for b in range(B)], dtype=np.int64)
    return Structures(order, active, fitted, Uf, fit, live, arc, width, n_lines, n_arcs, n_min)


def _one_dimensional(order, active, fitted, Uf, n_fit, n_min) -> Structures:
    B = len(order)
    K = _mixture.MAX_COMPONENTS
    lines = (n_fit >= n_min).astype(np.int64)
    comp = np.where(np.arange(Uf.shape[1])[None, :] < n_fit[:, None], 0, -1)
    comp[lines == 0] = -1
    alive = np.zeros((B, K), bool)
    alive[:, 0] = lines > 0
    mu = np.zeros((B, K, 1))
    mu[:, 0, 0] = 1.0
    fit = _mixture.Fit(mu, np.full((B, K), _mixture.S_MIN), np.zeros((B, K + 1)), alive,
                       np.where(alive, 0, -1), comp)
    return Structures(order, active, fitted, Uf, fit, alive.copy(), np.full((B, K), -1), np.zeros((B, K)),
                      lines, np.zeros(B, np.int64), n_min)
