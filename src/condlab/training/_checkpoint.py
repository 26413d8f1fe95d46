"""Crash-safe training: a checkpoint file to resume a batch from, and clean stops on signals.

With an output folder, training writes ``OUT/checkpoint.pt`` every ``train.checkpoint_seconds``
(default 60 s; 0: never) and when it is stopped by SIGINT or SIGTERM. The file is replaced
atomically (temp file, fsync, rename), so a SIGKILL or an out-of-memory kill leaves the last
complete one. ``condlab train --resume OUT`` (``condlab.resume``) continues from it, and
the records then equal those of an uninterrupted run (bit for bit in float64 on CPU with
the same thread count: every step is recomputed from the same state). The checkpoint is
removed when the batch completes.

Format (version 1): one file written by ``torch.save``, readable with
``torch.load(path, weights_only=True)`` (never unpickling code), holding a dict:

    format      "condlab-checkpoint"
    version     1
    config      the batch's resolved config (``Config.to_dict()``): everything needed to
                rebuild the data, the network and the optimizer
    epoch       the next epoch whose loss is to be computed; ``params`` hold theta_epoch
    params      (P,) ``BatchedNet.flat`` in the training dtype: layer1 .. output, each
                (R, rows, cols) with the bias as last column, runs in ``run_specs`` order
    optimizer   ``Optimizer.state_dict()``: name, step count, lr (scalar or (P,)) and its
                state buffers, each (P,) (adam/adamw: exp_avg, exp_avg_sq; sgd: momentum_buffer)
    dropout     a list of R generator states (uint8 tensors), or None without dropout
    loss        (epoch, R) loss at epochs 0 .. epoch-1
    snapshot_epochs  (S,) int64;  snapshots  (S, P) the params at the epochs recorded in full
    thin_epochs  (T,) int64;  thin_snapshots  (T, Q) only with ``train.snapshot_neurons``: the
                kept rows of every snapshot (``SnapshotRecorder.state_dict``); without them a
                thinned batch's snapshots are all in ``snapshots`` (older checkpoints)
    diverged    {run index: first non-finite epoch};  checked  rows checked for divergence
    seconds     training time so far;  resumed_at  epochs at which earlier segments resumed
    provenance  versions and git commit of the writer
"""

from __future__ import annotations

import io
import json
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..records import atomic_write_bytes, provenance

if TYPE_CHECKING:
    from ._trainer import LoopState

FORMAT, VERSION = "condlab-checkpoint", 1
FILENAME = "checkpoint.pt"


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not fit; the message names the file."""


def checkpoint_path(out: str | Path) -> Path:
    """The checkpoint file of an output folder (or the file itself)."""
    out = Path(out)
    return out if out.suffix == ".pt" else out / FILENAME


def write_checkpoint(path: Path, config: dict, params: torch.Tensor, optimizer: dict,
                     dropout: list[torch.Tensor] | None, state, seconds: float,
                     resumed_at: list[int], writer: dict | None = None) -> None:
    """Write the state of a batch between two epochs (``state``: a LoopState) atomically.

    `writer`: the provenance to record (computed once per batch: it runs git).
    """
    # plain types only, so that torch.load(weights_only=True) accepts it
    origin = json.loads(json.dumps(writer if writer is not None else provenance(), default=str))
    data: dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "config": config, "epoch": state.epoch,
        "params": params.detach().cpu(), "optimizer": _cpu(optimizer),
        "dropout": dropout, "loss": state.loss[: state.epoch].cpu().clone(),
        **state.recorder.state_dict(_shapes(config, params), params.dtype),
        "diverged": {int(r): int(e) for r, e in state.diverged.items()}, "checked": state.checked,
        "seconds": float(seconds), "resumed_at": list(resumed_at), "provenance": origin,
    }
    buf = io.BytesIO()
    torch.save(data, buf)
    atomic_write_bytes(path, buf.getvalue())


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint (a file, or an output folder holding one) safely; one-line errors."""
    file = checkpoint_path(path)
    if not file.is_file():
        where = Path(path)
        raise CheckpointError(f"nothing to resume in '{where}': no {FILENAME}{_why_none(where)}")
    try:
        data = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 -- any unreadable file gets the same one-line message
        raise CheckpointError(f"checkpoint '{file}' cannot be read ({type(err).__name__}); "
                              "it is damaged: train again without --resume") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"'{file}' is not a condlab checkpoint")
    if data.get("version") != VERSION:
        raise CheckpointError(f"checkpoint '{file}' has version {data.get('version')}; "
                              f"this condlab reads version {VERSION}")
    return data


def _shapes(config: dict, params: torch.Tensor) -> list[tuple[int, int, int]]:
    """The (R, rows, cols) of each layer of a batch's flat parameters."""
    from ._config import Config
    from ._models import Architecture

    cfg = Config.from_dict(config)
    shapes = Architecture.from_config(cfg.model, cfg.data.d).shapes
    runs = len(params) // sum(r * c for r, c in shapes)
    return [(runs, r, c) for r, c in shapes]


def restore_checkpoint(saved: dict, net, opt, dropout, recorder=None) -> LoopState:
    """Load a checkpoint's parameters, optimizer and dropout states into a freshly built batch
    (BatchedNet, Optimizer, Dropout or None), and its snapshots into `recorder` (a
    SnapshotRecorder; default: every snapshot in full); -> the loop state to continue
    ``train_batch`` from."""
    from ..records import SnapshotRecorder
    from ._config import snapshot_epochs
    from ._trainer import LoopState

    if saved["params"].shape != net.flat.shape:
        raise CheckpointError(f"checkpoint parameters {tuple(saved['params'].shape)} do not fit "
                              f"this network {tuple(net.flat.shape)}")
    if (saved["dropout"] is None) != (dropout is None):
        raise CheckpointError("checkpoint and config disagree on dropout")
    net.flat.copy_(saved["params"])
    opt.load_state_dict(saved["optimizer"])
    if dropout is not None:
        dropout.load_state_dict(saved["dropout"])
    train = saved["config"]["train"]
    if recorder is None:
        recorder = SnapshotRecorder(snapshot_epochs(train["snapshots"], train["epochs"]), train["epochs"])
    recorder.load_state_dict(saved, [tuple(v.shape) for v in net.weights])
    state = LoopState.start(net, train["epochs"], recorder)
    state.epoch, state.checked = int(saved["epoch"]), int(saved["checked"])
    state.loss[: state.epoch] = saved["loss"].to(state.loss)
    state.diverged = {int(r): int(e) for r, e in saved["diverged"].items()}
    return state


def _why_none(out: Path) -> str:
    """Why a folder has no checkpoint, from its batch.json (if any)."""
    try:
        statuses = {r["status"] for r in json.loads((out / "batch.json").read_text())["runs"]}
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    if "interrupted" in statuses:
        return (" (the batch was stopped before its first checkpoint, see train.checkpoint_seconds: "
                "train it again)")
    return " (its batch completed: a finished batch keeps no checkpoint)"


def _cpu(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().clone()
    if isinstance(obj, dict):
        return {k: _cpu(v) for k, v in obj.items()}
    return obj


class StoppedAfterBatch(KeyboardInterrupt):
    """A stop asked for as a batch ended: the batch is complete (`result`, and on disk where
    ``train`` had an ``out``), and the caller stops as for any Ctrl-C. A sweep writes `result`
    first, so a resumed sweep does not train that batch again."""

    def __init__(self, message: str, result: Any) -> None:
        super().__init__(message)
        self.result = result


class StopRequests:
    """Within ``with``: SIGINT and SIGTERM ask training to stop cleanly at the next epoch.

    A second signal raises KeyboardInterrupt at once (the user insists). Outside the main
    thread, signals cannot be caught and nothing is installed. Calling the object tells
    whether a stop was asked for.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested: int | None = None
        self._previous: dict[int, Any] = {}

    def __call__(self) -> bool:
        return self.requested is not None

    def _handle(self, signum: int, frame) -> None:
        if self.requested is not None:
            raise KeyboardInterrupt
        self.requested = signum

    def __enter__(self) -> StopRequests:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
