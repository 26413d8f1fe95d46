"""Reading run records (``load_run``): the files ``_records`` writes, snapshots mapped lazily.

Every missing, truncated or altered part raises ``RecordError`` naming the file; no file is
ever unpickled. Records of every format load: 3 (loss.npy), 2 (loss.csv), and condlab
0.1.0's one compressed snapshots.npz (read whole).
"""

from __future__ import annotations

import json
import zipfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..training import Config, ConfigError, layer_names, layer_shapes
from ._records import Run, RunSpec


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


def _layout(config: Config) -> dict[str, tuple[int, int]]:
    """name -> (rows, cols) of each weight matrix of the run's network (Architecture's, no torch)."""
    m = config.model
    shapes = layer_shapes(config.data.d, m.width, m.depth, m.d_out, m.output_bias)
    return dict(zip(layer_names(m.depth), shapes, strict=True))


def _check_shapes(path: Path, config: Config, epochs: np.ndarray, weights: dict, x: np.ndarray) -> None:
    if epochs.ndim != 1:
        raise RecordError(f"'{path / 'snapshots.npz'}': epochs has shape {epochs.shape}, expected (S,)")
    for name, (rows, cols) in _layout(config).items():
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


class LazyLayers(Mapping[str, np.ndarray]):
    """name -> the (S, rows, cols) array of DIR/name.npy, memory-mapped when first asked for.

    `shapes` (name -> (rows, cols), or None to check only (S, ., .)) is checked on first access.
    `extra_ok`: a file may hold snapshots past the S listed (a Tracker record whose writer was
    killed between a layer's append and epochs.npy); they are left out.
    """

    def __init__(self, directory: Path, names: Sequence[str], count: int,
                 shapes: dict[str, tuple[int, int]] | None = None, extra_ok: bool = False):
        self.directory, self._names, self._count, self._shapes = directory, list(names), count, shapes
        self._extra_ok = extra_ok
        self._open: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._open:
            path = self.directory / f"{name}.npy"
            array = _load_npy(path, mmap=True)
            if self._extra_ok and array.ndim == 3 and array.shape[0] > self._count:
                array = array[:self._count]
            want = (self._count, *self._shapes[name]) if self._shapes else None
            bad = array.ndim != 3 or array.shape[0] != self._count or (want and array.shape != want)
            if bad or not np.issubdtype(array.dtype, np.floating):
                expected = want or (self._count, "rows", "cols")
                raise RecordError(f"'{path}' has shape {array.shape} ({array.dtype}), expected float "
                                  f"{expected}: the record is corrupt; {_FIX}")
            self._open[name] = array
        return self._open[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _load_npy(path: Path, mmap: bool = False) -> np.ndarray:
    """np.load without pickles; a missing or damaged file is named in a one-line RecordError."""
    if not path.is_file():
        raise RecordError(f"'{path}' is missing: the run record is incomplete; {_FIX}")
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, EOFError) as err:
        if "pickle" in str(err):  # numpy's message suggests unsafe loading: never
            raise RecordError(f"'{path}' holds pickled Python objects or other data, not a numeric "
                              "array, so condlab does not load it: it is not a condlab record or was "
                              "altered") from None
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise RecordError(f"'{path}' is not a readable .npy file ({first}): the record is corrupt; "
                          f"{_FIX}") from None


def _snapshots_v2(snap: Path, meta: dict, config: Config) -> tuple[np.ndarray, Mapping, dict]:
    """epochs, lazy weights and the thinning fields of a record written by condlab >= 0.2."""
    external = meta.get("architecture") == "external"
    full_shapes = None if external else _layout(config)
    names = meta["snapshot_layers"] if "snapshot_layers" in meta else list(full_shapes)  # type: ignore[arg-type]
    epochs = _load_npy(snap / "epochs.npy")
    if not (snap / "neurons.npy").is_file():
        return epochs, LazyLayers(snap, names, len(epochs), full_shapes, extra_ok=external), {}
    neurons = _load_npy(snap / "neurons.npy")
    thin_shapes = None if full_shapes is None else {
        k: (len(neurons) if k != "output" else rows, cols) for k, (rows, cols) in full_shapes.items()}
    full_epochs = _load_npy(snap / "full" / "epochs.npy")
    return epochs, LazyLayers(snap, names, len(epochs), thin_shapes), {
        "neurons": neurons, "full_epochs": full_epochs,
        "full_weights": LazyLayers(snap / "full", names, len(full_epochs), full_shapes)}


def _loss(path: Path) -> np.ndarray:
    """The loss curve (E + 1,): loss.npy, or loss.csv in records written before format 3."""
    if (path / "loss.npy").exists() or not (path / "loss.csv").exists():
        loss = _load_npy(path / "loss.npy")
        if loss.ndim != 1 or not np.issubdtype(loss.dtype, np.floating):
            raise RecordError(f"'{path / 'loss.npy'}' has shape {loss.shape} ({loss.dtype}), expected "
                              f"float (epochs + 1,): the record is corrupt; {_FIX}")
        return loss
    try:
        return np.loadtxt(path / "loss.csv", delimiter=",", skiprows=1, ndmin=2)[:, 1]
    except (ValueError, IndexError, OSError):
        raise RecordError(f"'{path / 'loss.csv'}' is not a table of epoch,loss rows: the record is "
                          f"corrupt; {_FIX}") from None


def load_run(path: str | Path) -> Run:
    """Read a run directory written by condlab; snapshots stay on disk until used.

    A missing or corrupt part raises RecordError naming the file.
    """
    path = Path(path)
    meta_file = path / "meta.json"
    if path.name.endswith(".partial"):
        raise FileNotFoundError(f"'{path}' is an unfinished run: its .partial directory was never "
                                "completed (renamed)")
    if not meta_file.is_file():
        raise FileNotFoundError(f"'{path}' is not a condlab run directory: no meta.json")
    meta = _json(meta_file)
    try:
        config = Config.from_dict(_json(path / "config.json"))
    except ConfigError as err:
        raise RecordError(f"'{path / 'config.json'}': {err}") from None
    data = _npz(path / "data.npz", ["x", "y"])
    thin: dict = {}
    if (path / "snapshots").is_dir():
        epochs, weights, thin = _snapshots_v2(path / "snapshots", meta, config)
    else:  # condlab 0.1.0: one compressed snapshots.npz, read whole
        snap = _npz(path / "snapshots.npz", ["epochs"])
        epochs = snap.pop("epochs")
        if meta.get("architecture") == "external":  # condlab.Tracker: layers condlab did not build
            _check_external(path, epochs, snap)
        else:
            _check_shapes(path, config, epochs, snap, data["x"])
        weights = snap
    loss = _loss(path)
    try:
        spec = RunSpec.from_meta(meta)
        return Run(config, spec, epochs, weights, loss, data["x"], data["y"], status=meta["status"],
                   initial_stage_epoch=meta["initial_stage_epoch"],
                   diverged_epoch=meta["diverged_epoch"], meta=meta, path=path, **thin)
    except (KeyError, TypeError) as err:  # TypeError: RunSpec.from_meta missing a required field
        raise RecordError(f"'{meta_file}' lacks a key ({err}): the record is corrupt; {_FIX}") from None
