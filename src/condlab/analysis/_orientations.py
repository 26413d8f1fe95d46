"""Count the orientations that a layer's input weights have condensed onto.

Conventions (used throughout condlab.analysis):

* Input weight of hidden neuron j = row j of the layer's W, shape (m, k), bias folded
  in as the last column. Its *amplitude* is ‖(w̄_j, b_j)‖₂, the norm of the full row.
* A *direction* is a unit vector u; a *line* is the pair {u, −u}. For lines we compare
  rows with |D| and for directions with the signed D, D being the cosine of eq. 5.
  The paper's bound for activation multiplicity p: at most p lines, 2p directions.

Method (deterministic; no m×m matrix; time O(m · c · k) for c candidate centres):

1. Neurons with amplitude < amplitude_ratio × (the 90th percentile of the non-zero
   amplitudes) are `negligible`, as in the two-layer ReLU paper, which drops tiny neurons
   before drawing the map. The percentile, not the maximum: one giant neuron must not set
   every other neuron aside. Zero rows are always negligible (they have no orientation).
2. The other rows, as unit vectors, are put in a canonical order: amplitude
   descending, ties by the row values. Everything below runs in that order, so a
   permutation of W permutes the result and changes no count.
3. Seeds: a leader pass (a row becomes a centre when |cos| < cos_threshold to every
   earlier centre; condensed neurons are the large ones, so they lead) over all rows,
   or over SEED_ROWS rows spread evenly along the canonical order when m is large.
   Leaders whose cap holds fewer than half the size rule (scaled to the sample) are
   dropped: a condensed line has at least min_share of the rows, so it survives
   sampling, while the many small caps of scattered rows do not cost O(m·c) later.
4. Refine to a fixed point (at most MAX_ITER rounds) on all rows: join each row to
   its nearest centre if |cos| >= cos_threshold (else it is left out), move each
   centre to the sign-aligned mean of its members, then merge centres by a second
   leader pass over the centres, largest cluster first. No chaining: surviving
   centres stay pairwise below the threshold and a cluster is a cap of angular radius
   arccos(cos_threshold), so isotropic rows cannot pile up into one big cluster.
5. Caps are joined when the band between their centres has no empty gap and cut where
   their members leave one (the *gap rule*); a group wider than ARC_DEG along its main
   axis is an *arc*, reported in `arcs`, not as lines (analysis/_structures.py).
   A group is *condensed* when it holds at least max(2, ceil(min_share × m_active))
   members and is tighter than isotropic rows of the same m and k would make it by
   chance (the null model of _structures.py, level NULL_ALPHA = 0.01); other active rows
   are `scattered`. min_share = 0 switches the size rule
   off, so every cluster counts, singletons too (e.g. m ≤ k orthogonal rows give m
   lines); that is how to list every orientation rather than the condensed ones.
   Each condensed line splits by the sign of cos to its mean into up to two
   directions, which are condensed under the same size rule.
6. The line and arc counts are repeated at cos_threshold + each offset in `sweep` and at
   amplitude_ratio × each factor of AMPLITUDE_SWEEP (0.5, 1, 2); `stable` says whether
   they all stayed the same.

Defaults, measured with benchmarks/threshold_sweep.py (1-4 planted lines ≥ 30° apart,
random signs, angular noise sigma·|N(0,1)|, m = 200, k = 2..10, with and without 20%
isotropic rows of comparable amplitude; 10 seeds per cell):

* cos_threshold = 0.95 (within 18.2° of the centre). Stable band: the planted count
  is exact in every case (10 seeds × 12-16 layouts) for |cos| in [0.92, 0.98] at
  sigma = 1°, 3°, 5°; at sigma = 8° it is exact in 91-100% of cases over 0.92..0.97.
  Above the band noisy clusters fragment (sigma = 5°: 86% exact at 0.99); below it
  lines 30° apart merge and isotropic rows form false clusters (84-97% at 0.80-0.90).
  The default sits mid-band, so the default sweep (offsets −0.02..+0.02, i.e.
  0.93..0.97) stays inside it and `stable` flags layers whose count is not.
* amplitude_ratio = 0.1. With half the rows isotropic at 3% of the condensed
  amplitude, counts are exact for ratios 0.05..0.3; at 0.01-0.02 those rows stay
  active and add false lines in 10-20% of layers.
* min_share = 0.05. Isotropic layers (k = 6, m = 50..200) give ≤ 0.1 false lines per
  layer from 0.05 up (0.8 at 0.02 for m = 50); 4 planted lines are exact for 0.02..0.15.
* Caveat: for k ≤ 3 an isotropic layer puts ≈ min_share of its rows inside one cap of
  18° (k = 3) or more (k = 2), so small isotropic layers there show false lines;
  raise cos_threshold or min_share for such layers, and read `stable`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from condlab.analysis._clustering import MAX_ITER, SEED_ROWS, _cluster_lines, _normalize
from condlab.analysis._cosine import DEFAULT_CHUNK, nearest_line, unit_rows
from condlab.analysis._structures import (
    ARC_DEG,
    NULL_ALPHA,
    Groups,
    merge_by_band,
    split_by_gap,
)

COS_THRESHOLD = 0.95
AMPLITUDE_RATIO = 0.1
AMPLITUDE_QUANTILE = 0.9  # the reference amplitude: robust to a few giant neurons
AMPLITUDE_SWEEP = (0.5, 1.0, 2.0)  # amplitude_ratio times these, for `stable`
MIN_SHARE = 0.05
SWEEP = (-0.02, -0.01, 0.0, 0.01, 0.02)


@dataclass(frozen=True)
class Cluster:
    """Neurons condensed on one line or direction; `mean` is a unit vector of shape (k,)."""

    members: np.ndarray
    mean: np.ndarray
    share: float
    tightness: float
    width_deg: float = 0.0  # 5-95 % angular span along the principal axis (arcs only)

    def to_dict(self) -> dict:
        return {
            "members": [int(i) for i in self.members],
            "mean": [float(x) for x in self.mean],
            "share": float(self.share),
            "tightness": float(self.tightness),
            "width_deg": float(self.width_deg),
        }


@dataclass(frozen=True)
class Orientations:
    """Condensed lines and directions of one layer; see the module docstring."""

    n_lines: int
    n_directions: int
    lines: tuple[Cluster, ...]
    directions: tuple[Cluster, ...]
    scattered: np.ndarray
    negligible: np.ndarray
    counts_by_threshold: dict[float, int]
    stable: bool
    params: dict = field(default_factory=dict)
    arcs: tuple[Cluster, ...] = ()  # continuous bands of neurons, neither one line nor several
    arcs_by_threshold: dict[float, int] = field(default_factory=dict)
    counts_by_amplitude: dict[float, int] = field(default_factory=dict)

    @property
    def n_arcs(self) -> int:
        return len(self.arcs)

    def to_dict(self) -> dict:
        """JSON-serializable form (lists, floats); threshold keys become strings."""
        return {
            "n_lines": int(self.n_lines),
            "n_directions": int(self.n_directions),
            "lines": [c.to_dict() for c in self.lines],
            "directions": [c.to_dict() for c in self.directions],
            "scattered": [int(i) for i in self.scattered],
            "negligible": [int(i) for i in self.negligible],
            "counts_by_threshold": {repr(float(t)): int(n) for t, n in self.counts_by_threshold.items()},
            "n_arcs": self.n_arcs,
            "arcs": [c.to_dict() for c in self.arcs],
            "arcs_by_threshold": {repr(float(t)): int(n) for t, n in self.arcs_by_threshold.items()},
            "counts_by_amplitude": {repr(float(r)): int(n) for r, n in self.counts_by_amplitude.items()},
            "stable": bool(self.stable),
            "params": dict(self.params),  # built from plain Python values
        }


def _canonical_order(U: np.ndarray, amp: np.ndarray) -> np.ndarray:
    # Amplitude descending, then row values, so equal rows are the only ties and a
    # permutation of W gives the same sequence. Row values are compared only inside runs of
    # equal amplitude: a lexsort over all k columns costs O(m k log m) for nothing on wide
    # layers (k = 4608 in a ResNet), where amplitudes are almost never tied.
    order = np.argsort(-amp, kind="stable")
    a = amp[order]
    tied = np.flatnonzero(a[1:] == a[:-1])  # positions whose amplitude equals the next one's
    if tied.size == 0:
        return order
    starts = np.flatnonzero(np.concatenate([[True], a[1:] != a[:-1]]))
    ends = np.append(starts[1:], len(a))
    for s, e in zip(starts, ends, strict=True):
        if e - s > 1:  # lexsort: last key is primary, so column 0 decides first
            block = order[s:e]
            order[s:e] = block[np.lexsort(tuple(U[block, c] for c in reversed(range(U.shape[1]))))]
    return order


def _make_cluster(U: np.ndarray, members: np.ndarray, mean: np.ndarray, m: int,
                  width: float = 0.0) -> Cluster:
    tight = float(np.abs(U[members] @ mean).mean())
    return Cluster(members=members, mean=mean, share=len(members) / m, tightness=tight, width_deg=width)


def _line_cluster(U: np.ndarray, members: np.ndarray, centre: np.ndarray, m: int,
                  width: float = 0.0) -> Cluster:
    flip = np.sign(U[members] @ centre)
    mean = _normalize(flip @ U[members][None])[0]
    mean *= np.sign(mean[np.argmax(np.abs(mean))])  # largest-|.| component positive
    return _make_cluster(U, members, mean, m, width)


def _to_rows(c: Cluster, order: np.ndarray) -> Cluster:
    """Same cluster with members as sorted row indices of W instead of canonical positions."""
    return Cluster(np.sort(order[c.members]), c.mean, c.share, c.tightness, c.width_deg)


def _structures(
    U: np.ndarray, thr: float, min_count: int, chunk: int, G: Groups | None = None
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Condensed lines and arcs of canonical U (n, k) at thr: member positions, largest first.

    Caps from `_cluster_lines` are joined or cut by the gap rule, then kept when they pass
    the size rule and (unless singletons count) the null model; see `_structures`.
    `G` (Groups of this U) shares group measures between calls on the same U.
    """
    G = Groups(U) if G is None else G
    labels = _cluster_lines(U, thr, min_count, chunk)[0]
    sizes = np.bincount(labels[labels >= 0]) if np.any(labels >= 0) else np.zeros(0, np.int64)
    piece_min = 1 if min_count == 1 else max(2, (min_count + 1) // 2)
    groups = [np.flatnonzero(labels == b) for b in np.flatnonzero(sizes >= piece_min)]
    if min_count > 1:  # singletons are orientations of their own: nothing to join or cut
        groups = [part for g in merge_by_band(G, groups) for part in split_by_gap(G, g, piece_min)]
        groups = [g for g in groups if len(g) >= min_count and G.chance(g, len(U)) <= NULL_ALPHA]
    else:
        groups = [g for g in groups if len(g) >= min_count]
    groups.sort(key=lambda g: (-len(g), int(g[0])))
    arcs = [g for g in groups if min_count > 1 and G.is_arc(g)]
    return [g for g in groups if not any(g is a for a in arcs)], arcs


def _lines_and_directions(
    G: Groups,
    groups: list[np.ndarray],
    min_count: int,
    order: np.ndarray,
    m: int,
) -> tuple[list[Cluster], list[Cluster]]:
    """Line clusters for condensed groups, and the condensed directions each one splits into.

    Works on canonical positions; the clusters returned hold row indices of W (m rows).
    """
    U = G.U
    lines, directions = [], []
    for g in groups:
        line = _line_cluster(U, g, G.mean(g), m)
        lines.append(line)
        side = U[g] @ line.mean
        for part in (g[side > 0], g[side < 0]):
            if len(part) >= min_count:  # a direction's mean keeps its sign
                mean = _normalize(U[part].sum(0, keepdims=True))[0]
                directions.append(_make_cluster(U, part, mean, m))
    directions.sort(key=lambda c: -c.share)  # stable: ties keep line order
    return [_to_rows(c, order) for c in lines], [_to_rows(c, order) for c in directions]


def _sweep_counts(
    G: Groups, cos_threshold: float, sweep: tuple[float, ...], min_count: int, chunk: int
) -> dict[float, tuple[int, int]]:
    """(lines, arcs) at cos_threshold + each offset, except at cos_threshold itself (done by the caller)."""
    # Rounding keeps keys like 0.93 instead of 0.9299999999999999; the floor keeps sign() defined.
    # The ceiling 1 - 1e-9: at |cos| >= 1 nothing but exact duplicates could join a line.
    thresholds = {round(min(1.0 - 1e-9, max(0.01, cos_threshold + d)), 10) for d in sweep}
    out = {}
    for t in sorted(thresholds - {round(cos_threshold, 10)}):
        lines, arcs = _structures(G.U, t, min_count, chunk, G)
        out[t] = (len(lines), len(arcs))
    return out


def _min_count(min_share: float, m_active: int) -> int:
    if min_share == 0:
        return 1  # size rule off: every cluster counts, singletons too
    return max(2, math.ceil(min_share * m_active - 1e-9))  # 1e-9: 0.05 * 60 is 3.0000000000000004


def _ranked(U_all: np.ndarray, amp: np.ndarray) -> np.ndarray:
    """Non-zero rows of W in canonical order (amplitude descending): canonical index -> row of W."""
    nonzero = np.flatnonzero(amp > 0)
    return nonzero[_canonical_order(U_all[nonzero], amp[nonzero])]


def _active(U_all: np.ndarray, amp: np.ndarray, ranked: np.ndarray,
            cutoff: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows at or above cutoff in canonical order, and their unit rows.

    The canonical order sorts by amplitude first, so the active rows are a prefix of it and
    every cutoff of the amplitude sweep reuses one sort.
    """
    order = ranked[: int(np.count_nonzero(amp[ranked] >= cutoff))]
    return order, U_all[order]


def _amplitude_reference(amp: np.ndarray, ranked: np.ndarray | None = None) -> float:
    """A high quantile of the non-zero amplitudes: one giant neuron cannot move it.

    With `ranked` (the non-zero rows by amplitude, descending; `_ranked`) the quantile is read
    from that order instead of sorting again: np.quantile's linear interpolation, the same bits.
    """
    if ranked is None:
        positive = amp[amp > 0]
        return float(np.quantile(positive, AMPLITUDE_QUANTILE)) if positive.size else 0.0
    return _sorted_quantile(amp[ranked[::-1]], AMPLITUDE_QUANTILE) if ranked.size else 0.0


def _sorted_quantile(s: np.ndarray, q: float) -> float:
    """np.quantile(s, q) (method 'linear') of ascending s (n,), n >= 1: its arithmetic, step by step."""
    v = (len(s) - 1) * q  # numpy's virtual index
    if v >= len(s) - 1:
        return float(s[-1])
    i = math.floor(v)
    g = v - i
    a, b = s[i], s[i + 1]
    d = b - a
    # numpy's _lerp: a + d·g, or b - d·(1 - g) from the upper neighbour when g >= 0.5
    return float(b - d * (1 - g)) if g >= 0.5 else float(a + d * g)


def _amplitude_counts(U_all, amp, ranked, reference, amplitude_ratio, min_share, thr, chunk, here) -> dict:
    """(lines, arcs) at cos_threshold for each amplitude ratio of the amplitude sweep."""
    out = {}
    for factor in AMPLITUDE_SWEEP:
        ratio = round(amplitude_ratio * factor, 10)
        if factor == 1.0:
            out[ratio] = here  # the caller's own count
            continue
        _, U = _active(U_all, amp, ranked, ratio * reference)
        lines, arcs = _structures(U, thr, _min_count(min_share, len(U)), chunk)
        out[ratio] = (len(lines), len(arcs))
    return out


def _prepare(W: Any, cos_threshold: float, amplitude_ratio: float):
    """Checked unit rows, amplitudes, reference amplitude, canonical ranking, active rows of W."""
    if not 0 < cos_threshold <= 1:
        raise ValueError(f"cos_threshold must be in (0, 1], got {cos_threshold}")
    if amplitude_ratio < 0:
        raise ValueError(f"amplitude_ratio must be >= 0, got {amplitude_ratio}")
    U_all, amp = unit_rows(W)
    if not np.all(np.isfinite(amp)):
        raise ValueError("W has non-finite entries")
    ranked = _ranked(U_all, amp)
    reference = _amplitude_reference(amp, ranked)
    order, U = _active(U_all, amp, ranked, amplitude_ratio * reference)
    return U_all, amp, reference, ranked, order, U


def count_orientations(
    W: Any,
    *,
    cos_threshold: float = COS_THRESHOLD,
    amplitude_ratio: float = AMPLITUDE_RATIO,
    min_share: float = MIN_SHARE,
    sweep: tuple[float, ...] = SWEEP,
    chunk: int = DEFAULT_CHUNK,
) -> Orientations:
    """Condensed lines, arcs and directions of W (m, k) by clustering eq. 5 cosines; see module docstring.

    `sweep` holds offsets added to cos_threshold (results clipped to [0.01, 1 - 1e-9]);
    amplitude_ratio is swept over AMPLITUDE_SWEEP times its value. ``sweep=()`` gives a single
    count (no threshold or amplitude sweep, so ``stable`` is not informative): for sweeps and
    trackers that count many layers.
    """
    U_all, amp, reference, ranked, order, U = _prepare(W, cos_threshold, amplitude_ratio)
    m = U_all.shape[0]
    cutoff = amplitude_ratio * reference
    # Zero rows have no orientation, so they are set aside even when amplitude_ratio = 0.
    negligible = np.setdiff1d(np.arange(m), order)
    min_count = _min_count(min_share, len(order))

    G = Groups(U)  # group measures depend on U and the group only: shared by every threshold
    line_groups, arc_groups = _structures(U, cos_threshold, min_count, chunk, G)
    sweep_counts = _sweep_counts(G, cos_threshold, sweep, min_count, chunk)
    sweep_counts = dict(sorted({**sweep_counts, cos_threshold: (len(line_groups), len(arc_groups))}.items()))
    here = (len(line_groups), len(arc_groups))
    # an empty `sweep` asks for one count, without any stability check: skip the amplitude sweep too
    by_amp = _amplitude_counts(U_all, amp, ranked, reference, amplitude_ratio, min_share, cos_threshold,
                               chunk, here) if sweep else {round(amplitude_ratio, 10): here}

    lines, directions = _lines_and_directions(G, line_groups, min_count, order, m)
    arcs = [_to_rows(_line_cluster(U, g, G.mean(g), m, G.width(g)), order) for g in arc_groups]
    taken = [c.members for c in lines + arcs]
    scattered = np.setdiff1d(order, np.concatenate(taken) if taken else np.zeros(0, np.int64))
    counts = {t: n for t, (n, _) in sweep_counts.items()}
    arc_counts = {t: a for t, (_, a) in sweep_counts.items()}
    stable = len(set(sweep_counts.values())) <= 1 and len(set(by_amp.values())) <= 1

    params = {
        "cos_threshold": float(cos_threshold),
        "amplitude_ratio": float(amplitude_ratio),
        "amplitude_quantile": AMPLITUDE_QUANTILE,
        "amplitude_reference": float(reference),
        "amplitude_cutoff": float(cutoff),
        "amplitude_sweep": [float(r) for r in by_amp],
        "min_share": float(min_share),
        "min_count": int(min_count),
        "null_alpha": NULL_ALPHA if min_count > 1 else None,
        "arc_deg": ARC_DEG,
        "sweep_offsets": [float(d) for d in sweep],
        "sweep_thresholds": [float(t) for t in counts],
        "m": int(m),
        "m_active": int(len(order)),
        "chunk": int(chunk),
        "seed_rows": SEED_ROWS,
        "max_iter": MAX_ITER,
        "method": "leader pass by amplitude + size-ordered centre merge, fixed point; "
                  "gap rule, arc width and isotropic null model (analysis/_structures.py)",
    }
    return Orientations(
        n_lines=len(lines),
        n_directions=len(directions),
        lines=tuple(lines),
        directions=tuple(directions),
        scattered=scattered.astype(np.int64),
        negligible=negligible.astype(np.int64),
        counts_by_threshold=counts,
        stable=stable,
        params=params,
        arcs=tuple(arcs),
        arcs_by_threshold=arc_counts,
        counts_by_amplitude={r: n for r, (n, _) in by_amp.items()},
    )


def cosine_order(W: Any, orientations: Any = None, **count_kwargs: Any) -> np.ndarray:
    """(m, k) -> (m,) row permutation that puts condensed groups next to each other for eq. 5 maps.

    Order: condensed lines by share (largest first); within a line the positive
    direction, then the negative one (sign relative to the line mean); within a
    direction by angle to the line mean, smallest first. Then scattered neurons,
    grouped by the nearest condensed line and sorted by angle to it, then the
    negligible ones by amplitude. `orientations` reuses a result of
    `count_orientations(W)`; otherwise it is computed with `count_kwargs`.
    """
    U, norms = unit_rows(W)
    orient = orientations if orientations is not None else count_orientations(W, **count_kwargs)
    parts = []
    for line in tuple(orient.lines) + tuple(getattr(orient, "arcs", ())):  # arcs are blocks too
        c = U[line.members] @ line.mean
        # sign group 0 (positive) first, then by |cos| descending = angle ascending
        key = np.lexsort((-np.abs(c), c < 0))
        parts.append(line.members[key])
    scattered = np.asarray(orient.scattered, dtype=np.int64)
    if len(orient.lines) and scattered.size:
        means = np.stack([line.mean for line in orient.lines])
        near, cos = nearest_line(U[scattered], means)
        parts.append(scattered[np.lexsort((-cos, near))])
    else:
        parts.append(scattered[np.argsort(-norms[scattered], kind="stable")])
    negligible = np.asarray(orient.negligible, dtype=np.int64)
    parts.append(negligible[np.argsort(-norms[negligible], kind="stable")])
    return np.concatenate(parts).astype(np.int64)
