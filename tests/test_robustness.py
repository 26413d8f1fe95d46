"""Results are never clobbered, names never collide, records are shared, honest defaults are said."""

from __future__ import annotations

import json
import os
import stat
import warnings
from pathlib import Path

import pytest

from condlab import Config
from condlab._cli import main
from condlab._guards import check_memory, train_bytes
from condlab._outputs import point_latest, reproduce_out
from condlab.records._io import atomic_write_text
from condlab.training._api import run_name, run_specs

TINY = ["--set", "data.n=8", "--set", "data.d=2", "--set", "model.width=4", "--set", "train.epochs=30",
        "--set", "train.snapshots=every:5", "--no-progress"]


def _train(*argv: str) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return main(["train", *TINY, *argv])


def test_overwrite_replaces_the_batch_and_removes_its_stale_runs(tmp_path):
    out = tmp_path / "b"
    assert _train("--seeds", "2", "--out", str(out)) == 0
    assert _train("--seeds", "1", "--out", str(out)) == 2           # refused: results there
    assert (out / "seed1").is_dir()
    (out / "my-notes.txt").write_text("kept")
    assert _train("--seeds", "1", "--out", str(out), "--overwrite") == 0
    assert sorted(p.name for p in out.iterdir()) == ["batch.json", "config.json", "my-notes.txt", "seed0"]


def test_python_train_refuses_a_folder_with_results_as_the_cli_does(tmp_path):
    import condlab

    cfg = Config().with_overrides(["data.n=8", "data.d=2", "model.width=4", "train.epochs=5",
                                   "train.seeds=[0,1]"])
    out = tmp_path / "b"
    condlab.train(cfg, out=out, progress=False)
    before = {p.name: p.stat().st_mtime_ns for p in out.rglob("*")}
    with pytest.raises(ValueError, match=r"already holds results.*condlab.resume.*overwrite=True"):
        condlab.train(cfg, out=out, progress=False)
    assert {p.name: p.stat().st_mtime_ns for p in out.rglob("*")} == before   # nothing touched
    (out / "my-notes.txt").write_text("kept")
    condlab.train(cfg.with_overrides(["train.seeds=[0]"]), out=out, progress=False, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == ["batch.json", "config.json", "my-notes.txt", "seed0"]


def test_empty_out_folder_is_accepted_and_default_names_never_collide(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    assert _train("--out", str(tmp_path / "empty")) == 0
    monkeypatch.chdir(tmp_path)
    assert _train() == 0 and _train() == 0                           # same second: -2 suffix
    assert len(list((tmp_path / "runs").iterdir())) == 2


@pytest.mark.parametrize("lrs, names", [
    ([1e-3, 5e-4], ["seed0-lr0.001", "seed0-lr0.0005"]),             # %g where it is exact
    ([1e-3, 0.0010000001], ["seed0-lr0.001", "seed0-lr0.0010000001"]),
    ([0.1 + 0.2, 0.3], ["seed0-lr0.30000000000000004", "seed0-lr0.3"]),
])
def test_run_names_are_unique_for_distinct_values(lrs, names):
    cfg = Config().with_overrides([f"train.lr={lrs}"])
    assert [run_name(cfg, s) for s in run_specs(cfg)] == names


def test_repeated_values_in_a_sweep_are_refused():
    with pytest.raises(ValueError, match="repeated values"):
        Config().with_overrides(["train.lr=[1e-3,0.001]"])
    with pytest.raises(ValueError, match="repeated values"):
        Config().with_overrides(["model.init_std=[5e-3,0.005]"])


def test_reproduce_gets_a_fresh_folder_per_invocation_and_a_latest_pointer(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first, stamped = reproduce_out(None, ["fig3"], overwrite=False)
    first.mkdir(parents=True)
    second, _ = reproduce_out(None, ["fig3"], overwrite=False)
    assert stamped and first != second and first.parent == second.parent == Path("runs/reproduce")
    second.mkdir()
    link = point_latest(first)
    link = point_latest(second)
    assert link.resolve() == second.resolve()


def test_reproduce_into_an_explicit_folder_refuses_an_existing_experiment(tmp_path):
    (tmp_path / "fig3").mkdir()
    (tmp_path / "fig3" / "claims.json").write_text("{}")
    assert reproduce_out(str(tmp_path), ["fig6"], overwrite=False) == (tmp_path, False)  # CI's 2nd call
    with pytest.raises(ValueError, match="already holds results"):
        reproduce_out(str(tmp_path), ["fig3"], overwrite=False)
    reproduce_out(str(tmp_path), ["fig3"], overwrite=True)
    assert not (tmp_path / "fig3").exists()                           # no stale seeds survive


def test_records_respect_the_umask(tmp_path):
    mask = os.umask(0)
    os.umask(mask)
    atomic_write_text(tmp_path / "f.txt", "x")
    assert stat.S_IMODE((tmp_path / "f.txt").stat().st_mode) == 0o666 & ~mask


def test_memory_estimate_counts_snapshots_and_refuses_what_cannot_fit():
    small = Config()
    more = small.with_overrides(["train.snapshots=every:1"])
    assert train_bytes(more, 80, 5, 1) > train_bytes(small, 80, 5, 1)
    check_memory(small, 80, 5, 1)                                     # the defaults fit anywhere
    with pytest.raises(ValueError, match="needs about .* available"):
        check_memory(small.with_overrides(["model.width=2000000000"]), 80, 5, 1)



def test_memory_estimate_counts_every_per_run_list_and_thinned_snapshots():
    wide = Config().with_overrides(["model.width=100000", "data.d=1", "train.snapshots=every:1"])
    swept = wide.with_overrides(["train.weight_decay=[0, 0.1]", "model.dropout=[0, 0.2]"])
    assert train_bytes(swept, 4, 1, 1) > 3.9 * train_bytes(wide, 4, 1, 1)   # 4 runs, not 1
    thin = wide.with_overrides(["train.snapshot_neurons=10"])
    assert train_bytes(thin, 4, 1, 1) < 0.6 * train_bytes(wide, 4, 1, 1)    # rows of 10 neurons kept


def test_a_diverged_run_is_said_to_be_in_the_analysis(tmp_path, capsys):
    out = tmp_path / "div"
    assert _train("--set", "train.optimizer=gd", "--set", "train.lr=5", "--out", str(out)) == 3
    capsys.readouterr()
    assert main(["analyze", str(out / "seed0"), "--no-figures", "--no-replay", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["diverged"] and "not finite at epoch" in report["divergence"]
    assert main(["analyze", str(out / "seed0"), "--no-figures", "--no-replay"]) == 0
    assert "WARNING: this run diverged" in capsys.readouterr().out


@pytest.mark.parametrize("expr, shown", [
    ("x**13", "13"),
    ("x**40", "p undefined: all derivatives up to order 32 vanish at 0"),
    ("relu(x)", "p undefined: not differentiable at 0: left derivative 0, right derivative 1"),
    ("tanh(tanh(tanh(tanh(tanh(tanh(x))))))**7", "7"),
])
def test_activations_command_gives_p_or_the_reason(expr, shown, capsys):
    assert main(["activations", expr]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(shown)


def test_a_named_data_folder_without_mnist_is_not_replaced_by_the_standin(tmp_path):
    from condlab.reproduce import reproduce

    result = reproduce("mnist", seeds=[0], quick=True, out=tmp_path / "out", data_dir=tmp_path)
    assert result.status == "not run"
    assert "digits stand-in is not used" in result.notes[0]


def test_the_activation_table_gives_the_reason_for_every_undefined_p(capsys):
    assert main(["activations"]) == 0
    out = capsys.readouterr().out
    for name in ("relu", "leaky_relu"):
        assert f"  {name}: p undefined: not differentiable at 0" in out


def test_an_unexpected_error_exits_1_with_the_traceback_and_asks_for_a_report(monkeypatch, capsys):
    import condlab._cli as cli

    def broken(args):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "cmd_presets", broken)
    assert cli.main(["presets"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: boom" in err and "please report it" in err


@pytest.mark.parametrize("err, message", [
    (PermissionError(13, "Permission denied", "/d/meta.json"), "'/d/meta.json': permission denied"),
    (IsADirectoryError(21, "Is a directory", "cfg.yaml"), "'cfg.yaml': is a folder where a file"),
    (NotADirectoryError(20, "Not a directory", "a.txt/x"), "'a.txt/x': a part of this path is a file"),
    (OSError(28, "No space left on device", "runs/b/loss.csv"), "'runs/b/loss.csv': no space left"),
    (EOFError("No data left in file"), "truncated or not in the expected format"),
    (KeyError("x"), None),                                            # a bug: traceback, exit 1
])
def test_file_system_errors_become_one_line_naming_the_file(err, message):
    from condlab._guards import user_message

    got = user_message(err)
    assert got is None if message is None else (message in got and "\n" not in got)
