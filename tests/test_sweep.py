"""Sweeps: planning (axes, hashes, batches), resuming, the results table, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

import condlab
from _runs import finished
from condlab.sweeps._plan import BATCHED, BATCHED_KEYS, make_plan, run_hash
from condlab.training._config import Config, ConfigError

TINY = {
    "name": "tiny",
    "base": "fig5",
    "set": {"train.epochs": 30, "train.snapshots": "every:10", "train.dtype": "float64"},
    "grid": {"model.width": [8, 12]},
    "zip": {"train.lr": [1e-3, 5e-4], "model.init_std": [0.005, 0.01]},
    "seeds": {"init": 2, "data": [0, 1]},
}


def test_plan_is_the_product_of_the_axes_and_batches_share_everything_but_batchable_keys():
    plan = make_plan(TINY)
    assert len(plan.runs) == 2 * 2 * 2 * 2  # widths x zip x data seeds x init seeds
    # a batch: one width and one data seed; lr, init_std and seed vary inside it
    assert len(plan.batches) == 4 and all(len(h) == 4 for h in plan.batches.values())
    assert plan.columns == ["model.width", "train.lr", "model.init_std", "data.seed", "seed"]
    first = plan.runs[0]
    assert first.settings == {"model.width": 8, "train.lr": 1e-3, "model.init_std": 0.005,
                              "data.seed": 0, "seed": 0}
    assert first.config["train"]["seeds"] == [0] and first.config["train"]["epochs"] == 30


def test_list_axis_and_base_lists_become_single_runs():
    spec = {"base": {"train": {"lr": [1e-3, 2e-3], "epochs": 5}},
            "list": [{"model.width": 4}, {"model.width": 6, "data.n": 10}]}
    plan = make_plan(spec)
    assert len(plan.runs) == 4 and len(plan.batches) == 2
    assert plan.columns == ["model.width", "data.n", "train.lr", "seed"]
    assert [r.settings["train.lr"] for r in plan.runs] == [1e-3, 2e-3, 1e-3, 2e-3]


def test_the_declared_batchable_keys_are_the_per_run_fields_of_condlab_train():
    # a RunSpec field missing from BATCHED (or a key that is not per run) would make wrong batches
    import dataclasses

    from condlab.records._records import RunSpec
    from condlab.training._api import run_specs

    assert list(BATCHED) == [f.name for f in dataclasses.fields(RunSpec)]
    raw = Config().to_dict()
    raw["train"]["optimizer"] = "sgd"  # uses every per-run field
    for key in BATCHED_KEYS:
        section, name = key.split(".")
        value = raw[section][name][0]
        raw[section][name] = [value, value + 1 if isinstance(value, int) else value * 0.5 + 0.25]
    cfg = Config.from_dict(raw)
    specs = run_specs(cfg)
    assert len(specs) == 2 ** len(BATCHED_KEYS)
    for field, key in BATCHED.items():
        section, name = key.split(".")
        assert {getattr(s, field) for s in specs} == set(raw[section][name])


def test_hash_is_canonical_and_ignores_name_and_device():
    cfg = Config().to_dict()
    h = run_hash(cfg)
    assert len(h) == 16 and h == run_hash(json.loads(json.dumps(cfg)))
    renamed = Config().to_dict() | {"name": "other"}
    renamed["train"]["device"] = "cuda"
    assert run_hash(renamed) == h
    reordered = {k: dict(reversed(list(v.items()))) if isinstance(v, dict) else v
                 for k, v in reversed(list(cfg.items()))}
    assert run_hash(reordered) == h
    changed = Config().with_overrides(["train.lr=0.0011"]).to_dict()
    assert run_hash(changed) != h
    # YAML '1e-3' (a string to YAML) and 0.001 type to the same float: the same run
    a = make_plan({"grid": {"train.lr": ["1e-3"]}}).runs[0].hash
    b = make_plan({"grid": {"train.lr": [0.001]}}).runs[0].hash
    assert a == b


@pytest.mark.parametrize("spec, message", [
    ({"grid": {"model.widht": [1]}}, "unknown key 'model.widht': model has keys"),
    ({"grid": {"model.width": ["x"]}}, "model.width='x' is not accepted: expected an integer"),
    ({"zip": {"data.n": [1, 2], "data.d": [1]}}, "different lengths"),
    ({"grid": {"data.n": [5]}, "list": [{"data.n": 4}]}, "'data.n' is set by both grid and list"),
    ({"grid": {"model.width": 3}}, "give a non-empty list"),
    ({"axes": {}}, "unknown sweep key 'axes'"),
    ({"base": "nope"}, "neither a preset"),
    ({"seeds": {"init": 2, "model": 3}}, "unknown key 'seeds.model'"),
    ({"task": "condlab.no_such_module"}, "task='condlab.no_such_module' is not a registered task"),
    ({"task": "condlab.training._config"}, "not a registered task: choose one of phase, facilitators"),
    ({"task": "this"}, "task='this' is not a registered task"),
])
def test_bad_specs_are_one_line_errors(spec, message):
    with pytest.raises(ConfigError, match=message) as err:
        make_plan(spec)
    assert "\n" not in str(err.value)


def test_a_task_is_part_of_each_run_hash_and_no_task_keeps_the_hashes():
    plain, tasked = make_plan(TINY), make_plan({**TINY, "task": "condlab.phase._task"})
    assert plain.task == "" and tasked.task == "condlab.phase._task"
    assert make_plan({**TINY, "task": "phase"}).task == "condlab.phase._task"  # the short alias
    assert [r.hash for r in plain.runs] == [run_hash(r.config) for r in plain.runs]
    assert not {r.hash for r in plain.runs} & {r.hash for r in tasked.runs}


def test_unknown_key_error_is_the_same_as_set():
    with pytest.raises(ConfigError) as via_set:
        Config().with_overrides(["train.lrr=1"])
    with pytest.raises(ConfigError) as via_sweep:
        make_plan({"grid": {"train.lrr": [1]}})
    assert str(via_set.value) == str(via_sweep.value)


def test_sweep_writes_table_and_resumes_without_retraining(tmp_path):
    result = condlab.sweep(TINY, out=tmp_path, progress=False)
    assert (result.trained, result.skipped, result.failed) == (16, 0, 0)
    assert (tmp_path / "spec.yaml").is_file() and (tmp_path / "plan.json").is_file()
    dirs = sorted((tmp_path / "runs").iterdir())
    assert len(dirs) == 16 and all((d / "meta.json").is_file() for d in dirs)
    mtimes = {d.name: (d / "meta.json").stat().st_mtime_ns for d in dirs}
    again = condlab.sweep(TINY, out=tmp_path, progress=False)
    assert (again.trained, again.skipped) == (0, 16)
    assert "nothing to train" in again.summary()
    # one run lost: only it is trained again, the others are untouched
    victim = dirs[5]
    shutil.rmtree(victim)  # a run directory holds a snapshots/ folder
    third = condlab.sweep(TINY, out=tmp_path, progress=False)
    assert (third.trained, third.skipped) == (1, 15)
    for d in dirs:
        if d != victim:
            assert (d / "meta.json").stat().st_mtime_ns == mtimes[d.name]


def test_table_rows_match_single_run_training(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    result = condlab.sweep(TINY, out=tmp_path, progress=False)
    table = pd.read_parquet(tmp_path / "results.parquet")
    csv = pd.read_csv(tmp_path / "results.csv")
    assert list(table.columns) == list(csv.columns) == result.columns
    assert len(table) == 16 and (table["status"] == "complete").all()
    assert np.allclose(table["final_loss"], csv["final_loss"], rtol=0, atol=0)
    for column in ("layer1_lines", "layer1_lines_final", "layer1_rel_change", "output_rel_change"):
        assert column in table.columns
    # claim: a run trained inside a batch ends where it ends alone (float64, round-off only)
    row = table.iloc[13]
    planned = next(r for r in result.plan.runs if r.hash == row["run"])
    alone = condlab.train(planned.config, progress=False)[0]
    assert alone.loss[-1] == pytest.approx(row["final_loss"], rel=1e-9)
    w = alone.weights["layer1"]
    change = np.linalg.norm(w[-1] - w[0]) / np.linalg.norm(w[0])
    assert change == pytest.approx(row["layer1_rel_change"], rel=1e-9)


def test_threaded_writes_give_every_run_and_counts_equal_count_orientations(tmp_path):
    # claim: the writer thread (run files written while the runs are measured) and writing in
    # this thread give the same rows and directories, and the line counts in the rows are
    # exactly count_orientations(w, band=False).n_lines of the recorded weights
    from condlab.analysis import count_orientations, default_epoch
    from condlab.records._load import load_run
    from condlab.sweeps._run import prepare_part, train_part, write_part
    from condlab.sweeps._sweep import _batches

    batch = _batches(make_plan(dict(TINY, grid={"model.width": [8]}, seeds={"init": 2})), set())[0]
    result = train_part(batch)
    threaded = write_part(batch, result, str(tmp_path / "a"))
    here = write_part(batch, result, str(tmp_path / "b"), workers=0)
    made = prepare_part(batch, str(tmp_path / "c"))
    prepared = write_part(batch, result, str(tmp_path / "c"), prepared=made)
    assert threaded.rows == here.rows == prepared.rows and len(here.rows) == len(batch.runs) == 4
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*"))
    assert len(files) == 4 * 9  # the run directory, snapshots/ and 7 files a run
    for other in ("b", "c"):  # the same files, byte for byte, however they were written
        assert sorted(p.relative_to(tmp_path / other) for p in (tmp_path / other).rglob("*")) == files
        for f in files:
            if f.name == "data.npz":  # a zip holds its write time: compared member by member
                with zipfile.ZipFile(tmp_path / other / f) as za, zipfile.ZipFile(tmp_path / "a" / f) as zb:
                    assert [za.read(n) for n in za.namelist()] == [zb.read(n) for n in zb.namelist()]
            elif f.suffix:
                assert (tmp_path / other / f).read_bytes() == (tmp_path / "a" / f).read_bytes(), f
    assert made is not None and made.known is not None  # config.json and data.npz filled early
    for h, row in here.rows.items():
        run = load_run(tmp_path / "a" / h)
        sweep = json.loads((tmp_path / "b" / h / "meta.json").read_text())["sweep"]
        assert sweep["summary"] == {k: v for k, v in row.items() if k not in ("status", "host", "node")}
        assert sweep["trained_on"] == {"host": row["host"], "node": None} and row["host"]
        assert row["layer1_lines_final"] == count_orientations(run.weights["layer1"][-1], band=False).n_lines
        assert row["layer1_lines"] == count_orientations(run.layer("layer1", default_epoch(run)),
                                                         band=False).n_lines


def test_csv_is_written_without_pyarrow(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    spec = dict(TINY, grid={"model.width": [8]}, seeds={"init": 1})
    result = condlab.sweep(spec, out=tmp_path, progress=False)
    assert result.tables == [tmp_path / "results.csv"]
    assert not (tmp_path / "results.parquet").exists()


def test_a_failing_batch_is_reported_and_the_others_are_kept(tmp_path):
    spec = {"base": {"train": {"epochs": 5}, "data": {"data_dir": str(tmp_path / "none")}},
            "list": [{"data.source": "synthetic"},
                     {"data.source": "mnist", "data.d": 784, "model.d_out": 10}]}
    result = condlab.sweep(spec, out=tmp_path / "out", progress=False)
    assert (result.trained, result.failed) == (1, 1)
    assert [r["status"] for r in result.rows] == ["complete", "failed"]
    assert "does not exist" in result.rows[1]["error"]
    assert not list((tmp_path / "out" / "runs").glob("*.partial"))  # made while training, removed


def test_an_interrupted_batch_leaves_no_run_directories(tmp_path, monkeypatch):
    import condlab.sweeps._local as sweep_local

    real = sweep_local.train_part

    def interrupted(batch, progress=False):
        result = real(batch, progress)
        for run in result.runs:
            run.status = "interrupted"
        return result

    monkeypatch.setattr(sweep_local, "train_part", interrupted)
    result = condlab.sweep(dict(TINY, grid={"model.width": [8]}), out=tmp_path, progress=False)
    assert result.interrupted and result.trained == 0
    assert not list((tmp_path / "runs").iterdir())


def test_dry_run_writes_nothing(tmp_path):
    result = condlab.sweep(TINY, out=tmp_path / "out", dry_run=True)
    assert result.pending == 16 and not (tmp_path / "out").exists()


def _sweep_cmd(spec: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "condlab", "sweep", str(spec), "--out", str(out), "--no-progress"]


def test_cli_resumes_after_kill_9_without_retraining_a_finished_run(tmp_path):
    # 6 batches (widths) of 2 runs; kill -9 once the first runs are on disk
    spec = tmp_path / "spec.yaml"
    spec.write_text("base: fig5\nset: {train.epochs: 400, train.snapshots: 'every:100'}\n"
                    "grid: {model.width: [200, 210, 220, 230, 240, 250]}\nseeds: {init: 2}\n")
    out = tmp_path / "out"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(Path(condlab.__file__).parents[1]))
    proc = subprocess.Popen(_sweep_cmd(spec, out), env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if len(finished(out)) >= 2:
            break
        time.sleep(0.02)
    if proc.poll() is not None:
        pytest.fail("the sweep finished before it could be killed: make the spec longer")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {p.parent.name: p.stat().st_mtime_ns for p in finished(out)}
    assert 2 <= len(before) < 12
    again = condlab.sweep(spec, out=out, progress=False)  # resumed in-process: one import less
    assert (again.trained, again.skipped, again.failed) == (12 - len(before), len(before), 0)
    for name, mtime in before.items():
        assert (out / "runs" / name / "meta.json").stat().st_mtime_ns == mtime
    assert not list((out / "runs").glob("*.partial"))
    final = condlab.sweep(spec, out=out, progress=False)
    assert (final.trained, final.skipped) == (0, 12) and "nothing to train" in final.summary()
    rows = (out / "results.csv").read_text().splitlines()
    assert len(rows) == 13 and all(",complete," in r for r in rows[1:])


def test_a_second_sweep_on_the_same_out_is_refused_and_a_killed_holder_does_not_block(tmp_path, capsys):
    from condlab._cli import main

    out = tmp_path / "out"
    spec = tmp_path / "spec.yaml"
    spec.write_text("base: fig5\nset: {train.epochs: 5, train.snapshots: 'every:5', model.width: 6}\n")
    holder = ("import sys, time; from pathlib import Path; from condlab.records._lock import folder_lock\n"
              "with folder_lock(Path(sys.argv[1])):\n    print('locked', flush=True); time.sleep(120)\n")
    env = dict(os.environ, PYTHONPATH=str(Path(condlab.__file__).parents[1]))
    proc = subprocess.Popen([sys.executable, "-c", holder, str(out)], env=env, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        assert main(["sweep", str(spec), "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"in use by another sweep (pid {proc.pid})" in err
        assert sorted(p.name for p in out.iterdir()) == [".lock"]  # nothing written, nothing trained
    finally:
        proc.kill()  # SIGKILL: the OS releases the lock, the stale .lock file must not block
        proc.wait()
        proc.stdout.close()
    result = condlab.sweep(spec, out=out, progress=False)
    assert (result.trained, result.failed) == (1, 0)


def test_cli_errors_are_one_line_exit_2(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("grid: {model.widht: [1]}\n")
    proc = subprocess.run(_sweep_cmd(spec, tmp_path / "out"), capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(Path(condlab.__file__).parents[1])))
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("condlab: error: unknown key 'model.widht'")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_ray_tasks_retry_only_io_errors_that_may_pass(monkeypatch):
    import errno

    from condlab.sweeps import _ray_node as node

    def fail_with(err):
        def batch(batch, storage, plan):
            raise err
        return batch

    monkeypatch.setattr(node, "_batch", fail_with(OSError(errno.EIO, "I/O error")))
    with pytest.raises(node.TransientBatchError):  # Ray retries these
        node.batch_task(None, None, node.TaskPlan())
    for err in (FileNotFoundError("gone"), ValueError("bad value"), node.NotShared("not here")):
        monkeypatch.setattr(node, "_batch", fail_with(err))
        with pytest.raises(type(err)):  # not retried: the same on every try
            node.batch_task(None, None, node.TaskPlan())


def test_unknown_executor_and_options_of_another_executor_are_one_line_errors():
    from condlab.sweeps import make_executor

    with pytest.raises(ConfigError, match="choose one of local, ray"):
        make_executor("dask")
    with pytest.raises(ConfigError, match="--address is for the ray executor: add --executor ray"):
        make_executor("local", "127.0.0.1:6379")
    with pytest.raises(ConfigError, match="--return-runs is for the ray executor"):
        make_executor("local", return_runs=True)
    with pytest.raises(ConfigError, match="--cpus-per-batch is for the ray executor"):
        make_executor("local", cpus_per_batch=2)


def test_weight_decay_momentum_and_dropout_sweeps_are_one_batch(tmp_path):
    spec = {"base": {"train": {"optimizer": "sgd", "epochs": 5, "lr": [0.01]}, "model": {"width": 6}},
            "grid": {"train.weight_decay": [0.0, 0.01], "train.momentum": [0.0, 0.9],
                     "model.dropout": [0.0, 0.2]}}
    plan = make_plan(spec)
    assert len(plan.runs) == 8 and len(plan.batches) == 1
    result = condlab.sweep(spec, out=tmp_path, progress=False)
    assert result.trained == 8 and {r["status"] for r in result.rows} == {"complete"}
    meta = json.loads((tmp_path / "runs" / result.rows[-1]["run"] / "meta.json").read_text())
    assert (meta["weight_decay"], meta["momentum"], meta["dropout"]) == (0.01, 0.9, 0.2)


def test_widths_example_plans_as_documented():
    from condlab.sweeps._plan import load_spec

    raw, _, base_dir = load_spec(Path(__file__).parents[1] / "examples" / "sweep-widths.yaml")
    plan = make_plan(raw, base_dir)
    assert len(plan.runs) == 12 and len(plan.batches) == 4  # one batch per width
    assert sorted({r.settings["model.width"] for r in plan.runs}) == [100, 1000, 10000, 100000]
    assert {r.config["data"]["d"] for r in plan.runs} == {1}
    assert 100 <= plan.runs[0].config["train"]["epochs"] <= 1000


def test_the_docs_example_spec_plans_as_the_docs_say():
    import re

    import yaml

    text = (Path(__file__).parents[1] / "docs" / "sweeps.md").read_text()
    plan = make_plan(yaml.safe_load(re.findall(r"```yaml\n(.*?)```", text, flags=re.S)[0]))
    assert "= 128 runs in 16 batches" in text
    assert (len(plan.runs), len(plan.batches)) == (128, 16)


def test_a_sweep_freezes_older_objects_for_the_gc_and_hands_them_back(tmp_path, monkeypatch):
    # claim: while a sweep runs, the objects alive before it are frozen (left out of full GC
    # collections); afterwards nothing is frozen; a caller's own freeze is left as it was
    import gc

    import condlab.sweeps._sweep as sweep_module

    seen = []
    real = sweep_module.make_plan
    monkeypatch.setattr(sweep_module, "make_plan",
                        lambda *a, **k: seen.append(gc.get_freeze_count()) or real(*a, **k))
    spec = dict(TINY, grid={"model.width": [8]}, seeds={"init": 1})
    assert gc.get_freeze_count() == 0
    condlab.sweep(spec, out=tmp_path / "a", progress=False)
    assert seen[-1] > 0 and gc.get_freeze_count() == 0
    gc.freeze()
    try:
        calls = []
        monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
        monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
        condlab.sweep(spec, out=tmp_path / "b", progress=False)
        assert calls == [] and gc.get_freeze_count() > 0
    finally:
        monkeypatch.undo()
        gc.unfreeze()


def test_a_signal_as_a_batch_ends_stops_the_sweep_after_writing_it(tmp_path, monkeypatch, late_signal):
    # claim: Ctrl-C that lands after the trainer's last look at a batch stops the sweep (no later
    # batch starts), and the complete batch is written, so a resumed sweep does not train it again
    spec = dict(TINY, grid={"model.width": [8]})  # two batches (data seeds 0, 1) of 4 runs
    result = condlab.sweep(spec, out=tmp_path, progress=False)
    monkeypatch.undo()
    assert result.interrupted and result.trained == 4
    assert len(finished(tmp_path)) == 4
    again = condlab.sweep(spec, out=tmp_path, progress=False)
    assert (again.trained, again.skipped) == (4, 4)


# -- executors of one's own: registered from Python, or an installed package's entry point -------

class _Recording(condlab.Executor):
    """A user's executor in one class: it trains through the local executor and records each call."""

    name = "recording"
    calls: list[str] = []  # set afresh by each test (monkeypatch)

    def connect(self) -> None:
        self.calls.append("connect")

    def check(self, storage, batches) -> None:
        self.calls.append("check")

    def run(self, batches, storage, bar, on_done) -> None:
        from condlab.sweeps import LocalExecutor

        self.calls.append(f"run {len(batches)}")
        LocalExecutor().run(batches, storage, bar, on_done)

    def close(self) -> None:
        self.calls.append("close")


def _installed(monkeypatch, **executors: str) -> None:
    """Installed packages declare `executors` (name -> "module:Class") in condlab.executors."""
    import importlib.metadata as metadata

    declared = [metadata.EntryPoint(name, value, "condlab.executors") for name, value in executors.items()]
    real = metadata.entry_points
    monkeypatch.setattr(metadata, "entry_points", lambda **select: declared
                        if select.get("group") == "condlab.executors" else real(**select))


def test_a_registered_executor_of_ones_own_trains_the_sweep(tmp_path, monkeypatch):
    from condlab.sweeps import EXECUTORS

    assert {"Executor", "register_executor"} <= set(condlab.__all__) & set(condlab.sweeps.__all__)
    monkeypatch.setitem(EXECUTORS, _Recording.name, None)  # the registry is left as it was
    monkeypatch.setattr(_Recording, "calls", [])
    assert condlab.register_executor(_Recording) is _Recording
    spec = dict(TINY, grid={"model.width": [8]}, seeds={"init": 1, "data": [0, 1]})  # 2 batches of 2 runs
    result = condlab.sweep(spec, out=tmp_path, executor="recording", progress=False)
    assert (result.trained, result.failed) == (4, 0) and len(finished(tmp_path)) == 4
    assert _Recording.calls == ["connect", "check", "run 2", "close"]


def test_an_installed_executor_is_found_by_name_and_loaded_only_then(monkeypatch):
    from condlab.sweeps import make_executor

    # "local" is registered, so its broken entry point is never imported; listing imports none
    _installed(monkeypatch, recording=f"{__name__}:_Recording", local="no_such_package:Executor")
    assert type(make_executor("local")).__name__ == "LocalExecutor"
    assert isinstance(make_executor("recording"), _Recording)
    with pytest.raises(ConfigError, match="executor 'nope' is not accepted: choose one of local, ray, "
                       "recording \\(or register one: docs/sweeps.md") as err:
        make_executor("nope")
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="--address is for the ray executor"):  # its options still apply
        make_executor("recording", "127.0.0.1:6379")


@pytest.mark.parametrize("value, message", [
    ("collections:OrderedDict", r"\(collections:OrderedDict, entry point of condlab.executors\) is not an "
     "Executor subclass: it must be one, with name = 'mine'"),
    ("condlab.sweeps._local:LocalExecutor", "is named 'local': its class must have name = 'mine'"),
    ("no_such_package.executors:Mine", "cannot be loaded: ModuleNotFoundError"),
])
def test_an_installed_executor_of_the_wrong_class_is_a_one_line_error(monkeypatch, value, message):
    from condlab.sweeps import make_executor

    _installed(monkeypatch, mine=value)
    with pytest.raises(ConfigError, match=f"executor 'mine' .*{message}") as err:
        make_executor("mine")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_cli_refuses_an_unknown_executor_in_one_line_and_writes_nothing(tmp_path, capsys, dry_run):
    from condlab._cli import main

    spec = tmp_path / "spec.yaml"
    spec.write_text("base: fig5\nset: {train.epochs: 5, train.snapshots: 'every:5', model.width: 6}\n")
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--executor", "nope", "--no-progress", *dry_run]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("condlab: error: executor 'nope' is not accepted: choose one of local, ray")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]


@pytest.mark.parametrize("argv", [
    ["phase-diagram", "--quick", "--dry-run"],  # its dry run plans without the sweep engine: checked too
    ["phase-diagram", "--quick"],
    ["reproduce", "facilitators", "--quick"],
])
def test_every_command_with_an_executor_refuses_an_unknown_one_the_same_way(tmp_path, capsys, argv):
    from condlab._cli import main

    out = tmp_path / "out"
    assert main([*argv, "--out", str(out), "--executor", "nope", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("condlab: error: executor 'nope' is not accepted: choose one of local, ray")
    assert len(err.splitlines()) == 1 and not out.exists()


def test_reproduce_takes_an_installed_executor_for_its_sweep_based_experiment(monkeypatch):
    from condlab.reproduce._runner import check_executor

    _installed(monkeypatch, recording=f"{__name__}:_Recording")
    check_executor("facilitators", "recording", None)  # accepted: facilitators trains through sweeps
    with pytest.raises(ConfigError, match="--executor recording is not accepted for 'fig3'"):
        check_executor("fig3", "recording", None)
