"""The run record of a ``condlab.Tracker``, written while training runs, so that nothing is lost.

The folder is condlab's run record (``condlab.records._records``; ``condlab analyze`` and ``load_run``
read it) from the first measurement on:

    config.json, data.npz (empty: the data are the user's)   written once, at the start
    meta.json             written (write, then rename) at the start, when the layers are first
                          known, and by ``close``; "status" stays "interrupted" and "writing"
                          true until ``close`` marks it "complete" (with the steps' epochs)
    loss.npy              appended at every measurement with the losses since the last one
    snapshots/LAYER.npy   (S, rows, cols) float32, one snapshot appended per measurement
    snapshots/epochs.npy  the snapshot steps, appended after the layers (the commit point)
    condensation.csv      one row per layer appended (and flushed) at every measurement
    condensation.parquet  the same table, written by ``close`` (with pyarrow)

An appended ``.npy`` keeps its header's length (numpy pads it so that the first axis can
grow in place): the data are appended, then the header's row count is rewritten. A process
killed between two writes leaves every file readable; a layer may then hold one snapshot
more than epochs.npy lists, which ``load_run`` ignores for Tracker records. Each file is
put on disk (fsync) by ``close``; until then a killed process loses nothing (the kernel keeps
the writes), a power cut may.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..records import Run, RunSpec, durable, meta_bytes
from ..training import Config


def _replace(path: Path, data: bytes) -> None:
    """Write then rename, without fsync: a killed process leaves the old or the new file, whole
    (``close`` puts everything on disk; an fsync per measurement would cost more than a count)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


class _Appendable:
    """A .npy file of shape (n, *row) whose first axis grows by appends; readable after each."""

    def __init__(self, path: Path, dtype: np.dtype, row: tuple[int, ...]) -> None:
        self.path, self.dtype, self.row, self.count = path, np.dtype(dtype), tuple(row), 0
        self.size = len(self._header(0))
        with open(path, "xb") as fh:
            fh.write(self._header(0))

    def _header(self, n: int) -> bytes:
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, {"descr": np.lib.format.dtype_to_descr(self.dtype),
                                                   "fortran_order": False, "shape": (n, *self.row)})
        return buf.getvalue()

    def append(self, rows: np.ndarray) -> None:
        rows = np.ascontiguousarray(rows, dtype=self.dtype)
        if rows.shape[1:] != self.row:
            raise ValueError(f"'{self.path}': rows of shape {rows.shape[1:]} cannot follow {self.row} "
                             "(did the model's layers change shape during training?)")
        header = self._header(self.count + len(rows))
        if len(header) != self.size:  # numpy's padding makes this impossible below 10**21 rows
            raise ValueError(f"'{self.path}': the .npy header cannot grow in place")
        with open(self.path, "r+b") as fh:
            fh.seek(self.size + self.count * self.dtype.itemsize * int(np.prod(self.row, dtype=np.int64)))
            fh.write(rows.tobytes())
            fh.seek(0)
            fh.write(header)  # after the data: a reader never sees rows that are not there yet
        self.count += len(rows)


def claim(out: str | Path) -> Path:
    """The record folder (absolute), made for this writer alone: a folder that exists and is not
    empty, or that another writer claimed first, is refused; nothing is ever overwritten."""
    out = Path(out).absolute()  # a relative `out` keeps meaning the folder it meant at the start
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"'{out}' exists and is not empty: choose a new directory for the run")
    out.mkdir(parents=True, exist_ok=True)
    try:
        with open(out / "meta.json", "x"):  # O_EXCL: of two trackers started at once, one wins
            pass
    except FileExistsError:
        raise ValueError(f"'{out}' was just claimed by another Tracker: choose a new directory") from None
    return out


class TrackerRecord:
    """Writes one Tracker run record as it goes (see the module docstring)."""

    def __init__(self, out: Path, model_class: str, meta: dict[str, Any]) -> None:
        self.out, self.meta = out, meta
        self.config = Config(name=f"tracker-{model_class.rsplit('.', 1)[-1]}")
        _replace(out / "config.json", (json.dumps(self.config.to_dict(), indent=2) + "\n").encode())
        buf = io.BytesIO()
        np.savez(buf, x=np.zeros((0, 0)), y=np.zeros((0, 0)))
        _replace(out / "data.npz", buf.getvalue())
        (out / "snapshots").mkdir()
        self.loss = _Appendable(out / "loss.npy", np.dtype(np.float64), ())
        self.layers: dict[str, _Appendable] = {}
        self.steps = _Appendable(out / "snapshots" / "epochs.npy", np.dtype(np.int64), ())
        self.step_list: list[int] = []
        self.fields: list[str] | None = None
        self.files = [out / "config.json", out / "data.npz", out / "loss.npy", self.steps.path]
        self.write_meta("interrupted", writing=True)

    def add(self, step: int, rows: Sequence[dict[str, Any]], snapshots: dict[str, np.ndarray],
            losses: Sequence[float]) -> None:
        """One measurement: its losses, snapshots (then their steps), table rows, then meta.json."""
        if losses:
            self.loss.append(np.asarray(losses, dtype=np.float64))
        if snapshots:
            new = [name for name in snapshots if name not in self.layers]
            for name, W in snapshots.items():
                if name not in self.layers:
                    path = self.out / "snapshots" / f"{name}.npy"
                    self.layers[name] = _Appendable(path, np.dtype(np.float32), W.shape)
                    self.files.append(self.layers[name].path)
                self.layers[name].append(W[None])
            self.steps.append(np.asarray([step]))
            self.step_list.append(step)
            if new:  # meta.json names the snapshot layers: load_run needs them
                self.write_meta("interrupted", writing=True)
        self._append_rows(rows)

    def _append_rows(self, rows: Sequence[dict[str, Any]]) -> None:
        if not rows:
            return
        path = self.out / "condensation.csv"
        with open(path, "a", newline="") as fh:
            if self.fields is None:
                self.fields = list(rows[0])
                self.files.append(path)
                csv.writer(fh).writerow(self.fields)
            writer = csv.DictWriter(fh, self.fields, extrasaction="ignore")
            writer.writerows(rows)  # buffered, then one flush by the `with`: whole rows

    def write_meta(self, status: str, *, writing: bool) -> None:
        meta = {**self.meta, "writing": writing}
        run = Run(config=self.config, spec=RunSpec(seed=None, init_std=None, lr=None),  # type: ignore[arg-type]
                  epochs=np.asarray(self.step_list, dtype=np.int64), weights=dict.fromkeys(self.layers),
                  loss=np.zeros(0), x=np.zeros((0, 0)), y=np.zeros((0, 0)), status=status, meta=meta)
        _replace(self.out / "meta.json", meta_bytes(run))

    def finish(self, status: str, history: Any) -> None:
        """The Parquet table, the final meta.json, then every file and folder put on disk."""
        from ._inspect import write_parquet

        if self.fields is not None:
            self.files += write_parquet(history, self.out / "condensation.parquet")
        self.write_meta(status, writing=False)
        durable([*self.files, self.out / "meta.json"],
                [self.out, self.out / "snapshots"], roots={os.fspath(self.out.parent)})

