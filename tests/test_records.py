"""Run records: complete, readable, atomic."""

import json

import numpy as np
import pytest

import condlab
from condlab._io import atomic_write_bytes


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
            "config.json", "data.npz", "loss.csv", "meta.json", "snapshots.npz"]
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

    monkeypatch.setattr("condlab._io.os.replace", broken_replace)
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
    import condlab._training as training

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
