"""Run records: one directory per run, files a user can open.

    RUN_DIR/
      config.json      the resolved config of this one run (one seed, one lr, one init_std)
      meta.json        seed, lr, init_std, status, initial-stage epoch, versions, git commit
      loss.csv         epoch,loss for every epoch (eq. 3)
      snapshots.npz    epochs (S,), layer1 .. layerL, output: (S, rows, cols), bias = last column
      data.npz         x (n, d), y (n, d_out): the training set

A run directory is assembled under a temporary name and renamed when complete, so a crash
never leaves a directory that looks finished; ``meta.json`` is written last inside it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ._config import Config, ConfigError
from ._io import atomic_write_json, atomic_write_npz, atomic_write_text
from ._models import Architecture, FCNet

STATUSES = ("complete", "diverged", "interrupted")


@dataclass(frozen=True)
class RunSpec:
    """What distinguishes one run of a batch from the others (defaults: fields added later)."""

    seed: int
    init_std: float
    lr: float
    weight_decay: float = 0.0
    momentum: float = 0.0
    dropout: float = 0.0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_meta(cls, meta: dict) -> RunSpec:
        """From a run's meta.json; records written before a field existed get its default."""
        names = [f.name for f in dataclasses.fields(cls)]
        return cls(**{k: meta[k] for k in names if k in meta})


@dataclass
class Run:
    """One trained run: its config, loss curve, and the weight snapshots of every layer."""

    config: Config
    spec: RunSpec
    epochs: np.ndarray                       # (S,)
    weights: dict[str, np.ndarray]           # name -> (S, rows, cols)
    loss: np.ndarray                         # (E + 1,)
    x: np.ndarray                            # (n, d)
    y: np.ndarray                            # (n, d_out)
    status: str = "complete"
    initial_stage_epoch: int | None = None   # first epoch with loss <= 70% of its initial value
    diverged_epoch: int | None = None
    meta: dict = field(default_factory=dict)
    path: Path | None = None

    @property
    def architecture(self) -> Architecture:
        return Architecture.from_config(self.config.model, self.config.data.d)

    def index(self, epoch: int) -> int:
        """Position of a recorded epoch in `epochs`; a clear error lists the recorded ones."""
        hits = np.nonzero(self.epochs == epoch)[0]
        if not hits.size:
            shown = ", ".join(str(e) for e in self.epochs[:12]) + (" ..." if len(self.epochs) > 12 else "")
            raise ValueError(f"epoch {epoch} was not recorded: snapshots exist at {shown}")
        return int(hits[0])

    def layer(self, name: str, epoch: int) -> np.ndarray:
        """Input weights (rows, cols) of layer `name` ('layer1'.., 'output') at `epoch`."""
        if name not in self.weights:
            raise ValueError(f"unknown layer '{name}': this run has {', '.join(self.weights)}")
        return self.weights[name][self.index(epoch)]

    def network(self, epoch: int, dtype: torch.dtype = torch.float64) -> FCNet:
        """The network at a recorded epoch as an nn.Module."""
        i = self.index(epoch)
        return FCNet(self.architecture, [torch.as_tensor(w[i], dtype=dtype) for w in self.weights.values()])


@dataclass
class RunResult:
    """The runs of one batch (``condlab.train``'s return value); indexable like a list."""

    config: Config
    runs: list[Run]
    out: Path | None = None
    seconds: float = 0.0

    def __len__(self) -> int:
        return len(self.runs)

    def __getitem__(self, i: int) -> Run:
        return self.runs[i]

    def __iter__(self):
        return iter(self.runs)

    @property
    def ok(self) -> bool:
        return all(r.status == "complete" for r in self.runs)


def write_run(run: Run, path: Path) -> Path:
    """Write a run directory atomically and set ``run.path``."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    atomic_write_json(partial / "config.json", run.config.to_dict())
    epochs = np.arange(len(run.loss))
    lines = ["epoch,loss"] + [f"{e},{v:.17g}" for e, v in zip(epochs, run.loss, strict=True)]
    atomic_write_text(partial / "loss.csv", "\n".join(lines) + "\n")
    atomic_write_npz(partial / "snapshots.npz", {"epochs": run.epochs, **run.weights})
    atomic_write_npz(partial / "data.npz", {"x": run.x, "y": run.y})
    meta = {
        **run.spec.to_dict(),
        "status": run.status, "initial_stage_epoch": run.initial_stage_epoch,
        "diverged_epoch": run.diverged_epoch, "snapshot_epochs": run.epochs.tolist(),
        **run.meta,
    }
    atomic_write_json(partial / "meta.json", meta)
    if path.exists():
        shutil.rmtree(path)
    os.replace(partial, path)
    run.path = path
    return path


class RecordError(ValueError):
    """A run record that is missing a part, truncated, or altered; the message names the file."""


_FIX = "re-run the training or restore the file"


def _json(path: Path) -> dict:
    if not path.is_file():
        raise RecordError(f"'{path}' is missing: the run record is incomplete; {_FIX}")
    try:
        raw = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        where = f" ({err.msg} at line {err.lineno})" if isinstance(err, json.JSONDecodeError) else ""
        raise RecordError(f"'{path}' is not valid JSON{where}: the record is corrupt; {_FIX}") from None
    if not isinstance(raw, dict):
        raise RecordError(f"'{path}' must hold a JSON object: the record is corrupt; {_FIX}")
    return raw


def _npz(path: Path, names: list[str] | None = None) -> dict[str, np.ndarray]:
    """Every array of an .npz record (allow_pickle stays off: records hold numbers only)."""
    if not path.is_file():
        what = "is not a file" if path.exists() else "is missing"
        raise RecordError(f"'{path}' {what}: the run record is incomplete; {_FIX}")
    corrupt = f"'{path}' is truncated or not an .npz archive: the record is corrupt; {_FIX}"
    try:
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as archive:
            arrays = {k: archive[k] for k in archive.files}
    except ValueError as err:
        if "pickle" not in str(err):
            raise RecordError(corrupt) from None
        # numpy's message suggests allow_pickle=True, which would let the file run code: never
        raise RecordError(f"'{path}' is not an .npz archive of numeric arrays (it holds pickled "
                          "Python objects or other data), so condlab does not load it: it is not "
                          "a condlab record or was altered") from None
    except (EOFError, zipfile.BadZipFile, zlib.error, KeyError):
        raise RecordError(corrupt) from None
    except OSError as err:
        if err.errno is not None:  # permission and the like: the CLI names the file
            raise
        raise RecordError(corrupt) from None
    missing = [k for k in names or [] if k not in arrays]
    if missing:
        raise RecordError(f"'{path}' has no array '{missing[0]}' (it has {', '.join(arrays) or 'none'}): "
                          f"the record is corrupt; {_FIX}")
    return arrays


def _check_shapes(path: Path, config: Config, epochs: np.ndarray, weights: dict, x: np.ndarray) -> None:
    arch = Architecture.from_config(config.model, config.data.d)
    if epochs.ndim != 1:
        raise RecordError(f"'{path / 'snapshots.npz'}': epochs has shape {epochs.shape}, expected (S,)")
    for name, (rows, cols) in zip(arch.names, arch.shapes, strict=True):
        got = weights.get(name)
        want = (len(epochs), rows, cols)
        if got is None or got.shape != want or not np.issubdtype(got.dtype, np.floating):
            what = "is missing" if got is None else f"has shape {got.shape} ({got.dtype})"
            raise RecordError(f"'{path / 'snapshots.npz'}': {name} {what}, expected float {want} for "
                              f"the network in config.json: the record is corrupt; {_FIX}")
    if x.ndim != 2 or x.shape[1] != config.data.d:
        raise RecordError(f"'{path / 'data.npz'}': x has shape {x.shape}, expected (n, {config.data.d})")


def _check_external(path: Path, epochs: np.ndarray, weights: dict) -> None:
    """A Tracker record: every snapshot layer is float (S, rows, cols), S = len(epochs)."""
    for name, got in weights.items():
        if got.ndim != 3 or got.shape[0] != len(epochs) or not np.issubdtype(got.dtype, np.floating):
            raise RecordError(f"'{path / 'snapshots.npz'}': {name} has shape {got.shape} ({got.dtype}), "
                              f"expected float ({len(epochs)}, rows, cols): the record is corrupt; {_FIX}")


def load_run(path: str | Path) -> Run:
    """Read a run directory written by ``condlab train``; a corrupt part raises RecordError naming it."""
    path = Path(path)
    meta_file = path / "meta.json"
    if not meta_file.is_file():
        hint = " (an unfinished run: its .partial directory was never completed)" if \
            path.name.endswith(".partial") else ""
        raise FileNotFoundError(f"'{path}' is not a condlab run directory: no meta.json{hint}")
    meta = _json(meta_file)
    try:
        config = Config.from_dict(_json(path / "config.json"))
    except ConfigError as err:
        raise RecordError(f"'{path / 'config.json'}': {err}") from None
    snap = _npz(path / "snapshots.npz", ["epochs"])
    epochs = snap.pop("epochs")
    data = _npz(path / "data.npz", ["x", "y"])
    if meta.get("architecture") == "external":  # condlab.Tracker: layers of a model condlab did not build
        _check_external(path, epochs, snap)
    else:
        _check_shapes(path, config, epochs, snap, data["x"])
    try:
        loss = np.loadtxt(path / "loss.csv", delimiter=",", skiprows=1, ndmin=2)[:, 1]
    except (ValueError, IndexError, OSError):
        raise RecordError(f"'{path / 'loss.csv'}' is not a table of epoch,loss rows: the record is "
                          f"corrupt; {_FIX}") from None
    try:
        spec = RunSpec.from_meta(meta)
        return Run(config, spec, epochs, snap, loss, data["x"], data["y"], status=meta["status"],
                   initial_stage_epoch=meta["initial_stage_epoch"],
                   diverged_epoch=meta["diverged_epoch"], meta=meta, path=path)
    except (KeyError, TypeError) as err:  # TypeError: RunSpec.from_meta missing a required field
        raise RecordError(f"'{meta_file}' lacks a key ({err}): the record is corrupt; {_FIX}") from None
