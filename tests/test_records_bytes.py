"""The fast record writer writes the bytes of the plain one (the format users and load_run read).

The reference below is the writer as first written (json.dumps with indent, np.save and
np.savez; loss.npy since record format 3); every file of every run is compared byte for byte (data.npz
member by member: a zip holds its write time), on a batch with several per-run keys, thinned
snapshots and a diverged run, and on values chosen to be awkward for the formatters.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

import condlab
from condlab.records._files import json_indent2, npy_parts
from condlab.records._io import _jsonable
from condlab.records._records import RECORD_FORMAT, write_runs


def reference_write(run, d: Path) -> None:
    """The record writer before it was made fast: the definition of the bytes."""
    d.mkdir(parents=True)
    (d / "config.json").write_bytes(json.dumps(run.config.to_dict(), indent=2).encode())
    np.save(d / "loss.npy", np.asarray(run.loss, dtype=np.float64))
    with open(d / "data.npz", "wb") as fh:
        np.savez(fh, x=run.x, y=run.y)
    snap = d / "snapshots"
    snap.mkdir()

    def layers(where: Path, epochs, weights) -> None:
        np.save(where / "epochs.npy", np.asarray(epochs, dtype=np.int64))
        for name, array in weights.items():
            np.save(where / f"{name}.npy", array)

    layers(snap, run.epochs, run.weights)
    if run.neurons is not None:
        np.save(snap / "neurons.npy", run.neurons)
        (snap / "full").mkdir()
        layers(snap / "full", run.full_epochs, run.full_weights)
    meta = {**run.spec.to_dict(), "status": run.status, "initial_stage_epoch": run.initial_stage_epoch,
            "diverged_epoch": run.diverged_epoch, "snapshot_epochs": run.epochs.tolist(),
            "record_format": RECORD_FORMAT, "snapshot_layers": list(run.weights),
            "snapshot_neurons": 0 if run.neurons is None else len(run.neurons),
            "full_snapshot_epochs": np.asarray(run.full_epochs).tolist(), **run.meta}
    (d / "meta.json").write_bytes((json.dumps(meta, indent=2, default=_jsonable) + "\n").encode())


def assert_same_tree(a: Path, b: Path) -> None:
    files_a = sorted(p.relative_to(a) for p in a.rglob("*"))
    assert files_a == sorted(p.relative_to(b) for p in b.rglob("*"))
    for rel in files_a:
        if (a / rel).is_dir():
            continue
        if rel.name == "data.npz":
            with zipfile.ZipFile(a / rel) as za, zipfile.ZipFile(b / rel) as zb:
                assert za.namelist() == zb.namelist()
                for name in za.namelist():
                    assert za.read(name) == zb.read(name), rel / name
        else:
            assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


BATCH = {  # several per-run keys; run lr=50 diverges; thinned snapshots
    "data": {"n": 20, "d": 2},
    "model": {"width": 8, "init_std": [0.5, 0.1], "activations": ["x2tanh"]},
    "train": {"optimizer": "sgd", "lr": [1e-3, 50.0], "momentum": [0.0, 0.5], "epochs": 60,
              "snapshots": "every:10", "dtype": "float64", "seeds": [0, 3], "snapshot_neurons": 3},
}


@pytest.mark.parametrize("thinned", [True, False])
def test_written_runs_equal_the_reference_writer_byte_for_byte(tmp_path, thinned):
    raw = json.loads(json.dumps(BATCH))
    if not thinned:
        raw["train"].update(snapshot_neurons=0, dtype="float32")
    result = condlab.train(raw, progress=False)
    assert {run.status for run in result} == {"complete", "diverged"}
    for i, run in enumerate(result):
        run.meta["sweep"] = {"hash": f"h{i}", "batch": "b", "summary": {
            "final_loss": None if run.status == "diverged" else float(run.loss[-1]), "layer1_lines": i,
            "layer1_rel_change": 0.1 * i, "note": "é\u2028"}}
    write_runs(result.runs, [tmp_path / "fast" / f"r{i}" for i in range(len(result))])
    for i, run in enumerate(result):
        reference_write(run, tmp_path / "ref" / f"r{i}")
        assert_same_tree(tmp_path / "fast" / f"r{i}", tmp_path / "ref" / f"r{i}")


def test_runs_written_into_prepared_directories_equal_the_reference(tmp_path):
    """A sweep makes the directories and empty files while a batch trains (prepare_runs); a
    prepared file the run does not have is removed, a file not prepared is made."""
    from condlab.records._prepare import prepare_runs, record_files

    result = condlab.train(dict(BATCH, train=dict(BATCH["train"], snapshot_neurons=0)), progress=False)
    paths = [tmp_path / "fast" / f"r{i}" for i in range(len(result))]
    files = [f for f in record_files(["layer1", "layer2", "output"]) if f != "loss.npy"]
    prepare_runs(paths, files)
    write_runs(result.runs, paths, prepared=files)
    for i, run in enumerate(result):
        reference_write(run, tmp_path / "ref" / f"r{i}")
        assert_same_tree(paths[i], tmp_path / "ref" / f"r{i}")
    assert not list((tmp_path / "fast").glob("*.partial"))


AWKWARD = [
    {}, [], {"a": [], "b": {}, "c": [[]], "d": [{}]}, "é\u2028\"\\\n\t", 0.1, 1e-300, 1e300, -0.0, 5e-324,
    float("nan"), float("inf"), -float("inf"), True, False, None, 2**70, -3,
    {"np": [np.float64(1.5), np.float32(0.1), np.int64(7), np.arange(3), np.zeros((2, 0))]},
    {"t": (1, (2, 3)), "p": Path("/x/y"), "deep": [[[[{"k": [1.0]}]]]]},
]


@pytest.mark.parametrize("obj", AWKWARD, ids=range(len(AWKWARD)))
def test_json_indent2_is_json_dumps_with_indent_2(obj):
    assert json_indent2(obj, _jsonable) == json.dumps(obj, indent=2, default=_jsonable)


def test_json_indent2_leaves_what_it_does_not_encode_to_json():
    with pytest.raises(TypeError):
        json_indent2({"x": object()})
    assert json_indent2({1: 2, None: [3]}) == json.dumps({1: 2, None: [3]}, indent=2)


@pytest.mark.parametrize("array", [np.zeros((11, 50, 6), np.float32), np.arange(11), np.ones((3, 1, 51)),
                                   np.zeros((2, 3), bool), np.ones(4, np.complex64), np.ones((2, 2), ">f8"),
                                   np.zeros((0, 3)), np.ones((4, 3))[:, :2], np.ones((1, 1, 2**20), np.int8)])
def test_npy_parts_are_np_save_or_left_to_it(array):
    buf = io.BytesIO()
    np.save(buf, array)
    parts = npy_parts(array)
    if parts is None:
        assert not array.flags.c_contiguous or array.size == 0 or not array.dtype.isnative
    else:
        assert parts[0] + bytes(parts[1]) == buf.getvalue()
