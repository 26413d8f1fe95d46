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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ._config import Config
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


def load_run(path: str | Path) -> Run:
    """Read a run directory written by ``condlab train``."""
    path = Path(path)
    meta_file = path / "meta.json"
    if not meta_file.is_file():
        hint = " (an unfinished run: its .partial directory was never completed)" if \
            path.name.endswith(".partial") else ""
        raise FileNotFoundError(f"'{path}' is not a condlab run directory: no meta.json{hint}")
    meta = json.loads(meta_file.read_text())
    config = Config.from_dict(json.loads((path / "config.json").read_text()))
    with np.load(path / "snapshots.npz") as snap:
        epochs = snap["epochs"]
        weights = {k: snap[k] for k in snap.files if k != "epochs"}
    with np.load(path / "data.npz") as data:
        x, y = data["x"], data["y"]
    loss = np.loadtxt(path / "loss.csv", delimiter=",", skiprows=1, ndmin=2)[:, 1]
    spec = RunSpec.from_meta(meta)
    return Run(config, spec, epochs, weights, loss, x, y, status=meta["status"],
               initial_stage_epoch=meta["initial_stage_epoch"],
               diverged_epoch=meta["diverged_epoch"], meta=meta, path=path)
