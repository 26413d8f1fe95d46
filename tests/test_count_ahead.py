"""Counting a sweep batch's initial-stage layers while it trains: the trainer's snapshot hook,
the batch-wide stage rule it uses, and what happens when it fails. Its parity with the
reference (the same table): tests/test_accel_parity.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import condlab
from condlab._accel import AccelWarning, _count_ahead
from condlab.analysis import default_epoch, default_epochs, stage_ends

SPEC = {"base": "fig3", "set": {"train.epochs": 120, "train.snapshots": "every:20", "data.n": 40},
        "grid": {"train.lr": [1e-2 * 1.25**i for i in range(8)], "model.init_std": [0.005, 0.02]},
        "seeds": {"init": 2}}


def test_default_epochs_of_a_batch_equal_default_epoch_of_each_run():
    # claim: the batch-wide rule gives every run's default_epoch, including runs that never
    # leave the stage, runs with a non-finite loss, and a loss that starts at zero
    rng = np.random.default_rng(0)
    epochs = np.array([0, 3, 7, 20, 41])
    loss = np.exp(-rng.uniform(0, 0.05, (1, 6)) * np.arange(42)[:, None])   # (42, 6) decaying
    loss[:, 1] = 1.0                      # never falls
    loss[10:, 2] = np.nan                 # diverged at 10, before it fell to 70 %
    loss[:, 3] = 0.0                      # zero from the start: "at or below 70 %" at epoch 0
    loss[:, 4], loss[25, 4] = 1.0, 0.1     # one dip, then back up: the dip ends the stage
    want = [default_epoch(SimpleNamespace(loss=loss[:, r], epochs=epochs)) for r in range(6)]
    assert default_epochs(epochs, loss).tolist() == want
    assert stage_ends(loss[:30]).tolist()[1:5] == [30, 10, 0, 25]


def test_train_calls_on_snapshot_after_each_snapshot_with_the_loss_so_far():
    cfg = condlab.preset("fig5").with_overrides(["train.epochs=30", "train.snapshots=every:10",
                                                 "train.seeds=[0,1]"])
    seen = []

    def hook(epoch, weights, loss):
        seen.append((epoch, [w.detach().clone() for w in weights], loss.clone()))

    result = condlab.train(cfg, progress=False, on_snapshot=hook)
    assert [e for e, _, _ in seen] == [0, 10, 20, 30]
    for s, (epoch, weights, loss) in enumerate(seen):
        assert loss.shape == (epoch + 1, 2)
        for r, run in enumerate(result.runs):
            np.testing.assert_array_equal(loss[:, r].double().numpy(), run.loss[:epoch + 1])
            np.testing.assert_array_equal(weights[0][r].numpy(), run.weights["layer1"][s])


def _sweep(tmp_path, name: str):
    return condlab.sweep(SPEC, out=tmp_path / name, progress=False)


def test_a_failing_hook_warns_once_and_the_summary_counts_after_training(tmp_path, monkeypatch,
                                                                         accelerated):
    # claim: an error inside the fast path never reaches the training; its layers are counted
    # after training, and the table is what the reference writes
    monkeypatch.setattr(_count_ahead, "_cpus", lambda: 64)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        calls = []

        def broken(self, *args):
            calls.append(1)
            raise RuntimeError("planted")

        monkeypatch.setattr(_count_ahead.CountAhead, "_look", broken)
        with pytest.warns(AccelWarning, match="count ahead.*planted.*counted after training"):
            failed = _sweep(tmp_path, "failed")
        monkeypatch.undo()
        with condlab._accel.reference_only("count ahead"):
            reference = _sweep(tmp_path, "reference")
    finally:
        torch.set_num_threads(before)
    assert calls == [1]   # off for the rest of the batch after the first failure
    assert [r["layer1_lines"] for r in failed.rows] == [r["layer1_lines"] for r in reference.rows]
    assert [r["layer1_lines_final"] for r in failed.rows] == [r["layer1_lines_final"] for r in reference.rows]
