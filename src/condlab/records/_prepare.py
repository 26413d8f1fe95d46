"""The empty run directories a sweep makes while a batch trains (``write_runs(..., prepared=)``).

Creating a file or a directory is journaled file-system work (45-80 µs a file on this
machine's ext4, against 9-12 µs to write into an empty one without truncating it): the local
executor does it for batch k+1 on its writer thread while batch k+1 trains.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ._files import fill_file, json_indent2, npz_bytes


def record_files(layers: Sequence[str]) -> list[str]:
    """The files of an unthinned run directory with these snapshot layers, relative to it."""
    return ["config.json", "loss.npy", "data.npz", "snapshots/epochs.npy",
            *(f"snapshots/{name}.npy" for name in layers), "meta.json"]


def prepare_runs(paths: Sequence[Path], files: Sequence[str] = ()) -> None:
    """Make each ``NAME.partial/snapshots`` directory and the empty `files` in it, for
    ``write_runs(..., prepared=files)`` to fill: a sweep makes them while the batch trains, as
    creating files and directories is file-system work that need not wait for the training
    (writing into an empty file costs a fraction of creating one)."""
    for path in paths:
        partial = path.with_name(path.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        os.makedirs(partial / "snapshots")
        for name in files:
            os.close(os.open(partial / name, os.O_WRONLY | os.O_CREAT, 0o666))


@dataclass
class Known:
    """The config.json and data.npz that ``fill_known`` wrote into prepared run directories
    before the batch trained: per run, the config its config.json holds; the (x, y) of every
    data.npz. ``holds(i, run)``: which of the two already hold what run i writes."""

    configs: list[Any]
    x: np.ndarray
    y: np.ndarray
    _same_data: dict[tuple[int, int], bool] = field(default_factory=dict)

    def holds(self, i: int, run: Any) -> tuple[bool, bool]:
        key = (id(run.x), id(run.y))  # the runs of a batch share one data set: compared once
        if key not in self._same_data:
            self._same_data[key] = bool(run.x.dtype == self.x.dtype and run.y.dtype == self.y.dtype
                                        and np.array_equal(run.x, self.x) and np.array_equal(run.y, self.y))
        return run.config == self.configs[i], self._same_data[key]


def fill_known(paths: Sequence[Path], configs: Sequence[Any], x: np.ndarray, y: np.ndarray) -> Known:
    """Write each run's config.json (`configs`, one per path) and data.npz into the empty files
    that ``prepare_runs`` made: what the writer would write after training, written during it
    (the writer checks each against the trained run and rewrites what differs)."""
    npz = npz_bytes(x, y, {})
    for path, config in zip(paths, configs, strict=True):
        partial = f"{os.fspath(path)}.partial"
        fill_file(f"{partial}/config.json", json_indent2(config.to_dict()).encode())
        fill_file(f"{partial}/data.npz", npz)
    return Known(list(configs), x, y)
