"""``condlab.Tracker``: watch condensation inside a user's own training loop.

    tracker = condlab.Tracker(model, every=50, out="runs/mine", snapshots=True)
    for epoch in range(E):
        for x, y in loader:
            loss = loss_fn(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
            tracker.step(epoch, loss.item())
    tracker.close()                      # or `with condlab.Tracker(...) as tracker:`

Steps. The tracker counts calls of ``step``: step t means "after t optimizer updates"; the
weights at t = 0 are measured when the tracker is made. Every `every` calls it measures every
layer the adapter finds (``condlab.models._layers``; filter with `layers` globs) with
``count_orientations`` and, with ``snapshots=True``, keeps a float32 copy of each whole matrix.
The loss given to call t is what a usual loop computes before its update, i.e. on the weights
of step t - 1: it is stored as loss.npy entry t - 1.

Run record (``condlab.records._records``): config.json (condlab's default config, named after the
model class: the model was not built by condlab), meta.json (``"architecture": "external"``,
the model class, layers, skipped modules, the user's epoch at each measured step), loss.npy,
snapshots (steps and the layers' (rows, cols) matrices, bias last) and condensation.csv (one
row per measured step and layer: the columns of ``condlab.inspect`` plus step and epoch).
``condlab analyze`` reads such a run: it counts the snapshot layers; theory predictions need
condlab's FC architecture and are not made.

Cost. By default the tracker counts once (``band=False``): the sensitivity band fits the
layer five times, and ``stable`` is then reported as missing. Pass ``count_kwargs={"band": True}``
for the band.
benchmarks/bench_tracker.py measures the overhead on condlab's ResNet18-like network.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from ..analysis import count_orientations
from ..records import Run, RunSpec, atomic_write_text, write_run
from ..training import Config
from ._inspect import _pandas, layer_row
from ._layers import extract_layers

TRACKER_BAND = False


class Tracker:
    """Per-layer condensation metrics (and optional weight snapshots) every `every` steps."""

    def __init__(self, model: nn.Module, every: int = 50, layers: str | list[str] | None = None,
                 out: str | Path | None = None, snapshots: bool = False, heads: int | None = None,
                 count_kwargs: dict[str, Any] | None = None) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every={every!r} is not accepted: give a positive number of steps")
        if not isinstance(model, nn.Module):
            raise ValueError(f"Tracker needs an nn.Module, got {type(model).__name__}")
        self.out = None if out is None else Path(out)
        if self.out is not None and self.out.exists() and any(self.out.iterdir()):
            raise ValueError(f"'{self.out}' exists and is not empty: choose a new directory for the run")
        self.model, self.every, self.layers, self.heads = model, every, layers, heads
        self.snapshots = snapshots
        self.count_kwargs = {"band": TRACKER_BAND, **(count_kwargs or {})}
        self.t = 0
        self.losses: list[float] = []
        self.rows: list[dict[str, Any]] = []
        self.snap_steps: list[int] = []
        self.snaps: dict[str, list[np.ndarray]] = {}
        self.step_epochs: dict[int, Any] = {}
        self.skipped: list[dict[str, str]] = []
        self.closed = False
        self.last_epoch: Any = None
        self._measure(None)

    def _measure(self, epoch: Any) -> None:
        found = extract_layers(self.model, layers=self.layers, heads=self.heads)
        self.skipped = [{"layer": s.name, "reason": s.reason} for s in found.skipped]
        band = bool(self.count_kwargs.get("band"))
        self.step_epochs[self.t] = epoch
        for lay in found.layers:
            o = count_orientations(lay.weight, **self.count_kwargs)
            row = {"step": self.t, "epoch": epoch, **layer_row(lay.name, lay.kind, o, lay.shape)}
            if not band:
                row["stable"] = None  # one count: stability was not measured
            self.rows.append(row)
            if self.snapshots and lay.head is None:  # heads are slices of the whole matrix
                self.snaps.setdefault(lay.name, []).append(lay.weight.detach().float().cpu().numpy())
        if self.snapshots:
            self.snap_steps.append(self.t)

    def step(self, epoch: Any, loss: float) -> bool:
        """Count one optimizer update; measure when the count is a multiple of `every`.

        Returns True when this call measured. `loss` is a float or a 0-d tensor.
        """
        if self.closed:
            raise ValueError("this Tracker was closed: make a new one to keep tracking")
        value = float(loss.item() if hasattr(loss, "item") else loss)
        self.losses.append(value)
        self.last_epoch = epoch
        self.t += 1
        if self.t % self.every:
            return False
        self._measure(epoch)
        return True

    @property
    def history(self):
        """The measured metrics as a pandas DataFrame: step, epoch, then condlab.inspect's columns."""
        return _pandas().DataFrame(self.rows)

    def close(self, status: str = "complete") -> Path | None:
        """Write the run record (when `out` was given); measure the last step if it was not."""
        if self.closed:
            return self.out
        if self.t % self.every:
            self._measure(self.last_epoch)
        self.closed = True
        if self.out is None:
            return None
        return self._write(status)

    def _write(self, status: str) -> Path:
        losses = np.asarray(self.losses, dtype=np.float64)
        meta = {"architecture": "external", "model_class": type(self.model).__qualname__,
                "recorder": "condlab.Tracker", "every": self.every, "steps": self.t,
                "layers": sorted({r["layer"] for r in self.rows}), "skipped": self.skipped,
                "step_epochs": {str(k): v for k, v in self.step_epochs.items()},
                "count_kwargs": {k: list(v) if isinstance(v, tuple) else v
                                 for k, v in self.count_kwargs.items()},
                "last_epoch": max(len(losses) - 1, 0),
                "loss_convention": "loss.npy entry t: the loss passed to step call t + 1 (weights of step t)"}
        weights = {name: np.stack(ws) for name, ws in self.snaps.items()}
        run = Run(config=Config(name=f"tracker-{type(self.model).__name__}"),
                  spec=RunSpec(seed=None, init_std=None, lr=None),  # type: ignore[arg-type]
                  epochs=np.asarray(self.snap_steps, dtype=np.int64), weights=weights,
                  loss=losses if len(losses) else np.array([math.nan]),
                  x=np.zeros((0, 0)), y=np.zeros((0, 0)), status=status, meta=meta)
        path = write_run(run, self.out)  # type: ignore[arg-type]
        atomic_write_text(path / "condensation.csv", self.history.to_csv(index=False))
        return path

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close("complete" if exc_type is None else "interrupted")


def lightning_callback(**tracker_kwargs: Any):
    """A PyTorch Lightning callback that runs a Tracker (needs the optional `lightning` package)."""
    try:
        import lightning.pytorch as pl
    except ImportError:
        raise ImportError("lightning_callback needs PyTorch Lightning: pip install lightning") from None

    class CondensationCallback(pl.Callback):
        """Tracker.step after every training batch; the run record is written at fit end."""

        tracker: Tracker | None = None

        def on_fit_start(self, trainer, pl_module) -> None:
            self.tracker = Tracker(pl_module, **tracker_kwargs)

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            if self.tracker is not None and loss is not None:
                self.tracker.step(trainer.current_epoch, loss)

        def on_fit_end(self, trainer, pl_module) -> None:
            if self.tracker is not None:
                self.tracker.close()

    return CondensationCallback()
