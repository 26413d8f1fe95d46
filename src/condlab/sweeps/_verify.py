"""Records are verified, not trusted: a finished-looking run whose files are damaged is trained again.

A sweep (or diagram) resumes by skipping each run whose ``meta.json`` says it finished. A file
deleted or cut short since then, or a meta.json that is not an object, must not make the
results table read a record that is not there (a traceback) or count the run complete: the run
is reported by its path and trained again (its folder is replaced when the new one is written).

The check reads only JSON and the headers of the arrays (no array data): cheap enough for every
finished run of a large sweep at each resume.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

# the run files of condlab's phase diagram task (phase/_task.py), which writes no snapshots
PHASE_FILES = ("config.json", "curve.npz", "neurons.npz")


def read_meta(meta_file: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the meta.json object, None) or (None, why it cannot be trusted)."""
    try:
        meta = json.loads(meta_file.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        return None, f"meta.json is not valid JSON ({getattr(err, 'msg', 'not UTF-8')})"
    if not isinstance(meta, dict):
        return None, f"meta.json holds a JSON {type(meta).__name__}, not an object"
    return meta, None


def run_damage(run_dir: Path, meta: dict[str, Any]) -> str | None:
    """Why the finished run in `run_dir` cannot be trusted (None: its files are all there, with
    the shapes its meta.json says)."""
    try:
        if "snapshot_layers" in meta:
            return _record_damage(run_dir, meta)
        if (run_dir / "snapshots.npz").exists() or (run_dir / "snapshots").is_dir():
            return None  # an older record format: load_run checks it when it is measured
        missing = [f for f in PHASE_FILES if not (run_dir / f).is_file()]
        if missing:
            return f"{missing[0]} is missing"
        broken = [f for f in PHASE_FILES[1:] if not zipfile.is_zipfile(run_dir / f)]
        return f"{broken[0]} is not a readable .npz file" if broken else None
    except (KeyError, TypeError, ValueError) as err:  # meta.json lacks or garbles a field
        return f"meta.json does not describe the record ({type(err).__name__}: {err})"


def _record_damage(run_dir: Path, meta: dict[str, Any]) -> str | None:
    """A condlab run record (records/_records.py, format 3): every array there, the snapshots
    one per epoch of meta.json's snapshot_epochs (full ones per full_snapshot_epochs)."""
    snap = run_dir / "snapshots"
    count = len(meta["snapshot_epochs"])
    if not (run_dir / "config.json").is_file():
        return "config.json is missing"
    if not zipfile.is_zipfile(run_dir / "data.npz"):
        return "data.npz is missing or not a readable .npz file"
    in_csv = not (run_dir / "loss.npy").exists() and (run_dir / "loss.csv").is_file()  # format 2
    if not in_csv and (problem := _shape_problem(run_dir / "loss.npy", 1, int(meta.get("last_epoch", 0)) + 1,
                                                 True)):
        return problem
    wanted = [(snap / "epochs.npy", 1, count)]
    wanted += [(snap / f"{name}.npy", 3, count) for name in meta["snapshot_layers"]]
    if (snap / "neurons.npy").exists():
        full = len(meta["full_snapshot_epochs"])
        wanted += [(snap / "full/epochs.npy", 1, full)]
        wanted += [(snap / f"full/{name}.npy", 3, full) for name in meta["snapshot_layers"]]
    for path, ndim, rows in wanted:
        if (problem := _shape_problem(path, ndim, rows)):
            return problem
    return None


def _shape_problem(path: Path, ndim: int, rows: int, at_least: bool = False) -> str | None:
    """Why the .npy file at `path` is not an array of `ndim` dimensions with `rows` rows (None: it is)."""
    name = f"{path.parent.name}/{path.name}" if path.parent.name in ("snapshots", "full") else path.name
    if not path.is_file():
        return f"{name} is missing"
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            fmt = np.lib.format
            read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, _, dtype = read(f)
            start = f.tell()
            data = f.seek(0, 2) - start  # bytes after the header: a cut file has fewer
    except (ValueError, OSError, EOFError) as err:
        return f"{name} is not a readable .npy file ({err})"
    if data < int(np.prod(shape)) * dtype.itemsize:
        return f"{name} is truncated ({data} bytes of data for shape {shape})"
    if len(shape) != ndim or (shape[0] < rows if at_least else shape[0] != rows):
        return f"{name} has shape {shape}, expected {rows} {'or more ' if at_least else ''}rows"
    return None
