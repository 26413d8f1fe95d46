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


def _user_loop(out: Path | None, steps: int = 23, every: int = 5, snapshots: bool = True,
               background: bool = True):
    """What a user writes: their own model, optimizer and loop, plus two tracker lines."""
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 1e-3, generator=g)
    x = torch.rand(64, 4, generator=g) * 4 - 2
    y = torch.sin(x).sum(1, keepdim=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    tracker = condlab.Tracker(model, every=every, out=out, snapshots=snapshots, background=background)
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


def test_a_relative_out_works_and_the_record_is_complete(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    _, path = _user_loop(Path("digits-run"), steps=12, every=5)
    assert path == tmp_path / "digits-run" and not list(tmp_path.glob("*.partial"))
    run = condlab.load_run("digits-run")
    assert run.status == "complete" and run.meta["writing"] is False and list(run.epochs) == [0, 5, 10, 12]
    assert len(run.loss) == 12
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    parquet = pd.read_parquet(path / "condensation.parquet")
    assert len(parquet) == 12 and list(parquet["step"].unique()) == [0, 5, 10, 12]


def test_a_second_tracker_on_the_same_out_never_overwrites(tmp_path: Path) -> None:
    first = condlab.Tracker(nn.Linear(3, 4), every=1, out=tmp_path / "r")
    with pytest.raises(ValueError, match="not empty"):
        condlab.Tracker(nn.Linear(3, 4), out=tmp_path / "r")
    first.step(0, 1.0)
    assert first.close() == tmp_path / "r" and condlab.load_run(tmp_path / "r").status == "complete"


def test_a_failing_close_keeps_what_was_recorded(tmp_path: Path, monkeypatch) -> None:
    model = nn.Linear(3, 8)
    tracker = condlab.Tracker(model, every=2, out=tmp_path / "r", snapshots=True)
    for step in range(5):
        tracker.step(0, float(step))
    from condlab.models import _tracker_record

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_tracker_record, "durable", broken)
    with pytest.raises(OSError, match="No space"):
        tracker.close()
    assert len(tracker.history) == 4  # steps 0, 2, 4, 5: in memory ...
    run = condlab.load_run(tmp_path / "r")  # ... and on disk, readable
    assert list(run.epochs) == [0, 2, 4, 5] and run.weights["(root)"].shape == (4, 8, 4)
    monkeypatch.undo()
    assert tracker.close() == tmp_path / "r"  # a second close finishes the record
    assert condlab.load_run(tmp_path / "r").status == "complete"


_KILLED_LOOP = """
import os, signal, sys, torch
from torch import nn
import condlab
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 4); y = x.sum(1, keepdim=True)
tracker = condlab.Tracker(model, every=5, out=sys.argv[1], snapshots=True,
                          background=sys.argv[2] == "background")
for step in range(1000):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    tracker.step(0, loss)
    if step == 22:
        os.kill(os.getpid(), signal.SIGKILL)  # as `kill -9` or the OOM killer would, mid-run
"""


@pytest.mark.parametrize("mode", ["background", "in-process"])
def test_a_killed_training_leaves_a_record_that_analyze_reads(tmp_path: Path, capsys, mode) -> None:
    import subprocess
    import sys

    from condlab.models._tracker import MAX_PENDING

    src = str(Path(condlab.__file__).parents[1])
    env = {**__import__("os").environ, "PYTHONPATH": src}
    done = subprocess.run([sys.executable, "-c", _KILLED_LOOP, "killed", mode], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == -9, done.stderr
    run = condlab.load_run(tmp_path / "killed")
    assert run.status == "interrupted" and run.meta["writing"] is True
    # every measurement's weights and losses are on disk; the table's rows of the last
    # MAX_PENDING measurements may still have been in the count worker (2 layers a measurement)
    assert list(run.epochs) == [0, 5, 10, 15, 20] and len(run.loss) == 20
    rows = (tmp_path / "killed" / "condensation.csv").read_text().count("\n") - 1
    lost = MAX_PENDING if mode == "background" else 0
    assert 5 * 2 - 2 * lost <= rows <= 5 * 2 and rows % 2 == 0
    assert main(["analyze", str(tmp_path / "killed"), "--json", "--no-figures"]) == 0
    assert json.loads(capsys.readouterr().out)["epoch"] == 20


def test_a_tracker_killed_between_a_layer_and_its_steps_reads_the_steps_listed(tmp_path: Path) -> None:
    tracker = condlab.Tracker(nn.Linear(3, 8), every=1, out=tmp_path / "r", snapshots=True)
    tracker.step(0, 1.0)
    tracker.record.layers["(root)"].append(np.ones((1, 8, 4), dtype=np.float32))  # epochs.npy not yet
    run = condlab.load_run(tmp_path / "r")
    assert list(run.epochs) == [0, 1] and run.layer("(root)", 1).shape == (8, 4)


def test_tensorboard_events_read_back(tmp_path: Path, capsys) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    tracker = condlab.Tracker(model, every=2, out=tmp_path / "run", snapshots=True,
                              tensorboard=tmp_path / "tb")
    for step in range(4):
        with torch.no_grad():
            model[0].weight.add_(0.01 * torch.randn(16, 4, generator=g))
        tracker.step(0, float(step))
    tracker.close()
    events = EventAccumulator(str(tmp_path / "tb"), size_guidance={"images": 0, "scalars": 0}).Reload()
    tags = events.Tags()
    assert {"lines/0", "condensed_share/2", "effective_neurons/0"} <= set(tags["scalars"])
    assert [e.step for e in events.Scalars("lines/0")] == [0, 2, 4]
    expected = tracker.history.query("layer == '0'")["effective_neurons"].tolist()
    np.testing.assert_allclose([e.value for e in events.Scalars("effective_neurons/0")], expected, rtol=1e-6)
    image = events.Images("cosine/0")[-1]
    assert (image.width, image.height) == (16, 16) and image.step == 4

    tb2 = str(tmp_path / "tb2")
    assert main(["analyze", str(tmp_path / "run"), "--no-figures", "--tensorboard", tb2]) == 0
    again = EventAccumulator(str(tmp_path / "tb2" / "run"), size_guidance={"images": 0}).Reload()
    assert [e.step for e in again.Scalars("lines/2")] == [0, 2, 4] and again.Images("cosine/0")
    capsys.readouterr()
    torch.save(model.state_dict(), tmp_path / "m.pt")
    assert main(["inspect", str(tmp_path / "m.pt"), "--tensorboard", str(tmp_path / "tb3")]) == 0
    third = EventAccumulator(str(tmp_path / "tb3")).Reload()
    assert {"lines/0", "lines/2"} <= set(third.Tags()["scalars"]) and "cosine/2" in third.Tags()["images"]


def _rows(background: bool, tmp_path: Path, **kwargs):
    tracker, _ = _user_loop(tmp_path / f"bg-{background}", snapshots=True, background=background, **kwargs)
    return tracker.history


def test_the_count_in_the_worker_equals_the_count_in_the_training_process(tmp_path: Path) -> None:
    # claim: the worker counts the same float64 copies the tracker would count itself, so every
    # row (lines, shares, effective neurons, ...) and the record are the same
    pd = pytest.importorskip("pandas")
    bg, here = _rows(True, tmp_path), _rows(False, tmp_path)
    pd.testing.assert_frame_equal(bg, here)
    for name in ("condensation.csv", "loss.npy"):
        assert (tmp_path / "bg-True" / name).read_bytes() == (tmp_path / "bg-False" / name).read_bytes()


def test_a_dead_worker_is_replaced_by_the_count_in_the_training_process(tmp_path: Path, monkeypatch) -> None:
    from condlab.models import _count_worker

    real = _count_worker.CountWorker.submit
    sent = []

    def dies_after_two(self, key, matrices, kwargs):
        sent.append(key)
        if len(sent) == 3:
            self._proc.kill()  # the worker is gone (an OOM kill, say) before this job
            self._proc.wait()
        return real(self, key, matrices, kwargs)

    monkeypatch.setattr(_count_worker.CountWorker, "submit", dies_after_two)
    with pytest.warns(RuntimeWarning, match="count worker .* counting in the training process"):
        rows = _rows(True, tmp_path)
    monkeypatch.undo()
    pd = pytest.importorskip("pandas")
    pd.testing.assert_frame_equal(rows, _rows(False, tmp_path))  # nothing lost, nothing twice


def test_the_count_worker_imports_no_torch() -> None:
    import subprocess
    import sys

    code = ("import sys; import condlab.models._count_worker, condlab.models._counts; "
            "print('torch' in sys.modules)")
    src = str(Path(condlab.__file__).parents[1])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "PYTHONPATH": src})
    assert out.stdout.strip() == "False"


def test_a_worker_that_cannot_start_leaves_the_count_here(tmp_path: Path, monkeypatch) -> None:
    import subprocess

    from condlab.models import _count_worker

    def no_process(*args, **kwargs):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(_count_worker.subprocess, "Popen", no_process)
    with pytest.warns(RuntimeWarning, match="count worker did not start"):
        rows = _rows(True, tmp_path)
    monkeypatch.setattr(_count_worker.subprocess, "Popen", subprocess.Popen)
    pd = pytest.importorskip("pandas")
    pd.testing.assert_frame_equal(rows, _rows(False, tmp_path))


def test_a_busy_worker_does_not_hold_the_training_loop(monkeypatch) -> None:
    # Claim: submit returns once the job is pickled, whether or not the worker reads. A job larger
    # than a pipe's buffer (8 MB here) would block a direct write until a worker that is still
    # counting reads it; this worker never reads, so a blocking submit would not return.
    import subprocess
    import sys
    import threading

    from condlab.models import _count_worker

    real = subprocess.Popen

    def sleeper(args, **kwargs):
        return real([sys.executable, "-c", "import time; time.sleep(60)"], **kwargs)

    monkeypatch.setattr(_count_worker.subprocess, "Popen", sleeper)
    worker = _count_worker.CountWorker()
    done = threading.Event()
    threading.Thread(target=lambda: (worker.submit(0, [np.zeros((1000, 1000))], {}), done.set()),
                     daemon=True).start()
    try:
        assert done.wait(timeout=20), "submit waited for the worker to read"
        assert worker.poll() is None and worker.failed is None
    finally:
        worker._proc.kill()
        worker.close()


def test_a_layer_that_may_take_the_lanczos_path_has_its_solver_imported_before_the_loop(monkeypatch) -> None:
    # Claim: a layer with more than LANCZOS_MIN rows and inputs makes the worker import the arc
    # search's Lanczos solver before its first job (that import, ~0.2 s at the first such count,
    # held bench_tracker's MLP loop: +32 % instead of +5 %); smaller layers start no import.
    from condlab.analysis._arcs import LANCZOS_MIN
    from condlab.models import _count_worker

    asked = []
    real = _count_worker.CountWorker.__init__

    def spy(self, preload: bool = False) -> None:
        asked.append(preload)
        real(self, preload)

    monkeypatch.setattr(_count_worker.CountWorker, "__init__", spy)
    for model in (nn.Linear(LANCZOS_MIN, LANCZOS_MIN + 1), nn.Linear(4, 16)):
        condlab.Tracker(model, every=5).close()
    assert asked == [True, False]


def test_a_worker_told_to_preload_has_the_lanczos_solver_before_any_job() -> None:
    import os
    import subprocess
    import sys

    code = ("import runpy, sys; sys.argv = ['worker', '--preload']; "
            "runpy.run_module('condlab.models._count_worker', run_name='__main__'); "
            "print('scipy.sparse.linalg' in sys.modules, file=sys.stderr)")
    src = str(Path(condlab.__file__).parents[1])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": src})
    assert out.stderr.strip().splitlines()[-1] == "True"


def test_the_finiteness_check_sees_nan_and_inf_and_not_an_overflowing_sum() -> None:
    from condlab.models._tracker import _finite

    W = torch.full((4, 4), 60000.0, dtype=torch.float16)  # finite entries whose sum overflows
    assert not torch.isfinite(W.sum()) and _finite(W)
    for bad in (float("nan"), float("inf"), -float("inf")):
        V = torch.zeros(3, 5)
        V[1, 2] = bad
        assert not _finite(V)
    assert _finite(torch.zeros(0, 3))
