"""Run records: one directory per run, files a user can open.

    RUN_DIR/
      config.json      the resolved config of this one run (one seed, one lr, one init_std)
      meta.json        seed, lr, init_std, status, initial-stage epoch, snapshot layers, versions, commit
      loss.npy         (E + 1,) float64: the loss (eq. 3) at every epoch (loss.csv before format 3)
      data.npz         x (n, d), y (n, d_out): the training set
      snapshots/
        epochs.npy     (S,) the snapshot epochs
        layer1.npy ... layerL.npy, output.npy
                       (S, rows, cols) in the training dtype, bias = last column
      (thinned records, train.snapshot_neurons = K > 0, add:)
        neurons.npy    (K,) the hidden neurons whose rows layer1.npy .. layerL.npy hold
        full/epochs.npy, full/layer1.npy ...   every weight in full at epoch 0 and the last epoch

Snapshots are plain uncompressed ``.npy`` files, one per layer, read back memory-mapped by
``_record_load.load_run``, which reads no snapshot (``Run.layer(name, epoch)`` reads one layer
at one epoch) and still reads records of format 2 (loss.csv) and condlab 0.1.0 (snapshots.npz).

A run directory is assembled under ``NAME.partial`` and renamed when complete. Before any
rename, everything written is put on disk (one ``syncfs`` for a whole batch, ``_io.durable``;
a sweep writes the files but meta.json, ``write_bodies``, then the meta.json files and
syncs, ``commit_runs``);
one fsync of the parent directory then makes the renames durable. A crash leaves complete
runs under their names and ``.partial`` directories, which ``load_run`` refuses.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._display import ShownAsPage
from ..training import Config
from ._files import fill_file, json_indent2, npz_bytes, save_npy, write_file
from ._io import durable, fsync_path

if TYPE_CHECKING:
    import torch

    from ..training import Architecture, FCNet
    from ._prepare import Known

STATUSES = ("complete", "diverged", "interrupted")
RECORD_FORMAT = 3  # 3: loss.npy (2: loss.csv; 1, condlab 0.1.0: snapshots.npz)


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
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # scalars: no deep copy

    @classmethod
    def from_meta(cls, meta: dict) -> RunSpec:
        """From a run's meta.json; records written before a field existed get its default."""
        names = [f.name for f in dataclasses.fields(cls)]
        return cls(**{k: meta[k] for k in names if k in meta})


@dataclass
class Run(ShownAsPage):
    """One trained run: its config, loss curve, and the weight snapshots of every layer.

    ``weights[name]`` is (S, rows, cols) at ``epochs`` (memory-mapped for a loaded run). In a
    thinned record hidden layers there hold only the rows of ``neurons``, and every weight
    is in ``full_weights`` at ``full_epochs``; otherwise those are ``weights`` and ``epochs``.
    """

    config: Config
    spec: RunSpec
    epochs: np.ndarray                       # (S,)
    weights: Mapping[str, np.ndarray]        # name -> (S, rows, cols)
    loss: np.ndarray                         # (E + 1,)
    x: np.ndarray                            # (n, d)
    y: np.ndarray                            # (n, d_out)
    status: str = "complete"
    initial_stage_epoch: int | None = None   # first epoch with loss <= 70% of its initial value
    diverged_epoch: int | None = None
    meta: dict = field(default_factory=dict)
    path: Path | None = None
    neurons: np.ndarray | None = None        # (K,) hidden rows held at thinned epochs; None: all
    full_epochs: np.ndarray = None           # type: ignore[assignment]  # (F,); default: epochs
    full_weights: Mapping[str, np.ndarray] = None  # type: ignore[assignment]  # default: weights

    def __post_init__(self) -> None:
        if self.full_epochs is None:
            self.full_epochs = self.epochs
        if self.full_weights is None:
            self.full_weights = self.weights

    @property
    def architecture(self) -> Architecture:
        from ..training import Architecture

        return Architecture.from_config(self.config.model, self.config.data.d)

    @property
    def names(self) -> list[str]:
        """Layer names, 'layer1' .. 'layerL', 'output'."""
        return list(self.full_weights)

    def index(self, epoch: int) -> int:
        """Position of a recorded epoch in `epochs`; a clear error lists the recorded ones."""
        hits = np.nonzero(self.epochs == epoch)[0]
        if not hits.size:
            shown = ", ".join(str(e) for e in self.epochs[:12]) + (" ..." if len(self.epochs) > 12 else "")
            raise ValueError(f"epoch {epoch} was not recorded: snapshots exist at {shown}")
        return int(hits[0])

    def is_full(self, epoch: int) -> bool:
        """Whether every weight was recorded at `epoch` (always, unless the record is thinned)."""
        return bool(np.any(self.full_epochs == epoch))

    def layer(self, name: str, epoch: int) -> np.ndarray:
        """Input weights of layer `name` ('layer1'.., 'output') at `epoch`: a (rows, cols) copy.

        At a thinned epoch a hidden layer gives only the rows ``rows(name, epoch)``.
        """
        if name not in self.full_weights:
            raise ValueError(f"unknown layer '{name}': this run has {', '.join(self.full_weights)}")
        i = self.index(epoch)
        if self.is_full(epoch):
            return np.array(self.full_weights[name][int(np.nonzero(self.full_epochs == epoch)[0][0])])
        return np.array(self.weights[name][i])

    def rows(self, name: str, epoch: int) -> np.ndarray:
        """Row indices (into the whole layer) of what ``layer(name, epoch)`` returns."""
        if self.neurons is None or self.is_full(epoch) or name == "output":
            return np.arange(self.full_weights[name].shape[1])
        return self.neurons

    def network(self, epoch: int, dtype: torch.dtype | None = None) -> FCNet:
        """The network at a recorded epoch (a full one, for thinned records) as an nn.Module
        (float64 unless `dtype` says otherwise)."""
        import torch

        from ..training import FCNet

        self.index(epoch)
        if not self.is_full(epoch):
            full = ", ".join(str(e) for e in self.full_epochs)
            raise ValueError(f"epoch {epoch} holds {len(self.neurons)} of {self.config.model.width} "
                             f"neurons (train.snapshot_neurons); the whole network is recorded at "
                             f"epochs {full}")
        i = int(np.nonzero(self.full_epochs == epoch)[0][0])
        return FCNet(self.architecture,
                     [torch.as_tensor(np.array(self.full_weights[k][i]), dtype=dtype or torch.float64)
                      for k in self.names])


@dataclass
class RunResult(ShownAsPage):
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
    """Write one run directory atomically and set ``run.path``."""
    return write_runs([run], [Path(path)])[0]


def write_runs(runs: Sequence[Run], paths: Sequence[Path],
               prepared: Sequence[str] | None = None) -> list[Path]:
    """Write run directories: all assembled as .partial, put on disk once, then renamed.

    `prepared`: ``prepare_runs(paths, prepared)`` made the directories and these empty files.
    """
    return commit_runs(runs, paths, *write_bodies(runs, paths, prepared), prepared)


def write_bodies(runs: Sequence[Run], paths: Sequence[Path], prepared: Sequence[str] | None = None,
                 take: Iterator[int] | None = None, known: Known | None = None
                 ) -> tuple[list[str], list[str]]:
    """Every file of each run directory except meta.json, into ``NAME.partial``.

    The first half of ``write_runs``: a sweep writes these while it measures the runs, whose
    measurements go into meta.json. `take`: an iterator of run indices shared by several
    threads, each writing the runs it takes (``next`` on a built-in iterator is atomic), else
    every run. `known`: the config.json and data.npz files that ``fill_known`` wrote into the
    prepared directories, kept where they hold what these runs would write. Returns
    (every run's .partial directory, the files this call wrote), for ``commit_runs``.
    """
    partials = [f"{os.fspath(path)}.partial" for path in paths]
    files: list[str] = []
    npz_cache: dict = {}
    keep = None if prepared is None else [name for name in prepared if name != "meta.json"]
    for i in range(len(runs)) if take is None else take:
        partial = partials[i]
        if prepared is None:
            shutil.rmtree(partial, ignore_errors=True)
            os.makedirs(f"{partial}/snapshots")
        same = None if known is None else known.holds(i, runs[i])
        written = _write_body(runs[i], partial, npz_cache, fresh=prepared is None, known=same)
        if keep is not None:  # meta.json is commit_runs' to write
            _drop_unwritten(partial, keep, written)
        files += written
    return partials, files


def commit_runs(runs: Sequence[Run], paths: Sequence[Path], partials: Sequence[str], files: list[str],
                prepared: Sequence[str] | None = None, metas: Sequence[bytes] | None = None) -> list[Path]:
    """The second half of ``write_runs``: each run's meta.json (`metas`, else ``meta_bytes`` of
    the run now), everything on disk with one ``durable``, then each ``NAME.partial`` renamed."""
    write = write_file if prepared is None else fill_file
    files = list(files)
    metas = [meta_bytes(run) for run in runs] if metas is None else metas
    for meta, partial in zip(metas, partials, strict=True):
        files.append(write(f"{partial}/meta.json", meta))
    # a relative path's dirname is '' ("here"): stat '.' then, not ''
    durable(files, _dirs(runs, partials), roots={os.path.dirname(p) or "." for p in partials})
    for run, path, partial in zip(runs, paths, partials, strict=True):
        path = Path(path)
        if path.exists():
            shutil.rmtree(path)
        os.replace(partial, path)
        run.path = path
    for parent in {Path(p).parent for p in paths}:
        fsync_path(parent)  # the renames themselves
    return [Path(p) for p in paths]


def _dirs(runs: Sequence[Run], partials: Sequence[str]) -> list[str]:
    """The directories of the runs' .partial trees."""
    return [d for p, run in zip(partials, runs, strict=True)
            for d in (p, f"{p}/snapshots", *((f"{p}/snapshots/full",) if run.neurons is not None else ()))]


def _drop_unwritten(partial: str, prepared: Sequence[str], written: list[str]) -> None:
    """Remove prepared files that a run has not (its layers differ): never an empty stray."""
    done = set(written)
    for name in prepared:
        if f"{partial}/{name}" not in done:
            Path(partial, name).unlink(missing_ok=True)


def _write_body(run: Run, d: str, npz_cache: dict | None = None, fresh: bool = True,
                known: tuple[bool, bool] | None = None) -> list[str]:
    """Every file of a run directory but meta.json into `d` (its snapshots/ made by the caller);
    returns the paths (not yet synced). `fresh`: files there may hold older bytes (else they
    are empty). `npz_cache` (of one write_bodies call) keeps data.npz's bytes for runs that
    share x and y. `known`: whether config.json and data.npz already hold this run's bytes
    (``_record_prepare.fill_known``); those that do not are replaced.
    """
    write = write_file if fresh else fill_file
    config, data = f"{d}/config.json", f"{d}/data.npz"
    if known is None or not known[0]:
        (write if known is None else write_file)(config, json_indent2(run.config.to_dict()).encode())
    if known is None or not known[1]:
        npz = npz_bytes(run.x, run.y, {} if npz_cache is None else npz_cache)
        (write if known is None else write_file)(data, npz)
    written = [config, save_npy(f"{d}/loss.npy", np.ascontiguousarray(run.loss, dtype=np.float64), write),
               data]
    snap = f"{d}/snapshots"
    written += _save_layers(snap, run.epochs, run.weights, write)
    if run.neurons is not None:
        written.append(save_npy(f"{snap}/neurons.npy", run.neurons, write))
        os.mkdir(f"{snap}/full")
        written += _save_layers(f"{snap}/full", run.full_epochs, run.full_weights, write)
    return written


def meta_bytes(run: Run) -> bytes:
    """The bytes of a run's meta.json, from ``run.meta`` as it is now."""
    return (json_indent2(_meta(run), _plain) + "\n").encode()


def _meta(run: Run) -> dict:
    """meta.json of a run: its spec, status, stage and snapshot facts, then ``run.meta``."""
    return {
        **run.spec.to_dict(),
        "status": run.status, "initial_stage_epoch": run.initial_stage_epoch,
        "diverged_epoch": run.diverged_epoch, "snapshot_epochs": run.epochs.tolist(),
        "record_format": RECORD_FORMAT, "snapshot_layers": list(run.weights),
        "snapshot_neurons": 0 if run.neurons is None else len(run.neurons),
        "full_snapshot_epochs": np.asarray(run.full_epochs).tolist(),
        **run.meta,
    }


def _save_layers(d: str, epochs: np.ndarray, weights: Mapping[str, np.ndarray], write=None) -> list[str]:
    out = [save_npy(f"{d}/epochs.npy", np.asarray(epochs, dtype=np.int64), write)]
    for name, array in weights.items():
        out.append(save_npy(f"{d}/{name}.npy", array, write))
    return out


def _plain(obj):
    from ._io import _jsonable

    return _jsonable(obj)
