"""Real-dataset loaders: tiny files in the standard formats, written and read back offline."""

from __future__ import annotations

import gzip
import io
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from condlab.training._datasets import (
    CifarUnpickler,
    DatasetCorrupt,
    DatasetMissing,
    data_root,
    load_cifar10,
    load_cifar100,
    load_digits_standin,
    load_mnist,
    write_cifar10,
    write_cifar100,
    write_mnist,
)


def _images(n: int, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, *shape), dtype=np.uint8)


def _labels(n: int, k: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, k, size=n)


# ---------------------------------------------------------------------------------------- MNIST


@pytest.mark.parametrize("layout", [".", "mnist", "MNIST/raw"])
@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("split", ["train", "test"])
def test_mnist_roundtrip(tmp_path: Path, layout: str, gz: bool, split: str) -> None:
    x, y = _images(7, (28, 28)), _labels(7, 10)
    paths = write_mnist(tmp_path / layout, x, y, split=split, gz=gz)
    prefix = "train" if split == "train" else "t10k"
    suffix = ".gz" if gz else ""
    names = [f"{prefix}-images-idx3-ubyte{suffix}", f"{prefix}-labels-idx1-ubyte{suffix}"]
    assert [p.name for p in paths] == names
    xs, ys = load_mnist(tmp_path, split=split)
    assert xs.dtype == np.float32 and xs.shape == (7, 784)
    assert ys.dtype == np.int64 and ys.shape == (7,)
    np.testing.assert_array_equal(np.rint(xs * 255).astype(np.uint8), x.reshape(7, 784))
    np.testing.assert_array_equal(ys, y)
    assert xs.min() >= 0.0 and xs.max() <= 1.0


def test_mnist_idx_header(tmp_path: Path) -> None:
    x, y = _images(3, (28, 28)), _labels(3, 10)
    images, labels = write_mnist(tmp_path, x, y)
    raw = images.read_bytes()
    assert raw[:4] == b"\x00\x00\x08\x03" and raw[4:16] == bytes([0, 0, 0, 3, 0, 0, 0, 28, 0, 0, 0, 28])
    assert len(raw) == 16 + 3 * 784
    assert labels.read_bytes()[:8] == b"\x00\x00\x08\x01\x00\x00\x00\x03"


def test_mnist_scaling_extremes(tmp_path: Path) -> None:
    x = np.zeros((2, 28, 28), np.uint8)
    x[1] = 255
    write_mnist(tmp_path, x, np.array([3, 9]))
    xs, ys = load_mnist(tmp_path)
    assert xs[0].max() == 0.0 and xs[1].min() == 1.0
    assert ys.tolist() == [3, 9]


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_limit(tmp_path: Path, gz: bool) -> None:
    x, y = _images(10, (28, 28)), _labels(10, 10)
    write_mnist(tmp_path, x, y, gz=gz)
    xs, ys = load_mnist(tmp_path, limit=4)
    np.testing.assert_array_equal(np.rint(xs * 255).astype(np.uint8), x[:4].reshape(4, 784))
    np.testing.assert_array_equal(ys, y[:4])
    assert load_mnist(tmp_path, limit=100)[0].shape == (10, 784)
    assert load_mnist(tmp_path, limit=0)[0].shape == (0, 784)


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_truncated_file_names_it(tmp_path: Path, gz: bool) -> None:
    images, _ = write_mnist(tmp_path, _images(5, (28, 28)), _labels(5, 10), gz=gz)
    raw = gzip.decompress(images.read_bytes()) if gz else images.read_bytes()
    cut = raw[: 16 + 2 * 784 + 100]
    images.write_bytes(gzip.compress(cut) if gz else cut)
    with pytest.raises(DatasetCorrupt, match="truncated") as err:
        load_mnist(tmp_path)
    assert str(images) in str(err.value)
    # a limit within what is present still reads fine
    assert load_mnist(tmp_path, limit=2)[0].shape == (2, 784)


def test_mnist_corrupt_files(tmp_path: Path) -> None:
    images, labels = write_mnist(tmp_path, _images(2, (28, 28)), _labels(2, 10))
    images.write_bytes(b"\x00\x00\x08\x01" + images.read_bytes()[4:])
    with pytest.raises(DatasetCorrupt, match="magic") as err:
        load_mnist(tmp_path)
    assert str(images) in str(err.value)
    images.write_bytes(b"\x00\x00")
    with pytest.raises(DatasetCorrupt, match="truncated"):
        load_mnist(tmp_path)
    images.unlink()
    gz_images = tmp_path / "train-images-idx3-ubyte.gz"
    gz_images.write_bytes(b"not gzip at all")
    with pytest.raises(DatasetCorrupt, match="cannot read") as err:
        load_mnist(tmp_path)
    assert str(gz_images) in str(err.value)


def test_mnist_count_mismatch(tmp_path: Path) -> None:
    write_mnist(tmp_path, _images(3, (28, 28)), _labels(3, 10))
    write_mnist(tmp_path / "other", _images(2, (28, 28)), _labels(2, 10))
    (tmp_path / "other" / "train-labels-idx1-ubyte").replace(tmp_path / "train-labels-idx1-ubyte")
    with pytest.raises(DatasetCorrupt, match="3 images but"):
        load_mnist(tmp_path)


def test_mnist_missing_message(tmp_path: Path) -> None:
    write_mnist(tmp_path, _images(1, (28, 28)), _labels(1, 10))
    (tmp_path / "train-labels-idx1-ubyte").unlink()  # half a dataset is still missing
    with pytest.raises(DatasetMissing) as err:
        load_mnist(tmp_path)
    msg = str(err.value)
    assert isinstance(err.value, FileNotFoundError)
    assert "train-images-idx3-ubyte[.gz]" in msg and "train-labels-idx1-ubyte[.gz]" in msg
    for d in (tmp_path, tmp_path / "mnist", tmp_path / "MNIST" / "raw"):
        assert str(d) in msg
    assert "--data-dir" in msg and "CONDLAB_DATA" in msg
    with pytest.raises(DatasetMissing, match="t10k-images-idx3-ubyte"):
        load_mnist(tmp_path, split="test")


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="split"):
        load_mnist(tmp_path, split="validation")
    with pytest.raises(ValueError, match="limit"):
        load_cifar10(tmp_path, limit=-1)
    with pytest.raises(ValueError, match="fine"):
        load_cifar100(tmp_path, labels="medium")
    with pytest.raises(ValueError, match="28, 28"):
        write_mnist(tmp_path, _images(2, (8, 8)), _labels(2, 10))


# ---------------------------------------------------------------------------------------- CIFAR


def test_cifar10_train_concatenates_batches_in_order(tmp_path: Path) -> None:
    x, y = _images(13, (3, 32, 32)), _labels(13, 10)
    paths = write_cifar10(tmp_path, x, y)
    assert [p.name for p in paths] == [f"data_batch_{k}" for k in range(1, 6)]
    assert all(p.parent == tmp_path / "cifar-10-batches-py" for p in paths)
    xs, ys = load_cifar10(tmp_path)
    assert xs.dtype == np.float32 and xs.shape == (13, 3, 32, 32)
    assert ys.dtype == np.int64
    np.testing.assert_array_equal(np.rint(xs * 255).astype(np.uint8), x)
    np.testing.assert_array_equal(ys, y)
    # each batch holds the next block of rows, and the loader reads them in file order
    start = 0
    for p in paths:
        batch = _unpickle(p)
        n = len(batch[b"labels"])
        np.testing.assert_array_equal(batch[b"data"], x[start : start + n].reshape(n, 3072))
        start += n
    assert start == 13 and all(len(_unpickle(p)[b"labels"]) > 0 for p in paths)


def test_cifar10_tiny_batches_and_limit(tmp_path: Path) -> None:
    x, y = _images(3, (3, 32, 32)), _labels(3, 10)
    write_cifar10(tmp_path, x, y)  # two of the five batches are empty
    np.testing.assert_array_equal(load_cifar10(tmp_path)[1], y)
    xs, ys = load_cifar10(tmp_path, limit=2)
    assert xs.shape == (2, 3, 32, 32)
    np.testing.assert_array_equal(ys, y[:2])


def test_cifar10_test_split_and_flat_layout(tmp_path: Path) -> None:
    x, y = _images(4, (3, 32, 32)), _labels(4, 10)
    (path,) = write_cifar10(tmp_path, x, y, split="test")
    assert path.name == "test_batch"
    path.replace(tmp_path / "test_batch")  # files directly in root
    xs, ys = load_cifar10(tmp_path, split="test")
    np.testing.assert_array_equal(np.rint(xs * 255).astype(np.uint8), x)
    np.testing.assert_array_equal(ys, y)
    assert xs.min() >= 0.0 and xs.max() <= 1.0


def test_cifar_file_matches_original_layout(tmp_path: Path) -> None:
    x = _images(2, (3, 32, 32))
    (path,) = write_cifar10(tmp_path, x, [1, 2], split="test")
    assert path.read_bytes()[:2] == b"\x80\x02"  # protocol 2
    batch = _unpickle(path)
    assert batch[b"data"].dtype == np.uint8 and batch[b"data"].shape == (2, 3072)
    assert batch[b"labels"] == [1, 2] and all(type(v) is int for v in batch[b"labels"])
    # row-major RGB planes: the first 1024 values of a row are the red plane
    np.testing.assert_array_equal(batch[b"data"][0, :1024], x[0, 0].ravel())


def test_cifar100_fine_and_coarse(tmp_path: Path) -> None:
    x, fine, coarse = _images(6, (3, 32, 32)), _labels(6, 100), _labels(6, 20, seed=2)
    for split in ("train", "test"):
        (path,) = write_cifar100(tmp_path, x, fine, coarse, split=split)
        assert path == tmp_path / "cifar-100-python" / split
        xs, ys = load_cifar100(tmp_path, split=split)
        np.testing.assert_array_equal(np.rint(xs * 255).astype(np.uint8), x)
        np.testing.assert_array_equal(ys, fine)
        np.testing.assert_array_equal(load_cifar100(tmp_path, split=split, labels="coarse")[1], coarse)
    assert load_cifar100(tmp_path, limit=3)[0].shape == (3, 3, 32, 32)


def test_cifar_missing_message(tmp_path: Path) -> None:
    write_cifar10(tmp_path, _images(5, (3, 32, 32)), _labels(5, 10))
    (tmp_path / "cifar-10-batches-py" / "data_batch_5").unlink()
    with pytest.raises(DatasetMissing) as err:
        load_cifar10(tmp_path)
    msg = str(err.value)
    assert "data_batch_1 .. data_batch_5" in msg and "CONDLAB_DATA" in msg
    assert str(tmp_path / "cifar-10-batches-py") in msg and f"or {tmp_path};" in msg
    with pytest.raises(DatasetMissing, match="cifar-100-python"):
        load_cifar100(tmp_path, split="test")


def test_cifar_corrupt_file(tmp_path: Path) -> None:
    (path,) = write_cifar10(tmp_path, _images(2, (3, 32, 32)), [0, 1], split="test")
    path.write_bytes(path.read_bytes()[:50])
    with pytest.raises(DatasetCorrupt) as err:
        load_cifar10(tmp_path, split="test")
    assert str(path) in str(err.value)
    path.write_bytes(pickle.dumps({b"labels": [0]}, protocol=2))
    with pytest.raises(DatasetCorrupt, match="b'data'"):
        load_cifar10(tmp_path, split="test")


class _Py2Pickler(pickle._Pickler):  # type: ignore[name-defined]
    """Writes bytes as Python 2 str (BINSTRING), as in the original CIFAR files made by Python 2."""

    dispatch = dict(pickle._Pickler.dispatch)  # type: ignore[attr-defined]

    def save_bytes(self, obj: bytes) -> None:
        self.write(pickle.BINSTRING + len(obj).to_bytes(4, "little") + obj)
        self.memoize(obj)

    dispatch[bytes] = save_bytes


def test_cifar_loads_python2_numpy1_style_pickle(tmp_path: Path) -> None:
    x, y = _images(3, (3, 32, 32)), [4, 0, 9]
    buf = io.BytesIO()
    _Py2Pickler(buf, protocol=2).dump(
        {
            b"batch_label": b"testing batch 1 of 1",
            b"data": x.reshape(3, 3072),
            b"labels": y,
            b"filenames": [b"a.png", b"b.png", b"c.png"],
        }
    )
    raw = buf.getvalue()
    assert b"_codecs" not in raw and b"cnumpy._core.multiarray\n_reconstruct" in raw
    (tmp_path / "test_batch").write_bytes(raw.replace(b"cnumpy._core.", b"cnumpy.core."))  # numpy 1 name
    # no DeprecationWarning from touching numpy.core (pytest turns warnings into errors)
    xs, ys = load_cifar10(tmp_path, split="test")
    np.testing.assert_array_equal(np.rint(xs * 255).astype(np.uint8), x)
    assert ys.tolist() == y


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def test_restricted_unpickler_rejects_malicious_pickle(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    batch = {b"data": np.zeros((1, 3072), np.uint8), b"labels": [_Exploit(marker)]}
    path = tmp_path / "test_batch"
    path.write_bytes(pickle.dumps(batch, protocol=2))
    with pytest.raises(pickle.UnpicklingError, match=r"refusing to load global (posix|nt|os)\.system") as err:
        load_cifar10(tmp_path, split="test")
    assert str(path) in str(err.value)
    assert not marker.exists()
    with pytest.raises(pickle.UnpicklingError, match=r"refusing to load global (__builtin__|builtins)\.eval"):
        CifarUnpickler(io.BytesIO(pickle.dumps(eval, protocol=2)), encoding="bytes").load()


def test_restricted_unpickler_limits_codecs(tmp_path: Path) -> None:
    # _codecs.encode is allowed only as the latin1 byte-string shim protocol 2 uses
    evil = b"\x80\x02c_codecs\nencode\nX\x03\x00\x00\x00abcX\x06\x00\x00\x00base64\x86R."
    with pytest.raises(pickle.UnpicklingError, match="base64"):
        CifarUnpickler(io.BytesIO(evil), encoding="bytes").load()


def _unpickle(path: Path) -> dict:
    with open(path, "rb") as f:
        return CifarUnpickler(f, encoding="bytes").load()


# ------------------------------------------------------------------------------- root and digits


def test_data_root_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit, env = tmp_path / "explicit", tmp_path / "env"
    explicit.mkdir()
    env.mkdir()
    monkeypatch.setenv("CONDLAB_DATA", str(env))
    assert data_root(explicit) == explicit
    assert data_root(str(explicit)) == explicit
    assert data_root() == env
    monkeypatch.delenv("CONDLAB_DATA")
    with pytest.raises(DatasetMissing, match="--data-dir.*CONDLAB_DATA"):
        data_root()
    monkeypatch.setenv("CONDLAB_DATA", "")
    with pytest.raises(DatasetMissing):
        data_root()
    with pytest.raises(DatasetMissing, match="does not exist"):
        data_root(tmp_path / "nowhere")


def test_digits_standin() -> None:
    pytest.importorskip("sklearn")
    x, y = load_digits_standin()
    assert x.shape == (1797, 64) and x.dtype == np.float32
    assert y.shape == (1797,) and y.dtype == np.int64
    assert x.min() == 0.0 and x.max() == 1.0
    assert set(y.tolist()) == set(range(10))
