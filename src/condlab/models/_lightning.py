"""``condlab.lightning_callback``: a Tracker inside a PyTorch Lightning ``Trainer``.

* Steps are optimizer steps (``trainer.global_step``): with ``accumulate_grad_batches=k`` the
  tracker steps once per k batches, with the mean of their losses.
* Metrics go to every logger of the Trainer (``logger.log_metrics`` at the measured global
  step: ``condlab/LAYER/lines``, ``/condensed_share``, ``/effective_neurons``) and through
  ``pl_module.log`` into ``trainer.callback_metrics`` (so a checkpoint or early-stopping
  callback can monitor them).
* Only global rank 0 tracks and writes (``trainer.is_global_zero``); under DDP every rank
  holds the same weights.
* Each ``fit`` opens its own record: the first in `out`, later ones (a resumed or fine-tuning
  fit with the same callback) in `out`-fit2, -fit3, ... ; a record's steps start at the
  global step its fit starts from. ``callback.records`` lists the folders written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._tracker import Tracker

METRICS = ("lines", "condensed_share", "effective_neurons")


def _record_path(out: str | Path | None, fit: int) -> Path | None:
    if out is None or fit == 1:
        return None if out is None else Path(out)
    base = Path(out)
    return base.with_name(f"{base.name}-fit{fit}")


def lightning_callback(**tracker_kwargs: Any):
    """A PyTorch Lightning callback that runs a Tracker (needs the optional `lightning` package).

    `tracker_kwargs` go to ``Tracker`` (every, layers, out, snapshots, heads, count_kwargs,
    tensorboard); the callback class is built here so that `lightning` is imported only when
    asked for."""
    try:
        import lightning.pytorch as pl
    except ImportError:
        raise ImportError("lightning_callback needs PyTorch Lightning: pip install lightning") from None

    class CondensationCallback(pl.Callback):
        """Tracker.step per optimizer step; metrics to the loggers; one record per fit."""

        def __init__(self) -> None:
            self.tracker: Tracker | None = None
            self.records: list[Path] = []
            self.fits = 0
            self._losses: list[Any] = []
            self._seen = 0

        def on_fit_start(self, trainer, pl_module) -> None:
            self.fits += 1
            self._losses, self._seen = [], trainer.global_step
            if not trainer.is_global_zero:
                return
            kwargs = dict(tracker_kwargs)
            kwargs["out"] = _record_path(kwargs.get("out"), self.fits)

            def log(step: int, rows: list[dict[str, Any]]) -> None:
                metrics = {f"condlab/{r['layer']}/{k}": float(r[k]) for r in rows for k in METRICS}
                for logger in trainer.loggers:
                    logger.log_metrics(metrics, step=step)

            self.tracker = Tracker(pl_module, on_measure=log, start_step=trainer.global_step, **kwargs)
            if self.tracker.out is not None:
                self.records.append(self.tracker.out)

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            if self.tracker is None:
                return
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self._losses.append(loss.detach() if hasattr(loss, "detach") else loss)
            for _ in range(trainer.global_step - self._seen):  # one per optimizer step taken
                taken, self._losses = self._losses, []
                mean = sum(taken) / len(taken) if taken else float("nan")
                if self.tracker.step(trainer.current_epoch, mean):
                    pl_module.log_dict({f"condlab/{r['layer']}/{k}": float(r[k])
                                        for r in self.tracker.last_rows for k in METRICS},
                                       on_step=True, on_epoch=False, logger=False, rank_zero_only=True)
            self._seen = trainer.global_step

        def on_fit_end(self, trainer, pl_module) -> None:
            if self.tracker is not None:
                self.tracker.close()
                self.tracker = None

        def on_exception(self, trainer, pl_module, exception) -> None:
            if self.tracker is not None:  # what was recorded stays, marked interrupted
                self.tracker.close("interrupted")
                self.tracker = None

    return CondensationCallback()
