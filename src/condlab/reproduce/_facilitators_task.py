"""The sweep task of ``reproduce facilitators``: condlab.train, measured at each run's initial-stage end.

A sweep's runs train for a fixed number of epochs and record snapshots on a fixed grid, but the
facilitators measure condensation at the end of each run's initial stage (the first epoch whose
loss is <= 70 % of the initial one, Sec. 3 of the NeurIPS 2022 paper), which differs per run.
So a batch is trained twice with ``condlab.train``, as one batched computation each time: once
with snapshots at epoch 0 and the last epoch only, which gives every run's loss and so its stage
end; then again with the spec's snapshot grid plus those epochs. Both passes compute the same
trajectories (same config, runs, data, dropout masks; float64), so the second pass records each
run's exact stage-end snapshot, as the stand-alone trainer this replaces did, and the run
records on disk hold it. Training costs two passes; memory and disk hold the grid only.

The engine (``condlab.sweeps._run``) calls ``train_part`` and ``write_part`` for a spec with
``task: condlab.reproduce._facilitators_task``, locally or in a Ray task, so the facilitators'
sweeps resume after a kill and run with ``--executor ray`` as any sweep does. Each run's table
row is the engine's (``summarize``) plus, at the stage end and at the last epoch:

    stage_epoch, end_epoch     the epochs measured (stage_epoch: the last epoch when the run
                               never leaves the initial stage)
    share_stage, share_end     ``largest_line_share`` of the hidden layer's input weights (w, b)
    lines_stage, lines_end     ``count_orientations(w, band=False).n_lines``, computed by
                               ``count_lines`` (the same integer, cheaper)

A measure is empty where the run diverged at or before that epoch.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..sweeps import Batch, BatchDone, summarize

TASK = "condlab.reproduce._facilitators_task"


def largest_line_share(weights: np.ndarray, cos: float = 0.95, amplitude_ratio: float = 0.1) -> float:
    """Share of the non-negligible neurons (amplitude >= 10 % of the largest) whose line lies within
    |cos| >= 0.95 (18 degrees) of the most crowded neuron's line; weights (m, k).

    The talk's "share of neurons on the p largest lines" for tanh (p = 1); a neuron silenced by
    weight decay is neither condensed nor not, so it is left out.
    """
    amp = np.linalg.norm(weights, axis=1)
    alive = (amp > 0) & (amp >= amplitude_ratio * amp.max())
    if not alive.any():
        return 0.0
    u = weights[alive] / amp[alive, None]
    return float((np.abs(u @ u.T) >= cos).sum(axis=1).max() / alive.sum())


class _Half:
    """Two passes per batch: forward half of each epoch to the sweep's progress bar."""

    def __init__(self, progress: Any):
        self.progress = progress

    def update(self, n: int = 1) -> None:
        self.progress.update(n / 2)


def train_part(batch: Batch, progress: Any = None):
    """Train the batch's runs twice (see the module docstring) -> the second pass's RunResult."""
    from ..records import RunSpec
    from ..training import Config, snapshot_epochs, train

    cfg = Config.from_dict(batch.config)
    specs = [RunSpec(**fields) for _, fields in batch.runs]
    last = cfg.train.epochs
    bar = _Half(progress) if hasattr(progress, "update") else False
    probe = train(cfg.with_overrides([f"train.snapshots=[0,{last}]"]), runs=specs, progress=bar)
    if any(run.status == "interrupted" for run in probe.runs):
        return probe
    stage_ends = {run.initial_stage_epoch for run in probe.runs if run.initial_stage_epoch is not None}
    epochs = sorted(set(snapshot_epochs(cfg.train.snapshots, last)) | stage_ends)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # said once, by the first pass
        result = train(cfg.with_overrides([f"train.snapshots={epochs}"]), runs=specs, progress=bar)
    result.seconds += probe.seconds
    return result


def measure(run) -> dict[str, Any]:
    """The facilitators' columns of one run (see the module docstring)."""
    from ..analysis import count_lines

    last = int(run.meta.get("last_epoch", len(run.loss) - 1))
    stage = run.initial_stage_epoch if run.initial_stage_epoch is not None else last
    row: dict[str, Any] = {"stage_epoch": stage, "end_epoch": last}
    for name, epoch in (("stage", stage), ("end", last)):
        ok = epoch in set(run.epochs.tolist()) and (run.diverged_epoch is None or epoch < run.diverged_epoch)
        w = run.layer("layer1", epoch) if ok else None
        ok = ok and bool(np.isfinite(w).all())
        row[f"share_{name}"] = largest_line_share(w) if ok else None
        row[f"lines_{name}"] = count_lines(w) if ok else None
    return row


def write_part(batch: Batch, result, runs_dir: str) -> BatchDone:
    """Measure and write each run of a trained batch to runs_dir/<hash>; nothing if interrupted."""
    from ..records import write_run

    if any(run.status == "interrupted" for run in result.runs):
        return BatchDone(batch.key, {}, result.seconds, interrupted=True)
    rows: dict[str, dict[str, Any]] = {}
    for (h, _), run in zip(batch.runs, result.runs, strict=True):
        row = {**summarize(run), **measure(run)}
        run.meta["sweep"] = {"hash": h, "batch": batch.key, "summary": row}
        write_run(run, Path(runs_dir) / h)
        rows[h] = {"status": run.status, **row}
    return BatchDone(batch.key, rows, result.seconds)
