"""The three-layer diagram's sweep task: how the sweep engine trains and writes a batch of runs.

Same contract as ``condlab.phase._task`` (``train_part`` / ``write_part``, run directories assembled
under a temporary name), so resume and ``--executor ray`` work unchanged. A batch holds runs of one
width; each run differs in (gamma, gamma', gamma2, scheme, seed).

    runs/<hash>/config.json   the run's settings (its hash is computed from them)
                curve.npz     step, time (sum of step sizes), loss at every step
                neurons.npz   first copy: w1, w1_0 (m, 2), a (m), w2_out / w2_in (column / row norms of W2)
                meta.json     status, the summary row (under "sweep"), provenance
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..records import provenance
from ..sweeps import Batch, BatchDone
from ._task import _Capped, _write_run
from ._three import SCHEMES3, Scales3, scales3
from ._train3 import Phase3Batch, train3_to_convergence

TASK3 = "condlab.phase._task3"
SHARED3 = ("width", "asi", "x", "y", "tol", "max_steps", "c")  # one value per batch
PER_RUN3 = ("gamma", "gamma_prime", "gamma2", "scheme", "seed")


def run_scales3(fields: dict[str, Any], m: int) -> Scales3:
    """A run's scales: the named scheme's at width m (d = 1), else the grid point's."""
    if fields.get("scheme"):
        return SCHEMES3[fields["scheme"]].scales(m, 1)
    return scales3(fields["gamma"], fields["gamma_prime"], m, fields.get("gamma2", 0.0))


def train_part(batch: Batch, progress: Any = None) -> Phase3Batch:
    """Train a batch's runs to convergence (one batched computation)."""
    cfg = batch.config
    m = int(cfg["width"])
    fields = [f for _, f in batch.runs]
    return train3_to_convergence(
        m, [run_scales3(f, m) for f in fields], [int(f["seed"]) for f in fields],
        x=tuple(cfg["x"]), y=tuple(cfg["y"]), asi=bool(cfg["asi"]), tol=float(cfg["tol"]),
        max_steps=int(cfg["max_steps"]), c=float(cfg["c"]), progress=_Capped(progress, batch.epochs))


def summary3(run) -> dict[str, Any]:
    """The table row of one run."""
    return {"rd_w1": run.rd_w1, "rd_w2": run.rd_w2, "rd_a": run.rd_a, "final_loss": run.loss,
            "steps": run.steps, "converged": run.converged, "time": run.time}


def write_part(batch: Batch, result: Phase3Batch, runs_dir: str) -> BatchDone:
    """Write every run of a trained batch to runs_dir/<hash>; nothing when it was interrupted."""
    if result.interrupted:
        return BatchDone(batch.key, {}, result.seconds, interrupted=True)
    rows: dict[str, dict[str, Any]] = {}
    prov = provenance()
    for (h, fields), run in zip(batch.runs, result.runs, strict=True):
        row = summary3(run)
        _write_run(Path(runs_dir) / h, {**batch.config, **fields}, run,
                   {"status": run.status, "sweep": {"hash": h, "batch": batch.key, "summary": row}, **prov})
        rows[h] = {"status": run.status, **row}
    return BatchDone(batch.key, rows, result.seconds)
