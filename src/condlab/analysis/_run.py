"""Analyse a whole run at one epoch: every hidden layer, plus the 1-D pictures of Figs. 5-6.

Results are files a user can open: ``analysis.json`` (counts, clusters, predictions, angles,
polynomial R^2, stable lines, the options used) and ``analysis.npz`` (the arrays the figures
need: cosine ordering, direction-field grid, test-grid output, orientation trajectories).
``analysis_name`` keys a result by its options (``epoch120``, ``epoch120-pen2``), so an
analysis with other options never replaces an earlier one.

Wide layers: everything here is O(m) or O(K x S); orientation trajectories follow at most
TRAJECTORY_NEURONS neurons (evenly spread; the recorded ones of a thinned record).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..records import Run, atomic_write_json, atomic_write_npz, provenance
from ._fields import (
    PolyFit,
    direction_field,
    orientation_trajectories,
    polynomial_fits,
    stable_lines_2d,
    velocities,
)
from ._leading import effective_residual
from ._orientations import cosine_order
from ._rank import model_rank
from ._report import LayerReport, analyze_layer, forward_blocks, layer_history, run_history
from ._stage import default_epoch

TEST_POINTS = 200
RANK_INPUTS = 1000               # model rank on the first 1000 training inputs at most
RANK_MAX_ENTRIES = 20_000_000    # ... and only when DF(θ) has fewer entries (160 MB in float64)
TRAJECTORY_NEURONS = 500
_OPTION_TAGS = {"penalty": "pen", "negligible_mads": "mads", "min_share": "share"}


def analysis_name(epoch: int, layers: list[int] | None = None, *, replay: bool = True,
                  predict: bool = True, count_kwargs: dict | None = None) -> str:
    """Folder name of an analysis: the epoch, then each option that differs from the default.

    E.g. ``epoch120``, ``epoch120-share0.1-pen2-layers1,2-noreplay`` (layers 1-based).
    """
    from ._counting import MIN_SHARE, NEGLIGIBLE_MADS, PENALTY

    defaults = {"penalty": PENALTY, "negligible_mads": NEGLIGIBLE_MADS, "min_share": MIN_SHARE}
    parts = [f"epoch{epoch}"]
    for key, value in sorted((count_kwargs or {}).items()):
        if key not in defaults:
            raise ValueError(f"unknown counting option '{key}': use {', '.join(defaults)}")
        if float(value) != defaults[key]:
            parts.append(f"{_OPTION_TAGS[key]}{float(value):g}")
    if layers is not None:
        parts.append("layers" + ",".join(str(k + 1) for k in sorted(set(layers))))
    if not predict:
        parts.append("nopredict")
    elif not replay:
        parts.append("noreplay")
    return "-".join(parts)


@dataclass
class RunAnalysis:
    """Everything ``condlab analyze`` measures for one run at one epoch."""

    run: str
    epoch: int
    optimizer: str
    layers: list[LayerReport]
    polyfits: list[PolyFit] = field(default_factory=list)   # 1-D input only (Fig. 5)
    stable_lines: np.ndarray | None = None                    # 1-D input only (Fig. 6)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    status: str = "complete"                                  # the run's status (meta.json)
    divergence: str | None = None                             # why the run counts as diverged
    model_rank: dict | None = None                            # rank DF(θ) on the training inputs
    options: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The folder name keyed by the options (``analysis_name``)."""
        o = self.options
        return analysis_name(self.epoch, o.get("layers"), replay=o.get("replay", True),
                             predict=o.get("predict", True), count_kwargs=o.get("count_kwargs"))

    def to_dict(self) -> dict:
        return {
            "run": self.run, "epoch": self.epoch, "optimizer": self.optimizer,
            "status": self.status, "diverged": self.divergence is not None, "divergence": self.divergence,
            "options": self.options, "notes": self.notes,
            "layers": [r.to_dict() for r in self.layers],
            "polyfits": [{"degree": f.degree, "r2": f.r2, "coefficients": f.coefficients.tolist()}
                         for f in self.polyfits],
            "stable_lines": None if self.stable_lines is None else self.stable_lines.tolist(),
            "model_rank": self.model_rank,
        }

    def write(self, out: str | Path, settings: dict | None = None) -> Path:
        """Write analysis.json (with provenance, and the `settings` it was made with: what
        ``condlab analyze`` compares before writing into a folder again) and analysis.npz into
        `out`; returns the JSON path."""
        out = Path(out)
        atomic_write_npz(out / "analysis.npz", self.arrays, compress=False)
        extra = {} if settings is None else {"settings": settings}
        atomic_write_json(out / "analysis.json", {**self.to_dict(), **extra, "provenance": provenance()})
        return out / "analysis.json"


def analyze_run(run: Run, epoch: int | None = None, layers: list[int] | None = None, *,
                replay: bool = True, predict: bool = True, count_kwargs: dict | None = None) -> RunAnalysis:
    """Analyse hidden layers (0-based; default all) of `run` at `epoch` (default: default_epoch)."""
    from ._external import analyze_external, is_external

    if is_external(run):  # a Tracker record of someone else's model: measure only
        epoch, reports, arrays = analyze_external(run, epoch, layers, count_kwargs)
        result = RunAnalysis(str(run.path) if run.path else "", epoch, "unknown", reports)
        result.arrays.update(arrays)
        return result
    epoch = default_epoch(run) if epoch is None else int(epoch)
    run.index(epoch)  # a clear error when the epoch was not recorded
    depth = run.config.model.depth
    chosen = list(range(depth)) if layers is None else layers
    bad = [k for k in chosen if not 0 <= k < depth]
    if bad:
        raise ValueError(f"layer {bad[0] + 1} does not exist: this run has layers 1..{depth}")
    histories = run_history(run, epoch) if predict else [None] * depth
    reports = [analyze_layer(run, k, epoch, replay=replay, predict=predict, count_kwargs=count_kwargs,
                             history=histories[k]) for k in chosen]
    options = {"layers": layers, "replay": replay, "predict": predict,
               "count_kwargs": dict(count_kwargs or {})}
    result = RunAnalysis(str(run.path) if run.path else "", epoch, run.config.train.optimizer, reports,
                         status=run.status, divergence=divergence(run), options=options)
    for report in reports:
        result.arrays[f"order_{report.layer}"] = cosine_order(run.layer(report.layer, epoch),
                                                              report.orientations)
        result.arrays[f"rows_{report.layer}"] = run.rows(report.layer, epoch)
    if run.config.data.d == 1:
        _one_dimensional(run, epoch, result, histories[0])
    _add_model_rank(run, epoch, result)
    return result


DIVERGED_GROWTH = 100.0  # a finite loss this many times its initial value counts as diverged


def divergence(run: Run) -> str | None:
    """Why `run` diverged (a non-finite loss, or a loss grown DIVERGED_GROWTH-fold), else None."""
    if run.status == "diverged":
        return (f"this run diverged: its loss was not finite at epoch {run.diverged_epoch}; "
                "only the snapshots before it are analysed")
    loss = np.asarray(run.loss, dtype=float)
    finite = loss[np.isfinite(loss)]
    if finite.size and loss[0] > 0 and finite.max() > DIVERGED_GROWTH * loss[0]:
        worst = int(np.nanargmax(np.where(np.isfinite(loss), loss, np.nan)))
        return (f"this run diverged: its loss grew to {loss[worst]:.3g} at epoch {worst}, "
                f"{loss[worst] / loss[0]:.3g} times its initial {loss[0]:.3g}")
    return None


def _add_model_rank(run: Run, epoch: int, result: RunAnalysis) -> None:
    """Model rank on (at most RANK_INPUTS of) the training inputs, skipped when J would be huge."""
    if not run.is_full(epoch):
        result.model_rank = {"skipped": f"epoch {epoch} is a thinned snapshot (train.snapshot_neurons)"}
        return
    x = run.x[:RANK_INPUTS]
    n_params = sum(r * c for r, c in run.architecture.shapes)
    rows = len(x) * run.config.model.d_out
    # jacrev also holds one (n, m) activation per output row: rows x n x m values
    work = rows * len(x) * run.config.model.width
    if max(rows * n_params, work) > RANK_MAX_ENTRIES:
        result.model_rank = {"skipped": f"Jacobian of {rows} x {n_params} entries (computed through "
                                        f"{work:.2g} activations) is above {RANK_MAX_ENTRIES:.0e}; "
                                        "call condlab.analysis.model_rank on fewer inputs"}
        return
    rank = model_rank(run, x, epoch=epoch)
    result.model_rank = {k: v for k, v in rank.to_dict().items() if k != "singular_values"}
    result.model_rank["inputs"] = len(x)
    result.arrays["singular_values"] = rank.singular_values


def _one_dimensional(run: Run, epoch: int, result: RunAnalysis, history=None) -> None:
    """Figs. 5-6 for a 1-D input: polynomial fits, direction field, orientation trajectories."""
    _trajectories(run, result)
    if not run.is_full(epoch):
        full = ", ".join(str(int(e)) for e in run.full_epochs)
        result.notes.append(f"epoch {epoch} is a thinned snapshot: the output fit and the direction "
                            f"field need the whole network, recorded at epochs {full}")
        return
    act = run.architecture.activations[0]
    cfg = run.config.data
    grid = np.linspace(cfg.low, cfg.high, TEST_POINTS)
    out = forward_blocks(run.network(epoch), torch.as_tensor(grid[:, None]))[1].sum(1).numpy()
    top = (act.multiplicity or 2) + 1
    result.polyfits = polynomial_fits(grid, out, top)
    result.arrays.update(test_x=grid, test_y=out)
    history = history if history is not None else layer_history(run, 0, epoch)
    X = history.inputs[-1]
    e = effective_residual(X, history.residuals[-1])  # (n,): the field of the growing output
    W = run.layer("layer1", epoch)
    lim = 1.2 * float(np.abs(W).max()) or 1.0
    gw, gb, dw, db = direction_field(X, e, act.grad, lim=lim, size=21)
    if act.multiplicity is not None:
        # both signs of the output weight: Fig. 6 counts lines attracting either sign
        result.stable_lines = stable_lines_2d(X, e, act.grad, radius=1e-3 * lim, output_sign=None)
    result.arrays.update(field_w=gw, field_b=gb, field_dw=dw, field_db=db, weights=W,
                         velocities=velocities(W, X, e, act.grad))


def _trajectories(run: Run, result: RunAnalysis) -> None:
    """Orientation and amplitude of up to TRAJECTORY_NEURONS first-layer neurons at every snapshot."""
    held = run.neurons  # thinned records hold these rows at every snapshot
    count = len(held) if held is not None else run.config.model.width
    pick = np.unique(np.linspace(0, count - 1, min(count, TRAJECTORY_NEURONS)).round().astype(np.int64))
    # fancy indexing of a memory-mapped record reads only these rows of each snapshot
    theta, amplitude = orientation_trajectories(run.weights["layer1"][:, pick])
    neurons = pick if held is None else held[pick]
    result.arrays.update(traj_epochs=run.epochs, traj_theta=theta, traj_amplitude=amplitude,
                         traj_neurons=neurons)
