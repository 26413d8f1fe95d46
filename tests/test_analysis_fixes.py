"""Crashes and wrong defaults fixed in issue 8: each test reproduces the reported failure."""

from __future__ import annotations

import numpy as np

import condlab
from condlab._cli import main
from condlab.analysis import analyze_run, count_orientations, default_epoch


def test_extreme_penalties_do_not_crash():
    # claim: the band's penalties (x 2/3 .. 3/2) of any positive penalty give counts, not errors
    W = np.random.default_rng(0).standard_normal((40, 4))
    for penalty in (1e-6, 100.0):
        o = count_orientations(W, penalty=penalty)
        assert set(o.counts_by_threshold) == {round(penalty * f, 10) for f in (2 / 3, 1.0, 1.5)}


def test_analyze_cli_with_a_counting_option(tmp_path, capsys):
    cfg = condlab.preset("fig5").with_overrides(["train.epochs=30", "train.snapshots=every:10",
                                                 "train.seeds=[0]"])
    run = condlab.train(cfg, out=tmp_path / "runs", progress=False)[0]
    assert main(["analyze", str(run.path), "--penalty", "2", "--no-figures",
                 "--out", str(tmp_path / "a")]) == 0
    assert "epoch" in capsys.readouterr().out


def test_default_epoch_is_strictly_inside_the_initial_stage():
    # x2tanh 1-D seed 1 was analysed at loss ratio 0.6995 (<= 0.7): the rule is loss > 70 %.
    cfg = condlab.preset("fig5-x2tanh").with_overrides(["train.epochs=600", "train.snapshots=every:10",
                                                        "train.seeds=[0,1]"])
    for run in condlab.train(cfg, progress=False):
        e = default_epoch(run)
        assert run.loss[e] > 0.7 * run.loss[0]
        later = run.epochs[run.epochs > e]
        if len(later) and run.initial_stage_epoch is not None:
            assert run.loss[later[0]] <= 0.7 * run.loss[0] or later[0] > run.initial_stage_epoch


def test_gd_replay_that_overflows_is_reported_as_diverged():
    # xtanh (p = 2) under GD at lr 2 for 2000 epochs: the leading-order replay blows up.
    cfg = condlab.preset("fig5-xtanh").with_overrides(["train.optimizer=gd", "train.lr=2.0",
                                                       "train.epochs=2000", "train.snapshots=every:500",
                                                       "train.seeds=[0]"])
    run = condlab.train(cfg, progress=False)[0]
    report = analyze_run(run, 2000).layers[0]
    assert "diverged" in report.note
    assert len(report.predictions["replay"].lines) == 0
