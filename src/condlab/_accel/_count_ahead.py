"""Fast path "count ahead": a sweep batch's initial-stage line counts made while it still trains.

The reference (``sweeps/_run.py``, ``summarize_many``) counts each run's hidden layers at two
snapshots after the batch has trained: the last one inside the initial stage (``lines_epoch``)
and the last one. The first is fixed as soon as the run's loss falls to 70 % of its start, in
most sweeps long before the batch ends, yet it was counted on the batch's critical path.
``CountAhead`` watches the snapshots (``condlab.train``'s ``on_snapshot``), keeps a copy of the
hidden layers of the last two, and counts each run's initial-stage layers on a thread of its own
while the batch trains, in chunks of at least MIN_CHUNK layers (``count_lines_many`` fits a chunk
together; in smaller ones a layer costs more: ``LAYERS_PER_CALL``), or fewer once every run's
stage has ended (no more will come). ``summarize_many`` is handed what was counted
and counts the rest after training, as before. A layer's count does not depend on the layers
counted with it (``count_lines_many``), so the table holds the same integers either way
(tests/test_accel_parity.py).

Registered for ``Batch`` (protocol "sweep summary"), and made only where it can pay: training
leaves a core free (torch's threads fewer than this process's CPUs, or a GPU trains); every
snapshot is whole (a thinned one is not the layer the summary counts); and the batch has at
least one chunk's layers. With every core training, counting beside training slows it by about
what it saves after it; the trainer's thread also waits for the GIL while this thread holds it
(docs/speed.md, "Counting while the batch trains"). A failure in the hook switches it off for
the batch with one ``AccelWarning``: the summary then counts those layers after training.
"""

from __future__ import annotations

import os
import queue
import threading
import warnings
from typing import Any

import numpy as np

from ..analysis import LAYERS_PER_CALL, count_lines_many, default_epochs, stage_ends
from ..sweeps import Batch
from ._registry import AccelWarning, FastPath, register

MIN_CHUNK = LAYERS_PER_CALL   # layers counted together at least
Key = tuple[int, str, int]   # (run index in the batch, layer name, epoch)


class CountAhead:
    """Counts the initial-stage layers of a batch's runs while it trains (``on_snapshot``);
    ``results()`` after training: {(run, layer, epoch): count} of what it counted."""

    def __init__(self, names: list[str]):
        self.hidden = [(k, name) for k, name in enumerate(names) if name.startswith("layer")]
        self.epochs: list[int] = []                       # snapshot epochs seen, ascending
        self.kept: dict[int, list[np.ndarray]] = {}       # the last two: epoch -> (R, rows, cols) per layer
        self.pending: np.ndarray | None = None            # runs whose initial stage has not ended yet
        self.ready: list[tuple[Key, np.ndarray]] = []     # layers waiting for a chunk
        self.counts: dict[Key, int] = {}
        self.broken = False
        self._chunks: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False

    @classmethod
    def make(cls, batch: Batch) -> CountAhead | None:
        """A CountAhead for the batch where it can pay (the module's docstring), else None."""
        import torch

        from ..training import layer_names, resolve_device

        if batch.task:   # another trainer: its config is not condlab.train's
            return None
        model, train = batch.config["model"], batch.config["train"]
        names = layer_names(model["depth"])
        hidden = sum(name.startswith("layer") for name in names)
        if train["snapshot_neurons"] > 0 or len(batch.runs) * hidden < MIN_CHUNK:
            return None
        spare = resolve_device(train["device"]).type != "cpu" or torch.get_num_threads() < _cpus()
        return cls(names) if spare else None

    def on_snapshot(self, epoch: int, weights: list[Any], loss: Any) -> None:
        """The trainer's hook (``condlab.train(on_snapshot=...)``): weights [layer] -> (R, rows,
        cols) tensors at `epoch`, loss (epoch + 1, R)."""
        if self.broken or self._closed:
            return
        try:
            self._look(epoch, weights, loss.detach().cpu().numpy())
        except Exception as err:   # never the training's failure: counted after it instead
            self.broken = True
            warnings.warn(AccelWarning(f"fast path 'count ahead' is off for this batch "
                                       f"({type(err).__name__}: {err}); its layers are counted after "
                                       "training"), stacklevel=2)

    def _look(self, epoch: int, weights: list[Any], loss: np.ndarray) -> None:
        """Keep this snapshot's hidden layers; queue the layers of the runs whose stage just ended."""
        self.epochs.append(epoch)
        self.kept[epoch] = [weights[k].detach().cpu().numpy().copy() for k, _ in self.hidden]
        for old in [e for e in self.kept if e < self.epochs[max(len(self.epochs) - 2, 0)]]:
            del self.kept[old]   # a run still inside its stage ends it after the previous snapshot
        if self.pending is None:
            self.pending = np.ones(loss.shape[1], dtype=bool)
        # a run's record holds NaN from its first non-finite loss on (the trainer's outcome), where
        # training saw +inf first: the same stage end either way
        loss = np.where(np.isfinite(loss), loss, np.nan)
        ended = self.pending & (stage_ends(loss) < len(loss))
        if not ended.any():
            return
        self.pending &= ~ended
        at = default_epochs(np.asarray(self.epochs), loss)
        for r in np.flatnonzero(ended).tolist():
            layers = self.kept.get(int(at[r]))
            if layers is not None:   # (always, by the argument above; else counted after training)
                self.ready += [((r, name, int(at[r])), w[r]) for (_, name), w in zip(self.hidden, layers,
                                                                                      strict=True)]
        if len(self.ready) >= MIN_CHUNK or (self.ready and not self.pending.any()):   # full, or the last
            self._submit(self.ready)
            self.ready = []

    def close(self) -> None:
        """No more snapshots: the thread counts the chunks it was given, then ends."""
        if not self._closed:
            self._closed = True
            self._chunks.put(None)

    def results(self) -> dict[Key, int]:
        """What was counted ahead (after training; waits for the chunk being counted)."""
        self.close()
        if self._thread is not None:
            self._thread.join()
        return self.counts

    def _submit(self, chunk: list[tuple[Key, np.ndarray]]) -> None:
        if self._thread is None:   # a daemon: an interrupted batch never waits for it
            self._thread = threading.Thread(target=self._count, name="condlab-count-ahead", daemon=True)
            self._thread.start()
        self._chunks.put(chunk)

    def _count(self) -> None:
        while (chunk := self._chunks.get()) is not None:
            try:
                found = count_lines_many([w for _, w in chunk])
            except Exception:   # noqa: BLE001 -- these layers are counted after training, where
                continue        # the same error reaches the sweep
            self.counts.update(zip([key for key, _ in chunk], found, strict=True))


def _cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        return os.cpu_count() or 1


register(FastPath("count ahead", "sweep summary", (Batch,), CountAhead.make, "benchmarks/bench_sweep.py"))
