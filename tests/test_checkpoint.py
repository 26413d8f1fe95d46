"""Crash-safe training: a batch killed with SIGKILL, or stopped with SIGTERM, and then resumed
from its checkpoint writes the same records as the uninterrupted batch, bit for bit (float64,
CPU, one thread in every process)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

import condlab
from condlab.training._checkpoint import read_checkpoint, write_checkpoint

# with dropout and per-run weight decay, so that generator and optimizer state must both
# survive the restart; `long_config` sets the epochs so that a kill lands mid-run
CONFIG = {
    "name": "ckpt",
    "data": {"n": 30, "d": 2},
    "model": {"width": 20, "init_std": [0.05], "dropout": [0.0, 0.2]},
    "train": {"optimizer": "adamw", "lr": [1e-3], "weight_decay": [0.0, 0.1], "epochs": 3000,
              "dtype": "float64", "snapshots": "every:250", "seeds": [0, 1],
              "checkpoint_seconds": 0.1},
}
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def condlab_cli(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "condlab", "train", *args, "--no-progress"], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def one_thread(fn):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn()
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def long_config() -> dict:
    """CONFIG with about 1.5 s of training on this machine (at least 3000 epochs): a signal sent
    after the first checkpoints (0.1 s apart) then lands mid-run on slow and fast machines."""
    short = {**CONFIG, "train": {**CONFIG["train"], "epochs": 300, "checkpoint_seconds": 0}}
    start = time.perf_counter()
    one_thread(lambda: condlab.train(short, progress=False))
    per_epoch = (time.perf_counter() - start) / 300
    epochs = int(min(max(1.5 / per_epoch, 3000), 60000)) // 250 * 250
    return {**CONFIG, "train": {**CONFIG["train"], "epochs": epochs}}


@pytest.fixture(scope="module")
def config_file(long_config, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cfg") / "ckpt.yaml"
    path.write_text(yaml.safe_dump(long_config))
    return path


@pytest.fixture(scope="module")
def reference(long_config, tmp_path_factory) -> Path:
    """The uninterrupted batch, trained here on one thread like the subprocesses (bit-identical
    to a `condlab train` subprocess with OMP_NUM_THREADS=1; checked when this test was written)."""
    out = tmp_path_factory.mktemp("ref") / "b"
    one_thread(lambda: condlab.train(long_config, out=out, progress=False))
    return out


def wait_for_checkpoint(proc: subprocess.Popen, path: Path, after: int, timeout: float = 120) -> None:
    """Wait until the process has written a checkpoint past epoch `after`."""
    start = time.monotonic()
    while not (path.is_file() and read_checkpoint(path)["epoch"] > after):
        assert proc.poll() is None, "training ended before its first checkpoint"
        assert time.monotonic() - start < timeout
        time.sleep(0.02)


def assert_same_records(a: Path, b: Path) -> None:
    """Every run: identical loss.npy bytes, snapshots and status."""
    batch_a, batch_b = (json.loads((p / "batch.json").read_text()) for p in (a, b))
    assert [r["dir"] for r in batch_a["runs"]] == [r["dir"] for r in batch_b["runs"]]
    for run in batch_a["runs"]:
        ra, rb = condlab.load_run(a / run["dir"]), condlab.load_run(b / run["dir"])
        assert (a / run["dir"] / "loss.npy").read_bytes() == (b / run["dir"] / "loss.npy").read_bytes()
        np.testing.assert_array_equal(ra.epochs, rb.epochs)
        for name in ra.weights:
            assert np.array_equal(ra.weights[name], rb.weights[name]), (run["dir"], name)
        assert ra.status == rb.status == "complete"


def test_sigterm_then_sigkill_then_resume_equals_uninterrupted(long_config, config_file, reference,
                                                               tmp_path):
    out, epochs = tmp_path / "b", long_config["train"]["epochs"]
    # 1. SIGTERM: a clean stop with records of the epochs that ran, and a checkpoint
    proc = condlab_cli(str(config_file), "--out", str(out))
    wait_for_checkpoint(proc, out / "checkpoint.pt", after=0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "--resume" in err
    batch = json.loads((out / "batch.json").read_text())
    last = batch["last_epoch"]
    assert 0 < last < epochs and {r["status"] for r in batch["runs"]} == {"interrupted"}
    loss = np.load(out / batch["runs"][-1]["dir"] / "loss.npy")
    assert len(loss) == last + 1 and np.isfinite(loss).all()   # no entries for epochs never run
    assert read_checkpoint(out)["epoch"] == last + 1
    # 2. resume, and SIGKILL it after its next checkpoint
    proc = condlab_cli("--resume", str(out))
    wait_for_checkpoint(proc, out / "checkpoint.pt", after=last + 1)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=120)
    killed_at = read_checkpoint(out)["epoch"]
    assert last + 1 < killed_at < epochs
    # 3. resume again: the records equal the uninterrupted batch's, bit for bit
    proc = condlab_cli("--resume", str(out))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert_same_records(out, reference)
    assert not (out / "checkpoint.pt").exists()
    meta = json.loads((out / "seed0-wd0.1-drop0.2" / "meta.json").read_text())
    assert meta["resumed_at"] == [last + 1, killed_at] and meta["status"] == "complete"


def test_complete_batch_keeps_no_checkpoint(tmp_path):
    cfg = condlab.Config.from_dict({**CONFIG, "train": {**CONFIG["train"], "epochs": 30,
                                                        "checkpoint_seconds": 1e-9}})
    condlab.train(cfg, out=tmp_path / "b", progress=False)
    assert not (tmp_path / "b" / "checkpoint.pt").exists() and (tmp_path / "b" / "batch.json").exists()


def test_resume_refuses_finished_damaged_or_conflicting(reference, tmp_path):
    from condlab._cli import main

    assert main(["train", "--resume", str(reference)]) == 2
    damaged = tmp_path / "d"
    damaged.mkdir()
    (damaged / "checkpoint.pt").write_bytes(b"not a checkpoint")
    assert main(["train", "--resume", str(damaged)]) == 2
    assert main(["train", "--resume", str(reference), "--set", "train.lr=1"]) == 2


def test_resume_messages(reference, tmp_path, capsys):
    from condlab._cli import main

    main(["train", "--resume", str(reference)])
    assert "nothing to resume" in capsys.readouterr().err
    (tmp_path / "checkpoint.pt").write_bytes(b"garbage")
    main(["train", "--resume", str(tmp_path)])
    err = capsys.readouterr().err
    assert "damaged" in err and "checkpoint.pt" in err and len(err.strip().splitlines()) == 1


DIVERGING = {  # run 2 diverges before epoch 60 and is frozen at the check of epoch 100
    "data": {"n": 20, "d": 2},
    "model": {"width": 8, "init_std": [0.5], "activations": ["x2tanh"]},
    "train": {"optimizer": "sgd", "lr": [1e-3, 50.0], "momentum": [0.0, 0.5], "epochs": 300,
              "snapshots": "every:20", "dtype": "float64", "checkpoint_seconds": 1e-9},
}


@pytest.mark.parametrize("raw,at", [
    ({**CONFIG, "train": {**CONFIG["train"], "epochs": 300, "snapshots": "every:50",
                          "checkpoint_seconds": 1e-9}}, 120),
    (DIVERGING, 150),
    ({**CONFIG, "train": {**CONFIG["train"], "epochs": 300, "snapshots": "every:10",  # thinned
                          "snapshot_neurons": 5, "checkpoint_seconds": 1e-9}}, 120),
])
def test_in_process_resume_from_a_checkpoint_equals_uninterrupted(raw, at, tmp_path, monkeypatch):
    """A checkpoint written mid-run (after `at` epochs), resumed in the same process, is exact:
    with dropout and weight decay, and with a diverged run frozen before the checkpoint."""
    cfg = condlab.Config.from_dict(raw)
    full = condlab.train(cfg, progress=False)
    kept = []

    def keep_one(path, config, params, optimizer, dropout, state, *args):
        if state.epoch == at:
            write_checkpoint(path, config, params, optimizer, dropout, state, *args)
            kept.append(path.read_bytes())

    monkeypatch.setattr("condlab.training._api.write_checkpoint", keep_one)
    condlab.train(cfg, out=tmp_path / "a", progress=False)
    monkeypatch.undo()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "checkpoint.pt").write_bytes(kept[0])
    resumed = condlab.resume(tmp_path / "b", progress=False)
    for a, b in zip(full, resumed, strict=True):
        assert a.status == b.status and a.diverged_epoch == b.diverged_epoch
        np.testing.assert_array_equal(a.loss, b.loss)
        np.testing.assert_array_equal(a.epochs, b.epochs)
        assert all(np.array_equal(a.weights[k], b.weights[k]) for k in a.weights)
        np.testing.assert_array_equal(a.full_epochs, b.full_epochs)
        assert all(np.array_equal(a.full_weights[k], b.full_weights[k]) for k in a.full_weights)
    assert [r.status for r in resumed][-1] == ("diverged" if raw is DIVERGING else "complete")
    if raw["train"].get("snapshot_neurons"):  # the checkpoint held the snapshots thinned
        import io

        saved = torch.load(io.BytesIO(kept[0]), weights_only=True)
        assert saved["snapshot_epochs"].tolist() == [0]  # in full: epoch 0 only (and the last)
        assert saved["thin_snapshots"].shape[0] == len(saved["thin_epochs"]) == 12  # 0, 10, ..., 110
        assert saved["thin_snapshots"].shape[1] < saved["snapshots"].shape[1] / 2


def test_a_checkpoint_with_thinned_snapshots_in_full_still_resumes(tmp_path, monkeypatch):
    """Checkpoints written before thinned snapshots were kept thin hold every snapshot in full:
    resuming one records them thinned, as the uninterrupted thinned batch does."""
    import io

    raw = {**CONFIG, "train": {**CONFIG["train"], "epochs": 200, "snapshots": "every:20",
                               "checkpoint_seconds": 1e-9}}
    thin = {**raw, "train": {**raw["train"], "snapshot_neurons": 5}}
    kept = []

    def keep_one(path, config, params, optimizer, dropout, state, *args):
        if state.epoch == 90:
            write_checkpoint(path, config, params, optimizer, dropout, state, *args)
            kept.append(path.read_bytes())

    monkeypatch.setattr("condlab.training._api.write_checkpoint", keep_one)
    condlab.train(raw, out=tmp_path / "a", progress=False)  # unthinned: every snapshot in full
    monkeypatch.undo()
    saved = torch.load(io.BytesIO(kept[0]), weights_only=True)
    saved["config"]["train"]["snapshot_neurons"] = 5  # = an old checkpoint of the thinned batch
    (tmp_path / "b").mkdir()
    torch.save(saved, tmp_path / "b" / "checkpoint.pt")
    resumed = condlab.resume(tmp_path / "b", progress=False)
    for a, b in zip(condlab.train(thin, progress=False), resumed, strict=True):
        np.testing.assert_array_equal(a.epochs, b.epochs)
        assert all(np.array_equal(a.weights[k], b.weights[k]) for k in a.weights)
        assert all(np.array_equal(a.full_weights[k], b.full_weights[k]) for k in a.full_weights)


def test_a_signal_in_the_batchs_last_epoch_is_not_lost(tmp_path, late_signal):
    # claim: a stop asked after the trainer's last look (the batch's last epoch) still stops the
    # caller: train() raises KeyboardInterrupt, naming the signal, after writing the complete
    # batch (before, the batch ended as if no signal had come, and a sweep or reproduce went on)
    cfg = condlab.preset("fig5").with_overrides(["train.epochs=5", "model.width=4", "train.seeds=[0,1]"])
    late = r"stopped by SIGINT as the batch ended; its records are complete"
    with pytest.raises(KeyboardInterrupt, match=late):
        condlab.train(cfg, out=tmp_path / "out", progress=False)
    runs = [condlab.load_run(p) for p in sorted((tmp_path / "out").iterdir()) if (p / "meta.json").is_file()]
    assert len(runs) == 2 and all(r.status == "complete" for r in runs)
