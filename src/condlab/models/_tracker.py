"""``condlab.Tracker``: watch condensation inside a user's own training loop.

    tracker = condlab.Tracker(model, every=50, out="runs/mine", snapshots=True)
    for epoch in range(E):
        for x, y in loader:
            loss = loss_fn(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
            tracker.step(epoch, loss)
    tracker.close()                      # or `with condlab.Tracker(...) as tracker:`

Steps. The tracker counts calls of ``step``: step t means "after t optimizer updates"; the
weights at t = 0 (or at `start_step`, for a run that continues) are measured when the tracker
is made. Every `every` calls it measures every layer the adapter finds (``condlab.models._layers``;
filter with `layers` globs) with ``count_orientations`` and, with ``snapshots=True``, keeps a
float32 copy of each whole matrix. The loss given to call t is what a usual loop computes before
its update, i.e. on the weights of step t - 1: it is stored as loss.npy entry t - 1 - start_step.
A loss tensor is kept as it is (no ``.item()``, which would wait for the GPU at every step) and
read at the next measurement.

Run record (``condlab.models._tracker_record``): written while training runs, so that a crash or a
kill leaves a record marked interrupted that ``condlab analyze`` reads; ``close`` marks it
complete. Its folder must be new (or empty); a relative `out` is taken relative to the working
folder at the start. ``condlab analyze`` counts the snapshot layers; theory predictions need
condlab's FC architecture and are not made.

Outputs besides the record: ``history`` (a DataFrame: step, epoch, then ``condlab.inspect``'s
columns), ``tensorboard=`` (a folder or a SummaryWriter: ``condlab.models._tensorboard``'s scalars and
heat maps), and ``on_measure`` (called with (step, rows) after each measurement; the Lightning
callback logs through it).

Cost. By default the tracker counts once (``band=False``): the sensitivity band fits the
layer five times, and ``stable`` is then reported as missing. Pass ``count_kwargs={"band": True}``
for the band. With ``background=True`` (the default) the count runs in a worker process
(``_count_worker``): a measurement copies the weights and sends them, and the loop goes on while
they are counted; their rows reach ``history``, the record, TensorBoard and ``on_measure`` when
the count comes back (at a later ``step``, or at ``history``/``close``, which wait for it). At
most MAX_PENDING measurements wait: a loop that measures faster than the worker counts waits
for it. ``last_rows`` is the latest measurement counted so far. ``background=False`` counts in
the loop's own process (also what happens, with one warning, if the worker cannot start or
dies). The count runs with one BLAS thread: numpy's BLAS threads otherwise keep spinning after
the count's many small products and take the cores from the training (on a small MLP that made
a measurement 15-30x slower and the whole loop 2x slower). A model with a layer whose arc search
may take the Lanczos solver (``analysis.may_use_lanczos``) has it imported when the tracker
starts, not at a count in the loop. benchmarks/bench_tracker.py measures the overhead.
"""

from __future__ import annotations

import warnings
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..analysis import may_use_lanczos, preload_lanczos
from ._counts import count_weights, one_blas_thread
from ._inspect import TOP_SHARES, _pandas, layer_row
from ._layers import extract_layers
from ._tracker_record import TrackerRecord, claim

TRACKER_BAND = False
MAX_PENDING = 2  # measurements sent to the worker and not yet back, at most (then `step` waits)


@dataclass
class _Job:
    """One measurement until its count is back: the layers found (name, kind, shape, note,
    finite), the matrices to count, the snapshots and the losses since the last measurement."""

    t: int
    epoch: Any
    layers: list[tuple[str, str, tuple[int, int], str, bool]]
    weights: list[Any]
    snaps: dict[str, np.ndarray] = field(default_factory=dict)
    losses: list[float] = field(default_factory=list)


def _finite(W: torch.Tensor) -> bool:
    """Whether every entry of W is finite: its sum is, unless an entry is NaN or inf (or the sum
    overflowed, when the entries are checked): one reduction instead of a mask of W's size."""
    return bool(torch.isfinite(W.sum())) or bool(torch.isfinite(W).all())


class Tracker:
    """Per-layer condensation metrics (and optional weight snapshots) every `every` steps."""

    def __init__(self, model: nn.Module, every: int = 50, layers: str | list[str] | None = None,
                 out: str | Path | None = None, snapshots: bool = False, heads: int | None = None,
                 count_kwargs: dict[str, Any] | None = None, tensorboard: Any = None,
                 on_measure: Callable[[int, list[dict[str, Any]]], None] | None = None,
                 start_step: int = 0, background: bool = True) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every={every!r} is not accepted: give a positive number of steps")
        if not isinstance(model, nn.Module):
            raise ValueError(f"Tracker needs an nn.Module, got {type(model).__name__}")
        self.model, self.every, self.layers, self.heads = model, every, layers, heads
        self.snapshots, self.on_measure = snapshots, on_measure
        self.count_kwargs = {"band": TRACKER_BAND, **(count_kwargs or {})}
        self.start = self.t = int(start_step)
        self.losses: list[float] = []
        self._pending: list[Any] = []  # losses (floats or tensors) since the last measurement
        self._rows: list[dict[str, Any]] = []
        self.last_rows: list[dict[str, Any]] = []
        self.step_epochs: dict[int, Any] = {}
        self.skipped: list[dict[str, str]] = []
        self.nonfinite: list[tuple[int, str]] = []  # (step, layer) measured with NaN or inf weights
        self.closed = False
        self.last_epoch: Any = None
        self._measured: int | None = None
        self.writer, self._owns_writer = (None, False)
        if tensorboard is not None:
            from ._tensorboard import open_writer

            self.writer, self._owns_writer = open_writer(tensorboard)
        self.out = None if out is None else claim(out)
        self.record = None if self.out is None else TrackerRecord(
            self.out, type(model).__qualname__, self._meta())
        self._jobs: deque[_Job] = deque()
        self._worker = None
        first = self._job(None, send=background)  # what the first measurement counts
        # a layer whose arc search may take the Lanczos path: its solver is imported now, not at
        # the first count in the loop (0.2 s there held a 1000-step MLP loop: +32 % instead of +5 %)
        preload = any(may_use_lanczos(*shape) for _, _, shape, _, _ in first.layers)
        if background:
            from ._count_worker import CountWorker

            try:
                self._worker = CountWorker(preload=preload)
                weakref.finalize(self, self._worker.close)
            except OSError as err:  # no process could be started: the count runs here
                warnings.warn(f"condlab.Tracker: the count worker did not start ({err}); counting in "
                              "the training process", RuntimeWarning, stacklevel=2)
        if preload and self._worker is None:  # the count runs here: import now, not in the loop
            preload_lanczos()
        self._measure(None, first)

    def _meta(self) -> dict[str, Any]:
        from ..records import provenance

        return {"architecture": "external", "model_class": type(self.model).__qualname__,
                "recorder": "condlab.Tracker", "every": self.every, "first_step": self.start,
                "count_kwargs": {k: list(v) if isinstance(v, tuple) else v
                                 for k, v in self.count_kwargs.items()},
                "loss_convention": "loss.npy entry i: the loss passed to step call first_step + i + 1 "
                                   "(computed on the weights of step first_step + i)",
                "provenance": provenance()}

    def _job(self, epoch: Any, send: bool | None = None) -> _Job:
        """The layers of the model now: what a measurement counts, snapshots and (with `send`,
        by default whether a worker runs) sends to the worker, as numpy copies."""
        found = extract_layers(self.model, layers=self.layers, heads=self.heads)
        self.skipped = [{"layer": s.name, "reason": s.reason} for s in found.skipped]
        job = _Job(self.t, epoch, [], [])
        send = self._worker is not None if send is None else send
        for lay in found.layers:
            W = lay.weight.detach()
            ok = _finite(W)
            job.layers.append((lay.name, lay.kind, lay.shape, lay.note, ok))
            # a copy in the weights' own precision (float32 but for float64 weights): the worker
            # counts in float64 from it, the same numbers, with half the bytes to pickle here
            keep = torch.float64 if W.dtype == torch.float64 else torch.float32
            sent = W.to("cpu", keep, copy=True).numpy() if send and ok else None
            if ok:  # non-finite weights are recorded, not counted: the user's loop goes on
                job.weights.append(sent if send else W)
            if lay.head is None and (self.snapshots or self.writer is not None):
                # from the copy already on the CPU, if there is one: one device transfer a layer
                job.snaps[lay.name] = (sent.astype(np.float32, copy=False) if sent is not None
                                       else W.float().cpu().numpy())
        return job

    def _measure(self, epoch: Any, job: _Job | None = None) -> None:
        job = self._job(epoch) if job is None else job
        self.step_epochs[self.t] = epoch
        job.losses = self._take_losses()
        self._measured = self.t
        if self.record is not None:  # weights and losses on disk now: a kill loses at most the rows
            meta = self.record.meta
            meta.update(steps=job.t, last_epoch=max(job.t - self.start - 1, 0), skipped=self.skipped,
                        layers=sorted(set(meta.get("layers", [])) | {lay[0] for lay in job.layers}),
                        step_epochs={str(k): v for k, v in self.step_epochs.items()})
            self.record.add(job.t, [], job.snaps if self.snapshots else {}, job.losses)
        self._jobs.append(job)
        if self._worker is not None and not self._worker.submit(job.t, job.weights, self.count_kwargs):
            self._fall_back()
        self._collect()  # without a worker: counts every waiting measurement here, in order

    def _collect(self, wait: bool = False) -> None:
        """Finish the measurements whose counts came back; wait for all of them with `wait`,
        or for the oldest ones while more than MAX_PENDING are out."""
        while self._jobs:
            if self._worker is None:
                job = self._jobs.popleft()
                with one_blas_thread():
                    self._finish(job, count_weights(job.weights, self.count_kwargs))
                continue
            block = wait or len(self._jobs) > MAX_PENDING
            item = self._worker.wait() if block else self._worker.poll()
            if item is None:
                if self._worker.failed is None:
                    return  # nothing back yet
                self._fall_back()
                continue
            job = self._jobs.popleft()
            outcomes = item[1]
            if outcomes is None:  # the worker could not count it: counted here (the error again)
                with one_blas_thread():
                    outcomes = count_weights(job.weights, self.count_kwargs)
            self._finish(job, outcomes)

    def _fall_back(self) -> None:
        """Count in this process from now on (the worker failed or was never started)."""
        if self._worker is not None:
            warnings.warn(f"condlab.Tracker: {self._worker.failed}; counting in the training process "
                          "from now on", RuntimeWarning, stacklevel=3)
            self._worker.close()
            self._worker = None

    def _finish(self, job: _Job, outcomes: list) -> None:
        """A counted measurement: its rows to history, the record, TensorBoard and on_measure."""
        band = bool(self.count_kwargs.get("band"))
        rows, counted, orient = [], iter(outcomes), {}
        for name, kind, shape, note, ok in job.layers:
            if ok:
                o = orient[name] = next(counted)
                row = {"step": job.t, "epoch": job.epoch, **layer_row(name, kind, o, shape, note)}
            else:
                self.nonfinite.append((job.t, name))
                row = {"step": job.t, "epoch": job.epoch, **_nonfinite_row(name, kind, shape)}
            if not band:
                row["stable"] = None  # one count: stability was not measured
            rows.append(row)
        self._rows += rows
        self.last_rows = rows
        if self.writer is not None:
            from ._tensorboard import write_heatmap, write_scalars

            write_scalars(self.writer, rows, job.t)
            for name, W in job.snaps.items():
                if name in orient:  # no heat map of non-finite weights
                    write_heatmap(self.writer, name, W, orient[name], job.t)
            self.writer.flush()  # a killed run keeps its events too
        if self.record is not None:  # the rows; the snapshots and losses went in at `_measure`
            self.record.meta["nonfinite"] = [list(x) for x in self.nonfinite]
            self.record.add(job.t, rows, {}, [])
        if self.on_measure is not None:
            self.on_measure(job.t, rows)

    def _take_losses(self) -> list[float]:
        """The pending losses as floats: one device transfer for all tensors among them."""
        pending, self._pending = self._pending, []
        tensors = [v for v in pending if isinstance(v, torch.Tensor)]
        if tensors:
            values = iter(torch.stack([v.detach().reshape(()).float() for v in tensors]).cpu().tolist())
            pending = [next(values) if isinstance(v, torch.Tensor) else v for v in pending]
        self.losses += pending
        return pending

    def step(self, epoch: Any, loss: Any) -> bool:
        """Count one optimizer update; measure when the count is a multiple of `every`.

        Returns True when this call measured. `loss` is a float or a 0-d tensor. Weights that
        turned NaN or inf are not counted: their rows say so (``note``, counts empty) and
        ``nonfinite`` lists (step, layer); the caller's loop decides whether to stop.
        """
        if self.closed:
            raise ValueError("this Tracker was closed: make a new one to keep tracking")
        self._pending.append(loss if isinstance(loss, torch.Tensor) else float(loss))
        self.last_epoch = epoch
        self.t += 1
        if (self.t - self.start) % self.every:
            if self._jobs:
                self._collect()
            return False
        self._measure(epoch)
        return True

    @property
    def rows(self) -> list[dict[str, Any]]:
        """Every measured row so far (waits for counts still in the worker)."""
        self._collect(wait=True)
        return self._rows

    @property
    def history(self):
        """The measured metrics as a pandas DataFrame: step, epoch, then condlab.inspect's columns
        (waits for counts still in the worker)."""
        return _pandas().DataFrame(self.rows)

    def close(self, status: str = "complete") -> Path | None:
        """Measure the last step if it was not, and mark the run record `status` (put on disk).

        If this fails, what was recorded stays on disk as an interrupted record and in
        ``history``; ``close`` may be called again.
        """
        if self.closed:
            return self.out
        if self._measured != self.t:
            self._measure(self.last_epoch)
        self._collect(wait=True)
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        self._take_losses()
        if self.record is not None:
            self.record.finish(status, self.history)
        if self.writer is not None:
            self.writer.close() if self._owns_writer else self.writer.flush()
        self.closed = True
        return self.out

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close("complete" if exc_type is None else "interrupted")


def _nonfinite_row(name: str, kind: str, shape: tuple[int, int]) -> dict[str, Any]:
    """A table row (layer_row's columns) for a layer whose weights are not finite: not counted."""
    return {"layer": name, "kind": kind, "rows": shape[0], "cols": shape[1], "lines": None,
            "directions": None, **{f"share_{i + 1}": None for i in range(TOP_SHARES)},
            "condensed_share": None, "effective_neurons": None, "effective_fraction": None,
            "stable": None, "set_aside": None, "scattered": None,
            "note": "non-finite weights (NaN or inf): not counted; the training diverged"}
