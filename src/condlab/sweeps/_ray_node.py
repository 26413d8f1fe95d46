"""What a Ray sweep runs on the cluster's nodes: the node check, the batch task, progress.

Ray pickles these functions and classes by reference (module and name), so a node imports
condlab to run them: the driver's own copy of condlab, shipped with ``runtime_env``
``py_modules`` (the default), so a node without condlab, or with another version, runs the
same code as the driver. ``code_fingerprint`` (a hash of condlab's source files) lets the
driver refuse a node whose code differs anyway.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._run import Batch, BatchDone, run_batch, trained_here
from ._storage import local_manifest, read_runs

RETURN_LIMIT = 256 * 2**20  # bytes of run files one batch may return through the object store
REPORT_SECONDS = 0.5        # a task sends its progress at most this often
_FINGERPRINT: list[str] = []


class TransientBatchError(RuntimeError):
    """An I/O error of a Ray task that another try may not meet; Ray retries these."""


class NotShared(RuntimeError):
    """This node does not see the sweep's output storage (not retried: it will not start to)."""


class TooBig(RuntimeError):
    """A batch's runs are larger than the object store may carry back (not retried)."""


@dataclass(frozen=True)
class TaskPlan:
    """How one batch task runs: its threads, the storage marker it must see (None: its runs
    go back through the object store, at most `return_limit` bytes), its device."""

    threads: int = 1
    marker: tuple[str, str] | None = None  # (file name, content) written by the driver
    return_limit: int = 0                  # > 0: return the run files instead of writing them
    device: str | None = None              # "cuda": train on the GPU Ray gave this task
    board: Any = None                      # a ProgressBoard actor, or None
    slot: int = 0                          # this batch's key on the board


def code_fingerprint() -> str:
    """SHA-256 of condlab's source files (relative names and bytes) as imported here."""
    if not _FINGERPRINT:
        import condlab

        root = Path(condlab.__file__).resolve().parent
        digest = hashlib.sha256()
        for path in sorted(root.rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        _FINGERPRINT.append(digest.hexdigest())
    return _FINGERPRINT[0]


def node_facts(storage: Any, marker: tuple[str, str] | None) -> dict[str, Any]:
    """What the driver checks on each node: its condlab, and whether it sees the storage."""
    import platform
    import socket

    import ray

    from .._version import __version__

    facts = {"node": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
             "version": __version__, "fingerprint": code_fingerprint(),
             "python": platform.python_version(), "sees": True, "why": ""}
    if marker is not None:
        try:
            facts["sees"] = storage.read_bytes(marker[0]) == marker[1].encode()
        except Exception as err:  # credentials, a missing mount: the node does not see it
            facts["sees"], facts["why"] = False, f"{type(err).__name__}: {err}"
    return facts


def batch_task(batch: Batch, storage: Any, plan: TaskPlan) -> BatchDone:
    """One Ray task: train a batch, write its runs (or return them); retry-worthy errors marked."""
    try:
        return _batch(batch, storage, plan)
    except (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError):
        raise  # the same on every try: not retried
    except OSError as err:
        raise TransientBatchError(f"{type(err).__name__}: {err}") from err


def _batch(batch: Batch, storage: Any, plan: TaskPlan) -> BatchDone:
    import ray
    import torch

    torch.set_num_threads(plan.threads)  # Ray gave this task plan.threads CPUs
    where = trained_here(node=ray.get_runtime_context().get_node_id(), threads=plan.threads)
    if plan.marker is not None and _sees(storage, plan.marker) is False:
        raise NotShared(f"node {where['node'][:12]} ({where['host']}) does not see the sweep's output "
                        f"{storage.where()}: --out must be storage every node shares")
    if plan.device is not None:
        batch = _on_device(batch, plan.device)
        where["device"] = f"cuda ({torch.cuda.get_device_name(0)})"
    progress = _Reporter(plan.board, plan.slot) if plan.board is not None else False
    if plan.return_limit:
        with tempfile.TemporaryDirectory(prefix="condlab-batch-") as tmp:
            done = run_batch(batch, tmp, progress, where)
            done.payload = read_runs(Path(tmp), done.rows, plan.return_limit,
                                     lambda total: TooBig(_too_big(batch, total, plan.return_limit)))
    else:
        with storage.stage() as runs_dir:
            done = run_batch(batch, str(runs_dir), progress, where)
            done.files = {h: local_manifest(runs_dir / h) for h in done.rows}
            storage.publish(runs_dir, done.rows)
    done.where = where
    return done


def _sees(storage: Any, marker: tuple[str, str]) -> bool:
    try:
        return storage.read_bytes(marker[0]) == marker[1].encode()
    except Exception:
        return False


def _on_device(batch: Batch, device: str) -> Batch:
    """The batch on the task's own GPU: Ray shows a task only the GPUs it was given, as cuda:0."""
    config = {**batch.config, "train": {**batch.config["train"], "device": device}}
    return dataclasses.replace(batch, config=config)


def _too_big(batch: Batch, total: int, limit: int) -> str:
    return (f"batch {batch.key}'s runs are {total / 2**20:.0f} MiB, more than the {limit / 2**20:.0f} MiB "
            "that --return-runs carries per batch: write to shared storage instead (--out on a shared "
            "file system or s3://...), or record fewer snapshots (train.snapshots)")


class _Reporter:
    """condlab.train's per-epoch progress, sent to the driver's board every REPORT_SECONDS."""

    def __init__(self, board: Any, slot: int):
        self.board, self.slot, self.epochs, self.sent = board, slot, 0, time.monotonic()

    def update(self, n: int = 1) -> None:
        self.epochs += n
        now = time.monotonic()
        if now - self.sent >= REPORT_SECONDS:
            self.board.add.remote(self.slot, self.epochs)
            self.epochs, self.sent = 0, now


class ProgressBoard:
    """A Ray actor the batch tasks report their epochs to; the driver reads it for its bar."""

    def __init__(self) -> None:
        self.epochs: dict[int, int] = {}

    def add(self, slot: int, epochs: int) -> None:
        self.epochs[slot] = self.epochs.get(slot, 0) + epochs

    def read(self) -> dict[int, int]:
        return dict(self.epochs)
