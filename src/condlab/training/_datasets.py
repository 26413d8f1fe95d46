"""Real image datasets, read offline from their standard files (condlab never downloads).

Point condlab at a directory with ``--data-dir DIR`` or ``CONDLAB_DATA=DIR`` (see `data_root`).
Under that root the loaders look for:

* MNIST (IDX format, each file raw or ``.gz``), in ``root``, ``root/mnist`` or ``root/MNIST/raw``
  (torchvision's layout)::

      train-images-idx3-ubyte  train-labels-idx1-ubyte  t10k-images-idx3-ubyte  t10k-labels-idx1-ubyte

  An IDX file is a big-endian header -- magic 0x00000803 (uint8, 3 dims) for images or 0x00000801
  (uint8, 1 dim) for labels, then one uint32 per dim -- followed by the raw uint8 values.
* CIFAR-10 "python version", in ``root/cifar-10-batches-py`` or ``root``: ``data_batch_1`` ..
  ``data_batch_5`` (train, concatenated in that order) and ``test_batch``.
* CIFAR-100 "python version", in ``root/cifar-100-python`` or ``root``: ``train`` and ``test``.

  Each CIFAR file is a pickle of a dict with b"data", a (N, 3072) uint8 array (the red, green and
  blue 32x32 planes, row-major) and b"labels" (CIFAR-10) or b"fine_labels"/b"coarse_labels"
  (CIFAR-100), lists of ints. Pickles are read with `CifarUnpickler`, which refuses every global
  except the few numpy needs to rebuild an array, so a malicious file cannot run code.

Loaders return ``(x, y)``: x float32 scaled to [0, 1] -- MNIST (n, 784), CIFAR (n, 3, 32, 32) --
and y int64 (n,). ``limit`` keeps the first ``limit`` samples. The ``write_*`` functions write tiny
files in the same formats, for tests. `load_digits_standin` is scikit-learn's bundled 8x8 digits.
"""

from __future__ import annotations

import codecs
import gzip
import os
import pickle
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

ENV_VAR = "CONDLAB_DATA"
_HOWTO = f"condlab never downloads: fetch them yourself and pass --data-dir DIR or set {ENV_VAR}"
_SPLITS = ("train", "test")
XY = tuple[np.ndarray, np.ndarray]  # (inputs x, labels y)


class DatasetMissing(FileNotFoundError):
    """The dataset's files are not where condlab looked."""


class DatasetCorrupt(ValueError):
    """A dataset file exists but is truncated or not in the expected format."""


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle referenced a global that a CIFAR file never needs (it was not loaded)."""


def data_root(data_dir: str | Path | None = None) -> Path:
    """The data directory: `data_dir` (the CLI's --data-dir) if given, else $CONDLAB_DATA."""
    if data_dir is None:
        data_dir = os.environ.get(ENV_VAR) or None
    if data_dir is None:
        raise DatasetMissing(f"no data directory: pass --data-dir DIR or set {ENV_VAR}")
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise DatasetMissing(f"data directory {root} does not exist; pass --data-dir DIR or set {ENV_VAR}")
    return root


def _check_split(split: str, limit: int | None = None) -> None:
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {_SPLITS}, got {split!r}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")


def _locate(
    name: str, expected: str, dirs: list[Path], find: Callable[[Path], list[Path] | None]
) -> list[Path]:
    """The files `find` returns for the first directory of `dirs` that holds them, else DatasetMissing."""
    for d in dirs:
        found = find(d)
        if found is not None:
            return found
    where = ", ".join(str(d) for d in dirs[:-1]) + f" or {dirs[-1]}"
    raise DatasetMissing(f"{name} not found: expected {expected} in {where}; {_HOWTO}")


# ---------------------------------------------------------------------------------------- MNIST

_IDX_IMAGES, _IDX_LABELS = 0x00000803, 0x00000801


def _mnist_names(split: str) -> tuple[str, str]:
    prefix = "train" if split == "train" else "t10k"
    return f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"


def _read_exact(f: BinaryIO, n: int, path: Path, what: str) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise DatasetCorrupt(f"{path} is truncated: expected {n} bytes of {what}, found {len(data)}")
    return data


def _read_idx(path: Path, magic: int, limit: int | None) -> np.ndarray:
    """The first `limit` items (all if None) of an IDX file, as uint8 of shape (n, *item_dims)."""
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            (got,) = struct.unpack(">I", _read_exact(f, 4, path, "IDX magic number"))
            if got != magic:
                raise DatasetCorrupt(f"{path} is not an IDX file: magic 0x{got:08x}, expected 0x{magic:08x}")
            ndim = magic & 0xFF
            dims = struct.unpack(f">{ndim}I", _read_exact(f, 4 * ndim, path, "IDX dimensions"))
            n = dims[0] if limit is None else min(dims[0], limit)
            data = _read_exact(f, n * int(np.prod(dims[1:])), path, f"data ({dims[0]} items in header)")
    except (OSError, EOFError, zlib.error) as e:
        raise DatasetCorrupt(f"cannot read {path}: {e}") from e
    return np.frombuffer(data, dtype=np.uint8).reshape(n, *dims[1:])


def _find_mnist(d: Path, names: tuple[str, str]) -> list[Path] | None:
    found = [next((p for p in (d / n, d / f"{n}.gz") if p.is_file()), None) for n in names]
    return [p for p in found if p is not None] if all(found) else None


def load_mnist(root: str | Path, split: str = "train", limit: int | None = None) -> XY:
    """MNIST from IDX files: x float32 (n, 784) in [0, 1], y int64 (n,)."""
    _check_split(split, limit)
    root, names = Path(root), _mnist_names(split)
    expected = " and ".join(f"{n}[.gz]" for n in names)
    dirs = [root, root / "mnist", root / "MNIST" / "raw"]
    images_path, labels_path = _locate("MNIST", expected, dirs, lambda d: _find_mnist(d, names))
    images = _read_idx(images_path, _IDX_IMAGES, limit)
    labels = _read_idx(labels_path, _IDX_LABELS, limit)
    if images.shape[1:] != (28, 28):
        raise DatasetCorrupt(f"{images_path}: images are {images.shape[1:]}, expected (28, 28)")
    if len(images) != len(labels):
        raise DatasetCorrupt(f"{images_path} has {len(images)} images but {labels_path} {len(labels)} labels")
    x = images.reshape(len(images), 784).astype(np.float32) / 255.0
    return x, labels.astype(np.int64)


def write_mnist(
    root: str | Path, x_uint8: np.ndarray, y: np.ndarray, split: str = "train", gz: bool = False
) -> list[Path]:
    """Write images (n, 28, 28) and labels (n,) as the split's two IDX files in `root`."""
    _check_split(split)
    x, y = np.asarray(x_uint8, dtype=np.uint8), np.asarray(y, dtype=np.uint8)
    if x.ndim != 3 or x.shape[1:] != (28, 28) or y.shape != (len(x),):
        raise ValueError(f"need x (n, 28, 28) and y (n,), got {x.shape} and {y.shape}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, magic, arr in zip(_mnist_names(split), (_IDX_IMAGES, _IDX_LABELS), (x, y), strict=True):
        path = root / (name + ".gz" if gz else name)
        header = struct.pack(f">I{arr.ndim}I", magic, *arr.shape)
        with (gzip.open if gz else open)(path, "wb") as f:
            f.write(header + arr.tobytes())
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------- CIFAR


def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    # Python 3 writes bytes into protocol-2 pickles as _codecs.encode(text, "latin1").
    if encoding != "latin1":
        raise UnsafePickleError(f"refusing _codecs.encode with encoding {encoding!r}")
    return codecs.encode(text, "latin1")


def _empty_bytes(*args: Any) -> bytes:
    # ... and an empty bytes object (e.g. the data of an empty array) as __builtin__.bytes().
    if args:
        raise UnsafePickleError("refusing bytes() with arguments")
    return b""


_RECONSTRUCT = np.ndarray.__reduce__(np.zeros(0))[0]  # numpy's _reconstruct, whatever its module
_ALLOWED: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): _latin1_encode,
    ("__builtin__", "bytes"): _empty_bytes,
    ("builtins", "bytes"): _empty_bytes,
}


class CifarUnpickler(pickle.Unpickler):
    """An Unpickler that only resolves the globals a CIFAR file needs (numpy array reconstruction)."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(f"refusing to load global {module}.{name}") from None


def _load_cifar_file(path: Path, label_key: bytes) -> XY:
    """(data uint8 (N, 3072), labels int64 (N,)) from one CIFAR pickle."""
    try:
        with open(path, "rb") as f:
            batch = CifarUnpickler(f, encoding="bytes").load()
    except UnsafePickleError as e:
        raise UnsafePickleError(f"{path}: {e}") from e
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, AttributeError) as e:
        raise DatasetCorrupt(f"{path} is not a readable CIFAR pickle: {e!r}") from e
    if not isinstance(batch, dict) or b"data" not in batch or label_key not in batch:
        raise DatasetCorrupt(f"{path}: expected a dict with keys b'data' and {label_key!r}")
    data, labels = np.asarray(batch[b"data"], dtype=np.uint8), np.asarray(batch[label_key], dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != 3072 or labels.shape != (len(data),):
        raise DatasetCorrupt(f"{path}: data {data.shape}, labels {labels.shape}; expected (N, 3072), (N,)")
    return data, labels


def _load_cifar(
    name: str, expected: str, dirs: list[Path], files: list[str], label_key: bytes, limit: int | None
) -> XY:
    def find(d: Path) -> list[Path] | None:
        return [d / f for f in files] if all((d / f).is_file() for f in files) else None

    xs, ys, have = [], [], 0
    for path in _locate(name, expected, dirs, find):
        if limit is not None and have >= limit:
            break
        data, labels = _load_cifar_file(path, label_key)
        xs.append(data)
        ys.append(labels)
        have += len(data)
    x = np.concatenate(xs) if xs else np.zeros((0, 3072), np.uint8)
    y = np.concatenate(ys) if ys else np.zeros(0, np.int64)
    x, y = x[:limit], y[:limit]
    return x.reshape(len(x), 3, 32, 32).astype(np.float32) / 255.0, y


def _cifar10_files(split: str) -> list[str]:
    return [f"data_batch_{k}" for k in range(1, 6)] if split == "train" else ["test_batch"]


def load_cifar10(root: str | Path, split: str = "train", limit: int | None = None) -> XY:
    """CIFAR-10 (python version): x float32 (n, 3, 32, 32) in [0, 1], y int64 (n,)."""
    _check_split(split, limit)
    root = Path(root)
    expected = "data_batch_1 .. data_batch_5" if split == "train" else "test_batch"
    expected += " (the CIFAR-10 python version, cifar-10-python.tar.gz extracted)"
    dirs = [root / "cifar-10-batches-py", root]
    return _load_cifar("CIFAR-10", expected, dirs, _cifar10_files(split), b"labels", limit)


def load_cifar100(
    root: str | Path, split: str = "train", limit: int | None = None, labels: str = "fine"
) -> XY:
    """CIFAR-100 (python version) with its 100 fine or 20 coarse labels."""
    _check_split(split, limit)
    if labels not in ("fine", "coarse"):
        raise ValueError(f"labels must be 'fine' or 'coarse', got {labels!r}")
    root = Path(root)
    expected = f"{split} (the CIFAR-100 python version, cifar-100-python.tar.gz extracted)"
    dirs = [root / "cifar-100-python", root]
    return _load_cifar("CIFAR-100", expected, dirs, [split], f"{labels}_labels".encode(), limit)


def _cifar_rows(x_uint8: np.ndarray, *labels: np.ndarray) -> tuple[np.ndarray, list[list[int]]]:
    """x as (n, 3072) uint8 rows, and each label array as a list of ints (as in the real files)."""
    x = np.asarray(x_uint8, dtype=np.uint8)
    lists = [[int(v) for v in np.asarray(y).ravel()] for y in labels]
    if x.ndim != 4 or x.shape[1:] != (3, 32, 32) or any(len(v) != len(x) for v in lists):
        raise ValueError(f"need x (n, 3, 32, 32) and n labels, got {x.shape} and {[len(v) for v in lists]}")
    return x.reshape(len(x), 3072), lists


def _write_pickle(path: Path, batch: dict[bytes, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(batch, f, protocol=2)
    return path


def write_cifar10(root: str | Path, x_uint8: np.ndarray, y: np.ndarray, split: str = "train") -> list[Path]:
    """Write CIFAR-10 batches under root/cifar-10-batches-py; train is split over data_batch_1..5."""
    _check_split(split)
    rows, (labels,) = _cifar_rows(x_uint8, y)
    files = _cifar10_files(split)
    chunks = np.array_split(np.arange(len(rows)), len(files))
    folder = Path(root) / "cifar-10-batches-py"
    return [
        _write_pickle(folder / f, {b"data": rows[i], b"labels": [labels[j] for j in i]})
        for f, i in zip(files, chunks, strict=True)
    ]


def write_cifar100(
    root: str | Path, x_uint8: np.ndarray, fine: np.ndarray, coarse: np.ndarray, split: str = "train"
) -> list[Path]:
    """Write a CIFAR-100 file root/cifar-100-python/{train,test}."""
    _check_split(split)
    rows, (fine_list, coarse_list) = _cifar_rows(x_uint8, fine, coarse)
    batch = {b"data": rows, b"fine_labels": fine_list, b"coarse_labels": coarse_list}
    return [_write_pickle(Path(root) / "cifar-100-python" / split, batch)]


# --------------------------------------------------------------------------------------- digits


def load_digits_standin() -> XY:
    """scikit-learn's bundled 8x8 digits (no download): x float32 (1797, 64) in [0, 1], y int64."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:
        raise ImportError("the digits stand-in needs scikit-learn: pip install scikit-learn") from e
    digits = load_digits()
    return (digits.data / 16.0).astype(np.float32), digits.target.astype(np.int64)
