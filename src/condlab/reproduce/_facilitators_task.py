"""The sweep task of ``reproduce facilitators``: condlab.train, then condlab's counter at equal fit.

The engine (``condlab.sweeps._run``) calls ``train_part`` and ``write_part`` for a spec with
``task: condlab.reproduce._facilitators_task``, locally or in a Ray task, so the facilitators'
sweeps resume after a kill and run with ``--executor ray`` as any sweep does. Each batch is
trained once with ``condlab.train``; each run's table row is the engine's (``summarize``: the
final loss among others) plus, at the run's **fit snapshot** -- the first snapshot after
initialization whose loss (eq. 3, recorded without dropout) is <= FIT_LOSS (``fit_index``) --
on the hidden layer's input weights (w, b):

    fit_epoch       the epoch of the fit snapshot; None when the run never reached FIT_LOSS
                    (within the budget, or before it diverged)
    fit_loss        the loss at that snapshot (<= FIT_LOSS; lower by what one snapshot
                    interval trains past the crossing)
    active          alive neurons: amplitude ||(w, b)|| >= 1e-3 x the largest (weight decay
                    silences the others; ``counted``)
    lines, arcs     ``count_orientations`` of the active neurons' rows: condensed lines, arcs
                    (default thresholds and band)
    top_share       members of the counter's largest line / active neurons (0 without a line):
                    the condensation the claims judge
    ad_hoc_share    ``largest_line_share`` (|cos| >= 0.95 of the most crowded neuron), the measure
                    of earlier generations, reported beside it, not judged

and, reported beside them but never judged: ``best_loss`` (the lowest finite loss of any
epoch), ``diverged_epoch`` (the first non-finite loss, or None), and ``end_active`` /
``end_top_share`` at the last epoch of a run that completed its budget. Every fit measure is
empty where the run has no fit snapshot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..sweeps import Batch, BatchDone, summarize

TASK = "condlab.reproduce._facilitators_task"


def largest_line_share(weights: np.ndarray, cos: float = 0.95, amplitude_ratio: float = 0.1) -> float:
    """Share of the non-negligible neurons (amplitude >= 10 % of the largest) whose line lies within
    |cos| >= 0.95 (18 degrees) of the most crowded neuron's line; weights (m, k)."""
    amp = np.linalg.norm(weights, axis=1)
    alive = (amp > 0) & (amp >= amplitude_ratio * amp.max())
    if not alive.any():
        return 0.0
    u = weights[alive] / amp[alive, None]
    return float((np.abs(u @ u.T) >= cos).sum(axis=1).max() / alive.sum())


ALIVE_RATIO = 1e-3  # a neuron below a thousandth of the largest amplitude is silenced (weight decay)
# The stated loss at which every run is judged (pre-registered with the claims; the constants block of
# _facilitators.py imports it from here because the task, which may run on a Ray node, measures there).
FIT_LOSS = 1e-2


def counted(weights: np.ndarray) -> dict[str, Any]:
    """active, lines, arcs and top_share of one layer's input weights (m, k) by condlab's counter.

    Silenced neurons (amplitude < ALIVE_RATIO x the largest) are left out before counting, as the
    two-layer paper discards tiny neurons: the counter's own negligible rule compares amplitudes
    with their median, so in a layer weight decay has mostly silenced it keeps them all.
    """
    from ..analysis import count_orientations

    amp = np.linalg.norm(weights, axis=1)
    alive = amp >= ALIVE_RATIO * amp.max() if amp.max() > 0 else np.zeros(len(amp), bool)
    active = int(alive.sum())
    if active < 2:
        return {"active": active, "lines": 0, "arcs": 0, "top_share": 0.0}
    o = count_orientations(weights[alive])
    top = max((len(c.members) for c in o.lines), default=0)
    return {"active": active, "lines": int(o.n_lines), "arcs": int(o.n_arcs), "top_share": top / active}


def train_part(batch: Batch, progress: Any = None):
    """Train the batch's runs as one condlab.train call -> its RunResult."""
    from ..records import RunSpec
    from ..training import Config, train
    from ._context import stop_if_signalled

    stop_if_signalled(f"before the facilitators batch {batch.key}")   # a Ctrl-C lost in a finalizer
    specs = [RunSpec(**fields) for _, fields in batch.runs]
    bar = progress if hasattr(progress, "update") else False  # the sweep's bar, or none
    return train(Config.from_dict(batch.config), runs=specs, progress=bar)


def fit_index(epochs: np.ndarray, loss: np.ndarray, fit_loss: float = FIT_LOSS) -> int | None:
    """Position in `epochs` of the first snapshot after initialization whose loss (loss[epoch]) is
    <= fit_loss; None if no snapshot reaches it (NaN losses, after a divergence, never do)."""
    epochs = np.asarray(epochs, dtype=int)
    loss = np.asarray(loss, dtype=float)
    inside = (epochs > 0) & (epochs < len(loss))
    at = np.full(len(epochs), np.inf)
    at[inside] = loss[epochs[inside]]
    hits = np.nonzero(at <= fit_loss)[0]  # NaN <= x is False: a diverged epoch never counts
    return int(hits[0]) if hits.size else None


def measure(run) -> dict[str, Any]:
    """The facilitators' columns of one run (see the module docstring)."""
    loss = np.asarray(run.loss, dtype=float)
    finite = loss[np.isfinite(loss)]
    row: dict[str, Any] = {"fit_epoch": None, "fit_loss": None, "active": None, "lines": None,
                           "arcs": None, "top_share": None, "ad_hoc_share": None,
                           "best_loss": float(finite.min()) if finite.size else None,
                           "diverged_epoch": run.diverged_epoch, "end_active": None, "end_top_share": None}
    i = fit_index(run.epochs, loss, FIT_LOSS)  # the module's value at call time (tests plant one)
    if i is not None:
        epoch = int(run.epochs[i])
        w = run.layer("layer1", epoch)
        if np.isfinite(w).all():
            row.update(counted(w), fit_epoch=epoch, fit_loss=float(loss[epoch]),
                       ad_hoc_share=largest_line_share(w))
    last = int(run.meta.get("last_epoch", len(loss) - 1))
    if run.status == "complete" and last in set(run.epochs.tolist()):
        w = run.layer("layer1", last)  # where the earlier generations measured: reported, not judged
        if np.isfinite(w).all():
            end = counted(w)
            row.update(end_active=end["active"], end_top_share=end["top_share"])
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
