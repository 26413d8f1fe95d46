"""The phase diagrams' sweep task: how the sweep engine trains and writes a batch of phase runs.

The engine (condlab.sweeps._run) calls ``train_part(batch, progress)`` and
``write_part(batch, result, runs_dir)`` for a Batch whose ``task`` names this module, locally or in
a Ray task, so resume and ``--executor ray`` work as for ``condlab sweep``. A batch holds runs of
one depth, one width and one training setting (its config's "task" names the depth: "phase" for
two layers, "phase3" for three); each run differs in its point (gamma, gamma'[, gamma2]), scheme, seed.

A run directory (assembled under a temporary name, renamed when complete):

    runs/<hash>/config.json   the run's settings (what its hash is computed from)
                curve.npz     step, time (sum of step sizes), loss at every step
                neurons.npz   two layers: final a, w, b of (up to 10^4 of) the first copy's neurons;
                              three: w1, w1_0 (m, 2), a (m), w2_out / w2_in (column / row norms of W2)
                meta.json     status, the summary row (under "sweep"), provenance
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from ..records import atomic_write_json, atomic_write_npz, provenance
from ..sweeps import Batch, BatchDone
from ._depth import THREE, TWO, Depth
from ._runs import PhaseBatch

TASK = "condlab.phase._task"


def depth_of(config: dict[str, Any]) -> Depth:
    """The depth a batch's config trains ("task": "phase3" for three layers; two layers otherwise)."""
    return THREE if config.get("task") == THREE.task else TWO


def train_part(batch: Batch, progress: Any = None) -> PhaseBatch:
    """Train a batch's runs to convergence (one batched computation)."""
    depth, m = depth_of(batch.config), int(batch.config["width"])
    fields = [f for _, f in batch.runs]
    return depth.train(m, [depth.run_scales(f, m) for f in fields], [int(f["seed"]) for f in fields],
                       progress=_Capped(progress, batch.epochs), **depth.settings(batch.config))


class _Capped:
    """Forward one progress unit per step, at most `limit` per batch (steps vary per run)."""

    def __init__(self, progress: Any, limit: int):
        self.progress, self.left = progress or None, limit  # False (a Ray task): no bar

    def update(self, n: int = 1) -> None:
        if self.progress is not None and self.left > 0:
            self.progress.update(min(n, self.left))
            self.left -= n


def write_part(batch: Batch, result: PhaseBatch, runs_dir: str) -> BatchDone:
    """Write every run of a trained batch to runs_dir/<hash>; nothing when it was interrupted."""
    if result.interrupted:
        return BatchDone(batch.key, {}, result.seconds, interrupted=True)
    rows: dict[str, dict[str, Any]] = {}
    depth, m = depth_of(batch.config), int(batch.config["width"])
    prov = provenance()  # once: it asks git for the commit
    for (h, fields), run in zip(batch.runs, result.runs, strict=True):
        row = depth.summary(run, depth.run_scales(fields, m))
        _write_run(Path(runs_dir) / h, {**batch.config, **fields}, run,
                   {"status": run.status, "sweep": {"hash": h, "batch": batch.key, "summary": row},
                    **prov})
        rows[h] = {"status": run.status, **row}
    return BatchDone(batch.key, rows, result.seconds)


def _write_run(path: Path, config: dict[str, Any], run, meta: dict[str, Any]) -> None:
    partial = path.with_name(path.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    atomic_write_json(partial / "config.json", config)
    atomic_write_npz(partial / "curve.npz", run.curve)
    atomic_write_npz(partial / "neurons.npz", run.neurons)
    atomic_write_json(partial / "meta.json", meta)  # last: its presence marks the run finished
    if path.exists():
        shutil.rmtree(path)
    os.replace(partial, path)
