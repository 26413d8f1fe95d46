"""Count the orientations that a layer's input weights have condensed onto.

Conventions (used throughout condlab.analysis):

* Input weight of hidden neuron j = row j of the layer's W, shape (m, k), bias folded
  in as the last column. Its *amplitude* is ‖(w̄_j, b_j)‖₂, the norm of the full row.
* A *direction* is a unit vector u; a *line* is the pair {u, −u}. For lines we compare
  rows with |D| and for directions with the signed D, D being the cosine of eq. 5.
  The paper's bound for activation multiplicity p: at most p lines, 2p directions.

Method: docs/analysis.md, "Counting orientations" (one statement of it, with every constant);
analysis/_counting.py (amplitudes, canonical order), _mixture.py (the mixture of a uniform
background and angular central Gaussian lines, BIC, separation) and _arcs.py (arcs). The count
is repeated over a small band of the method's own knobs: the BIC penalty factor times
PENALTY_BAND (``counts_by_threshold``, keyed by the penalty factor) and the negligible rule's
MADs plus MADS_BAND (``counts_by_amplitude``); ``stable`` says whether lines and arcs stayed
the same over the band.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from condlab.analysis import _arcs, _mixture
from condlab.analysis._cosine import nearest_line, unit_rows
from condlab.analysis._counting import (
    FIT_ROWS,
    MIN_ROWS,
    MIN_SHARE,
    NEGLIGIBLE_MADS,
    NEGLIGIBLE_MIN_RATIO,
    PENALTY,
    as_stack,
    shape_groups,
    structures,
)

PENALTY_BAND = (2 / 3, 1.0, 1.5)  # the penalty factor times these: counts_by_threshold
MADS_BAND = (-1.0, 0.0, 1.0)  # the negligible rule's MADs plus these: counts_by_amplitude


@dataclass(frozen=True)
class Cluster:
    """Neurons condensed on one line or direction; `mean` is a unit vector of shape (k,)."""

    members: np.ndarray
    mean: np.ndarray
    share: float
    tightness: float
    width_deg: float = 0.0  # arcs: sqrt(12) x the std of the members' angles along the arc

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
    counts_by_threshold: dict[float, int]  # lines per BIC penalty factor of the band
    stable: bool
    params: dict = field(default_factory=dict)
    arcs: tuple[Cluster, ...] = ()  # continuous bands of neurons, neither one line nor several
    arcs_by_threshold: dict[float, int] = field(default_factory=dict)
    counts_by_amplitude: dict[float, int] = field(default_factory=dict)  # lines per negligible-rule MADs

    @property
    def n_arcs(self) -> int:
        return len(self.arcs)

    def to_dict(self) -> dict:
        """JSON-serializable form (lists, floats); band keys become strings."""
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


def _check(penalty: float, negligible_mads: float, min_share: float) -> None:
    if not np.isfinite(penalty) or penalty <= 0:
        raise ValueError(f"penalty must be > 0, got {penalty}")
    if not np.isfinite(negligible_mads) or negligible_mads <= 0:
        raise ValueError(f"negligible_mads must be > 0, got {negligible_mads}")
    if not 0 <= min_share <= 1:
        raise ValueError(f"min_share must lie in [0, 1], got {min_share}")


def count_orientations(
    W: Any,
    *,
    penalty: float = PENALTY,
    negligible_mads: float = NEGLIGIBLE_MADS,
    min_share: float = MIN_SHARE,
    band: bool = True,
) -> Orientations:
    """Condensed lines, arcs and directions of W (m, k) (eq. 5's rows; Sec. 5's lines).

    ``band=False`` gives the single count (no band; ``stable`` is then not informative): what
    sweeps and trackers use, and what ``count_lines(W)`` returns.
    """
    _check(penalty, negligible_mads, min_share)
    W = as_stack(W[None] if hasattr(W, "ndim") and W.ndim == 2 else np.asarray(W)[None])[0]
    knobs = [(penalty, negligible_mads)]
    if band:
        knobs += [(round(penalty * f, 10), negligible_mads) for f in PENALTY_BAND if f != 1.0]
        knobs += [(penalty, negligible_mads + d) for d in MADS_BAND if d != 0.0]
    st = structures(np.broadcast_to(W, (len(knobs),) + W.shape),
                    np.array([p for p, _ in knobs]), np.array([c for _, c in knobs]), min_share)
    found = {kn: (int(st.n_lines[i]), int(st.n_arcs[i])) for i, kn in enumerate(knobs)}
    return _result(W, st, 0, found, penalty, negligible_mads, min_share)


def count_orientations_many(
    layers: Any,
    *,
    penalty: float = PENALTY,
    negligible_mads: float = NEGLIGIBLE_MADS,
    min_share: float = MIN_SHARE,
) -> list[Orientations]:
    """``[count_orientations(W, band=False, ...) for W in layers]``: a stack (B, m, k) or a list of
    (m, k) layers, those of one shape (a model's heads, a slider's frames) fitted in one call."""
    _check(penalty, negligible_mads, min_share)
    items = layers if isinstance(layers, np.ndarray) or hasattr(layers, "detach") else list(layers)
    out: list[Orientations | None] = [None] * len(items)
    knob = (penalty, negligible_mads)
    for index, S in shape_groups(items):
        st = structures(S, np.full(len(S), penalty), np.full(len(S), negligible_mads), min_share)
        for b, i in enumerate(index.tolist()):
            found = {knob: (int(st.n_lines[b]), int(st.n_arcs[b]))}
            out[i] = _result(S[b], st, b, found, penalty, negligible_mads, min_share)
    return out  # type: ignore[return-value]


def _result(W: np.ndarray, st, b: int, found: dict, penalty: float, negligible_mads: float,
            min_share: float) -> Orientations:
    """The Orientations of layer b of st; found: (n_lines, n_arcs) per (penalty, mads) knob of its band."""
    by_pen = {p: found[(p, negligible_mads)] for p in sorted({p for p, c in found if c == negligible_mads})}
    by_mads = {c: found[(penalty, c)] for c in sorted({c for p, c in found if p == penalty})}
    lines, directions, arcs, scattered = _clusters(W, st, b)
    m = W.shape[0]
    params = {
        "penalty": float(penalty), "negligible_mads": float(negligible_mads),
        "negligible_min_ratio": NEGLIGIBLE_MIN_RATIO, "min_share": float(min_share), "min_rows": MIN_ROWS,
        "n_min": int(st.n_min[b]), "m": int(m), "m_active": int(st.active[b].sum()),
        "fit_rows": int(len(st.fitted[b])), "band_penalties": [float(p) for p in by_pen],
        "band_mads": [float(c) for c in by_mads], "seed_rows": _mixture.SEED_ROWS,
        "max_components": _mixture.MAX_COMPONENTS, "separation": _mixture.SEPARATION,
        "line_max_deg": _mixture.LINE_MAX_DEG,
        "arc_min_rows": _arcs.ARC_MIN_ROWS, "arc_min_deg": _arcs.ARC_MIN_DEG, "max_fit_rows": FIT_ROWS,
        "method": "mixture of a uniform background and angular central Gaussian lines (EM, BIC x penalty), "
                  "components joined unless separated (Ashman's D), arcs by a flat-band test "
                  "(docs/analysis.md)",
    }
    return Orientations(
        n_lines=len(lines), n_directions=len(directions), lines=tuple(lines), directions=tuple(directions),
        scattered=scattered, negligible=np.flatnonzero(~st.active[b]).astype(np.int64),
        counts_by_threshold={p: n for p, (n, _) in by_pen.items()}, stable=len(set(found.values())) <= 1,
        params=params, arcs=tuple(arcs), arcs_by_threshold={p: a for p, (_, a) in by_pen.items()},
        counts_by_amplitude={c: n for c, (n, _) in by_mads.items()},
    )


def _row_groups(W: np.ndarray, st, b: int = 0) -> np.ndarray:
    """(m,) the kept group (root component) of each row of layer b of st, -1: none.

    Up to FIT_ROWS rows the fit's own labels; beyond, every active row is labelled by the fitted
    mixture (one E-step over all rows)."""
    f, order, m = st.fit, st.order[b], W.shape[0]
    if len(st.fitted[b]) == m:
        comp = f.comp[b]  # labels of the rows in canonical order
    else:
        n_act = int(st.active[b].sum())
        U, _ = unit_rows(W[order[:n_act]])
        UT = np.ascontiguousarray(U.T)[None]
        e = _mixture.e_step(UT, f.mu[b:b + 1], np.log(f.s[b:b + 1]), f.log_pi[b:b + 1], W.shape[1])
        comp = np.full(m, -1)
        comp[:n_act] = _mixture.labels(e, np.ones((1, n_act), bool))[0]
    out = np.empty(m, dtype=np.int64)
    out[order] = np.where(comp >= 0, f.root[b][np.maximum(comp, 0)], -1)
    return out


def _cluster(U: np.ndarray, members: np.ndarray, ref: np.ndarray, m: int, width: float = 0.0) -> Cluster:
    """A line cluster: the sign-aligned mean of its unit rows, largest-|.| component positive."""
    X = U[members]
    mean = (np.sign(X @ ref + 1e-300)[:, None] * X).sum(axis=0)
    mean /= np.linalg.norm(mean)
    mean *= np.sign(mean[np.argmax(np.abs(mean))])
    return Cluster(np.sort(members), mean, len(members) / m, float(np.abs(X @ mean).mean()), width)


def _clusters(W: np.ndarray, st, b: int = 0):
    """(lines, directions, arcs, scattered) of layer b of st, members as row indices of W."""
    m = W.shape[0]
    U, _ = unit_rows(W)
    U = np.nan_to_num(U)
    group = _row_groups(W, st, b)
    live, arc, mu = st.live[b], st.arc[b], st.fit.mu[b]
    # largest first; ties by component index, which (like everything in the fit) follows the
    # canonical order, so that a permutation of the rows keeps the order of the clusters
    lines = [_cluster(U, np.flatnonzero(group == g), mu[g], m)
             for g in sorted(np.flatnonzero(live & (arc < 0)), key=lambda g: -np.count_nonzero(group == g))]
    lines = [c for c in lines if len(c.members)]
    arc_ids = sorted(set(arc[live & (arc >= 0)].tolist()),
                     key=lambda a: -np.isin(group, np.flatnonzero(live & (arc == a))).sum())
    arcs = [_cluster(U, np.flatnonzero(np.isin(group, np.flatnonzero(live & (arc == a)))), mu[a], m,
                     float(st.width[b, a])) for a in arc_ids]
    directions = []
    n_min = int(st.n_min[b])
    for line in lines:
        side = U[line.members] @ line.mean
        for part in (line.members[side > 0], line.members[side < 0]):
            if len(part) >= n_min:  # a direction's mean keeps its sign
                mean = U[part].sum(axis=0)
                mean /= np.linalg.norm(mean)
                directions.append(Cluster(part, mean, len(part) / m, float(np.abs(U[part] @ mean).mean())))
    directions.sort(key=lambda c: -c.share)  # stable: ties keep the line order
    taken = [c.members for c in lines + arcs]
    active = np.flatnonzero(st.active[b])
    scattered = np.setdiff1d(active, np.concatenate(taken) if taken else np.zeros(0, np.int64))
    return lines, directions, arcs, scattered.astype(np.int64)


def cosine_order(W: Any, orientations: Any = None, **count_kwargs: Any) -> np.ndarray:
    """(m, k) -> (m,) row permutation that puts condensed groups next to each other for eq. 5 maps.

    Order: condensed lines by share (largest first), then arcs; within a line the positive
    direction, then the negative one (sign relative to the line mean); within a direction by
    angle to the line mean, smallest first. Then scattered neurons, grouped by the nearest
    condensed line and sorted by angle to it, then the negligible ones by amplitude.
    `orientations` reuses a result of `count_orientations(W)`; otherwise it is computed with
    `count_kwargs`.
    """
    U, norms = unit_rows(W)
    orient = orientations if orientations is not None else count_orientations(W, **count_kwargs)
    parts = []
    for line in tuple(orient.lines) + tuple(getattr(orient, "arcs", ())):  # arcs are blocks too
        c = U[line.members] @ line.mean
        key = np.lexsort((-np.abs(c), c < 0))  # sign group 0 (positive) first, then angle ascending
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
