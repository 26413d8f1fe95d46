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
for the band. The count runs with one BLAS thread: numpy's BLAS threads otherwise keep spinning
after the count's many small products and take the cores from the training (on a small MLP that
made a measurement 15-30x slower and the whole loop 2x slower). benchmarks/bench_tracker.py
measures the overhead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ._inspect import TOP_SHARES, _pandas, count_layers, layer_row, one_blas_thread
from ._layers import extract_layers
from ._tracker_record import TrackerRecord, claim

TRACKER_BAND = False


class Tracker:
    """Per-layer condensation metrics (and optional weight snapshots) every `every` steps."""

    def __init__(self, model: nn.Module, every: int = 50, layers: str | list[str] | None = None,
                 out: str | Path | None = None, snapshots: bool = False, heads: int | None = None,
                 count_kwargs: dict[str, Any] | None = None, tensorboard: Any = None,
                 on_measure: Callable[[int, list[dict[str, Any]]], None] | None = None,
                 start_step: int = 0) -> None:
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
        self.rows: list[dict[str, Any]] = []
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
        self._measure(None)

    def _meta(self) -> dict[str, Any]:
        from ..records import provenance

        return {"architecture": "external", "model_class": type(self.model).__qualname__,
                "recorder": "condlab.Tracker", "every": self.every, "first_step": self.start,
                "count_kwargs": {k: list(v) if isinstance(v, tuple) else v
                                 for k, v in self.count_kwargs.items()},
                "loss_convention": "loss.npy entry i: the loss passed to step call first_step + i + 1 "
                                   "(computed on the weights of step first_step + i)",
                "provenance": provenance()}

    def _count(self, epoch: Any) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
        found = extract_layers(self.model, layers=self.layers, heads=self.heads)
        self.skipped = [{"layer": s.name, "reason": s.reason} for s in found.skipped]
        band = bool(self.count_kwargs.get("band"))
        rows, snaps = [], {}
        with one_blas_thread():
            finite = [bool(torch.isfinite(lay.weight).all()) for lay in found.layers]
            counted = iter(count_layers([lay for lay, ok in zip(found.layers, finite, strict=True) if ok],
                                        self.count_kwargs))
            for lay, ok in zip(found.layers, finite, strict=True):
                if not ok:  # diverged: recorded, the user's loop goes on
                    o = None
                    row = {"step": self.t, "epoch": epoch, **_nonfinite_row(lay.name, lay.kind, lay.shape)}
                    self.nonfinite.append((self.t, lay.name))
                else:
                    o = next(counted)
                    row = {"step": self.t, "epoch": epoch,
                           **layer_row(lay.name, lay.kind, o, lay.shape, lay.note)}
                if not band:
                    row["stable"] = None  # one count: stability was not measured
                rows.append(row)
                if lay.head is None and (self.snapshots or self.writer is not None):
                    snaps[lay.name] = (lay.weight.detach().float().cpu().numpy(), o)
        if self.writer is not None:
            from ._tensorboard import write_heatmap, write_scalars

            write_scalars(self.writer, rows, self.t)
            for name, (W, o) in snaps.items():
                if o is not None:  # no heat map of non-finite weights
                    write_heatmap(self.writer, name, W, o, self.t)
            self.writer.flush()  # a killed run keeps its events too
        return rows, {name: W for name, (W, _) in snaps.items()} if self.snapshots else {}

    def _measure(self, epoch: Any) -> None:
        rows, snaps = self._count(epoch)
        self.step_epochs[self.t] = epoch
        losses = self._take_losses()
        self.rows += rows
        self.last_rows = rows
        self._measured = self.t
        if self.record is not None:
            self.record.meta.update(steps=self.t, last_epoch=max(self.t - self.start - 1, 0),
                                    layers=sorted({r["layer"] for r in self.rows}), skipped=self.skipped,
                                    nonfinite=[list(x) for x in self.nonfinite],
                                    step_epochs={str(k): v for k, v in self.step_epochs.items()})
            self.record.add(self.t, rows, snaps, losses)
        if self.on_measure is not None:
            self.on_measure(self.t, rows)

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
            return False
        self._measure(epoch)
        return True

    @property
    def history(self):
        """The measured metrics as a pandas DataFrame: step, epoch, then condlab.inspect's columns."""
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
