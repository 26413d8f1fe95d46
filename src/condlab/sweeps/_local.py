"""The local executor: a sweep's batches one after the other in this process (the default).

Batch k+1 trains while a background thread measures and writes batch k into the storage's
staging folder (OUT/runs itself for a local folder) and publishes it (uploads it, for an
object store), then makes batch k+1's run directories.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ._executors import Executor, OnDone, register_executor
from ._run import Batch, BatchDone, Prepared, discard_part, prepare_part, train_part, write_part


class _EpochCounter:
    """Forwards condlab.train's per-epoch updates to the sweep's bar, in cost units, and sets
    `started` at the first one (the batch is set up and its training loop runs)."""

    def __init__(self, bar: Any, step: float, started: threading.Event | None = None):
        self.bar, self.step, self.started = bar, step, started

    def update(self, n: int = 1) -> None:
        if self.started is not None and not self.started.is_set():
            self.started.set()
        if self.bar is not None:
            self.bar.update(n * self.step)


def _prepare_when(started: threading.Event, batch: Batch, runs_dir: str) -> Prepared | None:
    """prepare_part once the batch trains: its set-up (data, initial weights: not training
    time) is not slowed by this thread's file-system work competing for the GIL."""
    started.wait()
    return prepare_part(batch, runs_dir)


def _write_prepared(batch: Batch, result, runs_dir: str, prepared: Future, storage: Any) -> BatchDone:
    """write_part into the directories that `prepared` (prepare_part, run before on this
    thread) made (if making them failed, write_part makes them itself); then publish them."""
    done = write_part(batch, result, runs_dir, prepared=None if prepared.exception() else prepared.result())
    storage.publish(Path(runs_dir), done.rows)
    return done


@register_executor
class LocalExecutor(Executor):
    """Batches one after the other in this process (needs nothing set up)."""

    name = "local"

    def check(self, storage: Any, batches: list[Batch]) -> None:
        """Every batch's device exists here: refused before anything is written, not when the
        batch comes up hours later (a task's batches carry no train.device)."""
        from ..training import resolve_device

        for device in dict.fromkeys(b.config["train"]["device"] for b in batches if "train" in b.config):
            resolve_device(device)

    def run(self, batches: list[Batch], storage: Any, bar: Any, on_done: OnDone) -> None:
        with storage.stage() as runs_dir:
            self._run(batches, str(runs_dir), storage, bar, on_done)

    def _run(self, batches: list[Batch], runs_dir: str, storage: Any, bar: Any, on_done: OnDone) -> None:
        from ..training import StoppedAfterBatch

        with ThreadPoolExecutor(max_workers=1) as writer:
            writing: list[tuple[Batch, Future]] = []
            late: StoppedAfterBatch | None = None
            for batch in batches:
                started = threading.Event()
                counter = _EpochCounter(bar, batch.cost / max(batch.epochs, 1), started)
                prepared = writer.submit(_prepare_when, started, batch, runs_dir)
                try:
                    result = train_part(batch, progress=counter)
                except StoppedAfterBatch as stop:  # Ctrl-C as the batch ended: write it, then stop
                    result, late = stop.result, stop
                except Exception as err:  # a broken batch must not stop the others
                    writer.submit(discard_part, batch, runs_dir)
                    on_done(batch, BatchDone(batch.key, {}, error=f"{type(err).__name__}: {err}"))
                    continue
                finally:
                    started.set()  # never leave the writer waiting (an error, Ctrl-C)
                writing.append((batch, writer.submit(_write_prepared, batch, result, runs_dir,
                                                     prepared, storage)))
                while writing and writing[0][1].done():
                    self._report(*writing.pop(0), on_done)
                if late is not None or any(run.status == "interrupted" for run in result.runs):
                    break
            for item in writing:
                self._report(*item, on_done)
            if late is not None:
                raise late

    @staticmethod
    def _report(batch: Batch, future: Future, on_done: OnDone) -> None:
        try:
            done = future.result()
        except Exception as err:
            done = BatchDone(batch.key, {}, error=f"{type(err).__name__}: {err}")
        on_done(batch, done)
