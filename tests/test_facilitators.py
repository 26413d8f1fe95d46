"""reproduce facilitators: one sweep per factor through the engine, measured at each run's exact
initial-stage end, and the four verdicts.

The claims (the talk): smaller init, larger weight decay, dropout, a larger learning rate each
raise the share of neurons on the largest line by >= 0.1 (rule fixed in the experiment).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import condlab
from condlab.reproduce import reproduce
from condlab.reproduce._facilitators import BASE, KEYS, SWEEPS, largest_line_share, sweep_spec
from condlab.reproduce._facilitators_task import TASK
from condlab.sweeps._plan import make_plan


@pytest.mark.parametrize("factor", list(SWEEPS))
def test_each_factor_is_one_sweep_of_one_batch_around_the_base_setting(factor):
    values, optimizer, _ = SWEEPS[factor]
    plan = make_plan(sweep_spec(factor, [0, 1, 2], 500))
    assert len(plan.runs) == 3 * len(values) and len(plan.batches) == 1 and plan.task == TASK
    assert plan.columns == [KEYS[factor], "seed"]
    assert [r.settings[KEYS[factor]] for r in plan.runs[::3]] == values
    cfg = plan.runs[0].config
    train = cfg["train"]
    assert (train["optimizer"], train["dtype"], train["epochs"]) == (optimizer, "float64", 500)
    assert (cfg["model"]["width"], cfg["data"]["n"], cfg["data"]["target"]) == (100, 40, "fig5")
    for name, key in KEYS.items():  # every other factor at the base value
        section, option = key.split(".")
        if name != factor:
            assert cfg[section][option] == [BASE[name]]


def test_the_task_measures_each_run_at_its_exact_stage_end_and_a_diverged_run_not_at_all(tmp_path):
    """GD lr 0.2 / 0.8 end their initial stage between the snapshot grid's epochs (every:100);
    lr 50 diverges. The record holds each stage-end snapshot, measured as a run trained alone."""
    spec = sweep_spec("lr", [0], 400)
    spec["grid"] = {"train.lr": [0.2, 0.8, 50.0]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = condlab.sweep(spec, out=tmp_path / "s", progress=False)
    rows = {r["train.lr"]: r for r in result.rows}
    assert (result.trained, result.failed) == (3, 0)
    for lr in (0.2, 0.8):
        row = rows[lr]
        assert row["stage_epoch"] == row["initial_stage_epoch"] and row["stage_epoch"] % 100 != 0
        run = condlab.load_run(tmp_path / "s" / "runs" / row["run"])
        assert row["stage_epoch"] in run.epochs and 400 in run.epochs
        assert row["share_stage"] == largest_line_share(run.layer("layer1", row["stage_epoch"]))
        cfg = condlab.Config.from_dict(run.config.to_dict()).with_overrides(["train.snapshots=every:1"])
        alone = condlab.train(cfg, progress=False)[0]
        np.testing.assert_allclose(alone.layer("layer1", row["stage_epoch"]),
                                   run.layer("layer1", row["stage_epoch"]), rtol=1e-12, atol=1e-14)
    assert rows[50.0]["status"] == "diverged" and rows[50.0]["share_stage"] is None
    again = condlab.sweep(spec, out=tmp_path / "s", progress=False)
    assert (again.trained, again.skipped) == (0, 3)


def test_an_interrupted_facilitators_folder_is_continued_and_a_finished_one_refused(tmp_path):
    from condlab._outputs import reproduce_out

    (tmp_path / "facilitators" / "sweeps" / "lr").mkdir(parents=True)
    assert reproduce_out(str(tmp_path), ["facilitators"], overwrite=False) == (tmp_path, False)
    (tmp_path / "facilitators" / "claims.json").write_text("{}")
    with pytest.raises(ValueError, match="already holds results"):
        reproduce_out(str(tmp_path), ["facilitators"], overwrite=False)


@pytest.mark.slow
def test_facilitators_quick_reports_four_verdicts(tmp_path):
    result = reproduce("facilitators", quick=True, out=tmp_path)
    claims = json.loads((tmp_path / "facilitators" / "claims.json").read_text())
    assert len(result.claims) == len(SWEEPS) == 4
    assert {c["id"] for c in claims["claims"]} == {f"facilitators/{k}" for k in SWEEPS}
    assert sorted(p.name for p in (tmp_path / "facilitators" / "sweeps").iterdir()) == sorted(SWEEPS)


@pytest.mark.slow
def test_a_killed_reproduce_continues_without_retraining_finished_runs(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(Path(condlab.__file__).parents[1]))
    command = [sys.executable, "-m", "condlab", "reproduce", "facilitators", "--quick", "--out", str(out)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sweeps = out / "facilitators" / "sweeps"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and len(list(sweeps.glob("*/results.csv"))) < 1:
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.fail("reproduce finished before it could be killed")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {p: p.stat().st_mtime_ns for p in sweeps.glob("*/runs/*/meta.json")}
    assert before and not (out / "facilitators" / "claims.json").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = reproduce("facilitators", quick=True, out=out)
    assert len(result.claims) == 4 and (out / "facilitators" / "claims.json").is_file()
    assert all(p.stat().st_mtime_ns == t for p, t in before.items())  # finished runs not retrained


def test_largest_line_share_counts_neurons_near_the_crowded_line():
    w = np.array([[1.0, 0.0], [-2.0, 0.01], [0.9, 0.05], [0.0, 1.0], [0.001, 0.0]])
    assert largest_line_share(w) == 3 / 4  # the last row is negligible; 3 of 4 on the x-axis line
