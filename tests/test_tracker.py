"""condlab.Tracker in a user's own training loop, and `condlab analyze` on what it records."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import condlab
from condlab._cli import main
from condlab.models._tracker import lightning_callback


def _user_loop(out: Path | None, steps: int = 23, every: int = 5, snapshots: bool = True):
    """What a user writes: their own model, optimizer and loop, plus two tracker lines."""
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 1e-3, generator=g)
    x = torch.rand(64, 4, generator=g) * 4 - 2
    y = torch.sin(x).sum(1, keepdim=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    tracker = condlab.Tracker(model, every=every, out=out, snapshots=snapshots)
    for epoch in range(steps):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        tracker.step(epoch, loss)
    return tracker, tracker.close()


def test_tracker_measures_every_n_steps_and_the_last_one() -> None:
    tracker, path = _user_loop(None)
    assert path is None
    h = tracker.history
    assert sorted(set(h["step"])) == [0, 5, 10, 15, 20, 23]
    assert set(h["layer"]) == {"0", "2", "4"}
    assert h.loc[h["step"] == 23, "epoch"].tolist() == [22, 22, 22]  # the user's epoch of that call
    assert h["stable"].isna().all()  # one threshold by default: stability not measured
    assert len(tracker.losses) == 23


def test_a_plain_loop_with_the_tracker_gives_a_run_that_analyze_reads(tmp_path: Path, capsys) -> None:
    _, path = _user_loop(tmp_path / "run")
    run = condlab.load_run(path)
    assert run.meta["architecture"] == "external" and list(run.epochs) == [0, 5, 10, 15, 20, 23]
    assert run.weights["0"].shape == (6, 16, 5)  # (snapshots, rows, cols with bias)
    assert len(run.loss) == 23 and (path / "condensation.csv").is_file()
    assert main(["analyze", str(path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["epoch"] == 23 and [r["layer"] for r in result["layers"]] == ["0", "2", "4"]
    assert all("theory predictions" in r["note"] for r in result["layers"])
    assert (path / "analysis" / "epoch23" / "cosine_0.png").is_file()
    assert main(["analyze", str(path), "--epoch", "5", "--layer", "1"]) == 0
    assert "not a condlab network" in capsys.readouterr().out


def test_metrics_only_run_and_existing_directories(tmp_path: Path, capsys) -> None:
    _, path = _user_loop(tmp_path / "m", snapshots=False)
    assert main(["analyze", str(path)]) == 2
    assert "condensation.csv" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not empty"):
        condlab.Tracker(nn.Linear(2, 2), out=path)
    with pytest.raises(ValueError, match="every"):
        condlab.Tracker(nn.Linear(2, 2), every=0)


def test_tracker_counts_what_inspect_counts() -> None:
    tracker, _ = _user_loop(None, steps=10, every=10)
    last = tracker.history.query("step == 10").set_index("layer")
    table = condlab.inspect(tracker.model, band=False).set_index("layer")
    np.testing.assert_array_equal(last["lines"], table["lines"])
    np.testing.assert_allclose(last["effective_neurons"], table["effective_neurons"])


def test_lightning_callback_is_a_thin_wrapper(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    callback = lightning_callback(every=2, out=tmp_path / "pl")
    assert hasattr(callback, "on_train_batch_end")
