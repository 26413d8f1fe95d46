"""Run records: complete, readable, atomic."""

import json
from pathlib import Path

import numpy as np
import pytest

import condlab
from condlab.records._io import atomic_write_bytes


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "b"
    cfg = condlab.preset("fig3").with_overrides(["train.epochs=30", "train.seeds=[0,1,2]",
                                                 "train.snapshots=every:10"])
    return condlab.train(cfg, out=out, progress=False), out


def test_every_run_directory_is_complete(batch):
    result, out = batch
    assert sorted(p.name for p in out.iterdir()) == ["batch.json", "config.json", "seed0", "seed1", "seed2"]
    for run in result:
        assert sorted(p.name for p in run.path.iterdir()) == [
            "config.json", "data.npz", "loss.npy", "meta.json", "snapshots"]
        assert sorted(p.name for p in (run.path / "snapshots").iterdir()) == [
            "epochs.npy", "layer1.npy", "output.npy"]
        meta = json.loads((run.path / "meta.json").read_text())
        for key in ("seed", "lr", "init_std", "status", "initial_stage_epoch", "provenance"):
            assert key in meta
        assert meta["provenance"]["torch"] and meta["provenance"]["condlab"]


def test_load_run_round_trip(batch):
    result, _ = batch
    for run in result:
        back = condlab.load_run(run.path)
        assert back.spec == run.spec and back.status == "complete"
        assert back.config.train.seeds == [run.spec.seed]
        np.testing.assert_array_equal(back.epochs, [0, 10, 20, 30])
        for name in ("layer1", "output"):
            np.testing.assert_array_equal(back.weights[name], run.weights[name])
        np.testing.assert_allclose(back.loss, run.loss, rtol=1e-15)
        assert back.weights["layer1"].shape == (4, 50, 6)   # bias folded in: 5 + 1 columns
        assert back.weights["layer1"].dtype == np.float32   # the training dtype, no upcast


def test_missing_epoch_and_layer_errors(batch):
    run = batch[0][0]
    with pytest.raises(ValueError, match="epoch 15 was not recorded.*0, 10, 20, 30"):
        run.layer("layer1", 15)
    with pytest.raises(ValueError, match="unknown layer 'layer2'.*layer1, output"):
        run.layer("layer2", 10)


def test_network_at_snapshot_reproduces_recorded_loss(batch):
    import torch

    run = batch[0][0]
    net = run.network(30)
    loss = 0.5 * (net(torch.as_tensor(run.x)) - torch.as_tensor(run.y)).square().sum(1).mean()
    assert loss.item() == pytest.approx(run.loss[30], rel=1e-5)  # float32 training


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "f.json"
    atomic_write_bytes(target, b"old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr("condlab.records._io.os.replace", broken_replace)
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]   # no temp file left behind


def test_unfinished_run_directory_is_not_mistaken_for_a_run(batch, tmp_path):
    partial = tmp_path / "seed9.partial"
    partial.mkdir()
    with pytest.raises(FileNotFoundError, match="unfinished"):
        condlab.load_run(partial)
    with pytest.raises(FileNotFoundError, match="not a condlab run directory"):
        condlab.load_run(tmp_path)


def test_interrupted_batch_keeps_what_was_recorded(tmp_path, monkeypatch):
    import condlab.training._trainer as training

    calls = {"n": 0}
    original = training.BatchedNet.loss_and_grad

    def interrupt_at_25(self, x, y):
        calls["n"] += 1
        if calls["n"] == 26:
            raise KeyboardInterrupt
        return original(self, x, y)

    monkeypatch.setattr(training.BatchedNet, "loss_and_grad", interrupt_at_25)
    cfg = condlab.preset("fig3").with_overrides(["train.epochs=100", "train.snapshots=every:10"])
    run = condlab.train(cfg, out=tmp_path / "b", progress=False)[0]
    assert run.status == "interrupted"
    np.testing.assert_array_equal(run.epochs, [0, 10, 20])
    assert np.isfinite(run.loss[:25]).all() and np.isnan(run.loss[25:]).all()
    assert condlab.load_run(run.path).status == "interrupted"


# --- format v2 and v3: one .npy per layer, memory-mapped, read lazily --------------------------------

def test_snapshot_files_are_plain_npy_in_the_training_dtype(batch):
    run = batch[0][0]
    snap = run.path / "snapshots"
    layer1 = np.load(snap / "layer1.npy")                   # a user opens it with numpy alone
    assert layer1.dtype == np.float32 and layer1.shape == (4, 50, 6)
    np.testing.assert_array_equal(np.load(snap / "epochs.npy"), [0, 10, 20, 30])
    meta = json.loads((run.path / "meta.json").read_text())
    assert meta["record_format"] == 3 and meta["snapshot_layers"] == ["layer1", "output"]
    assert meta["snapshot_neurons"] == 0 and meta["full_snapshot_epochs"] == [0, 10, 20, 30]


def test_load_run_opens_no_snapshot_until_a_layer_is_asked_for(batch):
    run = condlab.load_run(batch[0][0].path)
    assert run.weights._open == {}                          # nothing mapped by load_run
    W = run.layer("layer1", 20)
    assert list(run.weights._open) == ["layer1"]            # only the layer asked for
    assert isinstance(run.weights["layer1"], np.memmap)
    assert W.flags.writeable and not isinstance(W, np.memmap)  # one epoch, copied out


def test_one_run_of_a_batch_loads_and_analyses_without_reading_the_others(batch, tmp_path):
    import shutil

    from condlab.analysis import analyze_run

    _, out = batch
    copy = tmp_path / "b"
    shutil.copytree(out, copy)
    for name in ("layer1.npy", "output.npy"):               # damage every other run's snapshots
        for other in ("seed1", "seed2"):
            (copy / other / "snapshots" / name).write_bytes(b"garbage")
    analysis = analyze_run(condlab.load_run(copy / "seed0"), 30, replay=False)
    assert analysis.layers[0].orientations.params["m"] == 50
    with pytest.raises(ValueError, match="seed1/snapshots/layer1.npy' .*condlab does not load it"):
        condlab.load_run(copy / "seed1").layer("layer1", 30)


_READ_ONE_EPOCH = """
import os, sys
import numpy as np
import condlab

def resident():  # bytes resident now, mapped file pages included
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

run = condlab.load_run(sys.argv[1])
before = resident()
W = run.layer("layer1", int(sys.argv[2]))
total = float(np.abs(W).sum())
print(resident() - before)
"""


def test_reading_one_epoch_of_a_large_record_reads_about_one_snapshot(tmp_path):
    """Claim: reading one of 40 snapshots of a 64 MB layer grows the resident set by < 12 MB.

    Reading the whole layer would add 64 MB; one snapshot is 1.6 MB (plus its copy).
    """
    import subprocess
    import sys

    m, S = 200_000, 40
    run = _synthetic_run(m, S)
    condlab.records._records.write_run(run, tmp_path / "seed0")
    assert (tmp_path / "seed0" / "snapshots" / "layer1.npy").stat().st_size > 64e6
    out = subprocess.run([sys.executable, "-c", _READ_ONE_EPOCH, str(tmp_path / "seed0"), "200"],
                         capture_output=True, text=True, check=True, timeout=300)
    assert int(out.stdout.split()[-1]) < 12e6


def _synthetic_run(m: int, S: int, dtype=np.float32):
    """A fig5-shaped run (1-D input) with random weights; no training needed to test records."""
    from condlab.records._records import Run, RunSpec

    cfg = condlab.preset("fig5").with_overrides([f"model.width={m}", f"train.epochs={10 * (S - 1)}"])
    rng = np.random.default_rng(0)
    epochs = np.arange(S) * 10
    weights = {"layer1": rng.standard_normal((S, m, 2)).astype(dtype),
               "output": rng.standard_normal((S, 1, m + 1)).astype(dtype)}
    x = np.linspace(-1, 1.5, 40)[:, None]
    return Run(cfg, RunSpec(0, 0.005, 5e-4), epochs, weights, np.linspace(1, 0.5, epochs[-1] + 1),
               x, np.sin(3 * x), meta={"seconds": 0.0})


# --- records of condlab 0.1.0 ----------------------------------------------------------------

def test_records_of_condlab_0_1_0_still_load_and_analyse(batch, tmp_path):
    """0.1.0 wrote snapshots.npz (compressed, float64) and no format keys in meta.json."""
    import shutil

    from condlab.analysis import analyze_run

    new = batch[0][0]
    old = tmp_path / "seed0"
    shutil.copytree(new.path, old)
    arrays = {name: np.load(old / "snapshots" / f"{name}.npy").astype(np.float64)
              for name in ("layer1", "output")}
    np.savez_compressed(old / "snapshots.npz", epochs=np.load(old / "snapshots" / "epochs.npy"), **arrays)
    shutil.rmtree(old / "snapshots")
    meta = json.loads((old / "meta.json").read_text())
    for key in ("record_format", "snapshot_layers", "snapshot_neurons", "full_snapshot_epochs"):
        del meta[key]
    (old / "meta.json").write_text(json.dumps(meta))
    back = condlab.load_run(old)
    assert back.names == ["layer1", "output"] and back.weights["layer1"].dtype == np.float64
    np.testing.assert_array_equal(back.layer("layer1", 20), new.layer("layer1", 20))
    a, b = analyze_run(back, 30, replay=False), analyze_run(condlab.load_run(new.path), 30, replay=False)
    assert a.layers[0].orientations.n_lines == b.layers[0].orientations.n_lines


# --- atomicity: nothing is renamed before everything is on disk -------------------------------

def test_everything_is_on_disk_before_any_rename_and_the_renames_after(tmp_path, monkeypatch):
    import condlab.records._records as records

    calls = []
    real_replace, real_durable, real_fsync = records.os.replace, records.durable, records.fsync_path
    monkeypatch.setattr(records, "durable",
                        lambda files, dirs, roots=None: calls.append(("durable", len(list(files)))) or
                        real_durable([], dirs, roots))
    monkeypatch.setattr(records.os, "replace", lambda a, b: calls.append(("rename", Path(b).name)) or
                        real_replace(a, b))
    monkeypatch.setattr(records, "fsync_path", lambda p: calls.append(("fsync", Path(p).name)) or
                        real_fsync(p))
    runs = [_synthetic_run(30, 3) for _ in range(3)]
    records.write_runs(runs, [tmp_path / f"seed{i}" for i in range(3)])
    assert calls[0][0] == "durable" and calls[0][1] == 3 * 7     # one sync for the batch, 7 files a run
    assert calls[1:4] == [("rename", "seed0"), ("rename", "seed1"), ("rename", "seed2")]
    assert calls[4:] == [("fsync", tmp_path.name)]              # one fsync of the parent: the renames


def test_a_sweeps_two_half_write_shares_the_runs_and_syncs_everything_before_any_rename(tmp_path,
                                                                                       monkeypatch):
    # claim: two write_bodies calls taking runs from one iterator write each run once;
    # commit_runs writes the meta.json files and syncs every file before the first rename
    import condlab.records._records as records

    calls = []
    real_replace, real_durable = records.os.replace, records.durable
    monkeypatch.setattr(records, "durable",
                        lambda files, dirs, roots=None: calls.append(("durable", sorted(
                            Path(f).relative_to(tmp_path).as_posix() for f in files))) or
                        real_durable([], dirs, roots))
    monkeypatch.setattr(records.os, "replace", lambda a, b: calls.append(("rename", Path(b).name)) or
                        real_replace(a, b))
    runs, paths = [_synthetic_run(30, 3) for _ in range(3)], [tmp_path / f"seed{i}" for i in range(3)]
    take = iter(range(3))
    partials, first = records.write_bodies(runs, paths, take=take)  # takes all three
    assert records.write_bodies(runs, paths, take=take)[1] == []             # nothing left
    assert calls == [] and not any(Path(p, "meta.json").exists() for p in partials)
    records.commit_runs(runs, paths, partials, first)
    names = ["config.json", "data.npz", "loss.npy", "meta.json", "snapshots/epochs.npy",
             "snapshots/layer1.npy", "snapshots/output.npy"]
    assert calls[0] == ("durable", sorted(f"seed{i}.partial/{n}" for i in range(3) for n in names))
    assert calls[1:] == [("rename", "seed0"), ("rename", "seed1"), ("rename", "seed2")]
    assert [condlab.load_run(p).status for p in paths] == ["complete"] * 3


def test_files_filled_before_training_are_kept_only_where_they_hold_what_the_run_writes(tmp_path):
    # claim: config.json / data.npz that fill_known wrote during training stay where they hold
    # the run's own bytes, and are replaced (truncated, not overlaid) where they do not
    import dataclasses
    import zipfile

    from condlab.records._prepare import fill_known, prepare_runs, record_files

    runs = [_synthetic_run(30, 3) for _ in range(3)]
    other = dataclasses.replace(runs[1].config, name="a-much-longer-name-than-the-run-has" * 4)
    paths = [tmp_path / "fast" / f"seed{i}" for i in range(3)]
    files = record_files(["layer1", "output"])
    prepare_runs(paths, files)
    known = fill_known(paths, [runs[0].config, other, runs[2].config], runs[0].x, runs[0].y)
    assert known.holds(0, runs[0]) == (True, True) and known.holds(1, runs[1]) == (False, True)
    records = condlab.records._records
    records.commit_runs(runs, paths, *records.write_bodies(runs, paths, files, known=known), files)
    reference = [tmp_path / "ref" / f"seed{i}" for i in range(3)]
    condlab.records._records.write_runs(runs, reference)
    for got, want in zip(paths, reference, strict=True):
        for name in ("config.json", "loss.npy", "meta.json"):
            assert (got / name).read_bytes() == (want / name).read_bytes(), (got, name)
        with zipfile.ZipFile(got / "data.npz") as a, zipfile.ZipFile(want / "data.npz") as b:
            assert [a.read(n) for n in a.namelist()] == [b.read(n) for n in b.namelist()]
    stranger = dataclasses.replace(runs[0], x=runs[0].x + 1)  # other data: data.npz rewritten
    assert known.holds(0, stranger) == (True, False)


def test_a_failed_rename_leaves_only_a_partial_directory(tmp_path, monkeypatch):
    import condlab.records._records as records

    def no_rename(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(records.os, "replace", no_rename)
    with pytest.raises(OSError, match="disk full"):
        records.write_run(_synthetic_run(30, 3), tmp_path / "seed0")
    assert [p.name for p in tmp_path.iterdir()] == ["seed0.partial"]
    with pytest.raises(FileNotFoundError, match="unfinished"):
        condlab.load_run(tmp_path / "seed0.partial")


def test_records_respect_the_umask(tmp_path):
    import stat

    condlab.records._records.write_run(_synthetic_run(30, 3), tmp_path / "seed0")
    mode = stat.S_IMODE((tmp_path / "seed0" / "snapshots" / "layer1.npy").stat().st_mode)
    assert mode == 0o666 & ~_umask()


def _umask() -> int:
    import os

    old = os.umask(0)
    os.umask(old)
    return old


def test_a_record_of_format_2_with_loss_csv_still_loads(batch, tmp_path):
    # claim: records written before format 3 keep their loss in loss.csv (epoch,loss rows,
    # 17 significant digits); load_run reads it to the same floats
    import shutil

    run = batch[0][0]
    old = tmp_path / "old"
    shutil.copytree(run.path, old)
    loss = np.load(old / "loss.npy")
    (old / "loss.npy").unlink()
    (old / "loss.csv").write_text("epoch,loss\n" + "".join(f"{e},{v:.17g}\n" for e, v in enumerate(loss)))
    np.testing.assert_array_equal(condlab.load_run(old).loss, loss)
    np.testing.assert_array_equal(condlab.load_run(run.path).loss, run.loss)
