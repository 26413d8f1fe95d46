"""Bad inputs through the CLI: exit 2, one line naming the bad value, no traceback, nothing lost.

Every case runs in a workspace that already holds results (a trained batch, a reproduced
experiment, a notes file); after the case every file that was there is byte-for-byte the same.
Most cases call ``condlab._cli.main`` in-process (the same code path as the console script,
and an exception escaping it fails the test); the cases marked ``SUB`` run as real subprocesses
(``python -m condlab``, started together to share the import time), so the claim "no
traceback" also holds for the program a user runs.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import condlab
from condlab._cli import main

TINY = ["--set", "data.n=8", "--set", "data.d=2", "--set", "model.width=4", "--set", "train.epochs=4",
        "--set", "train.snapshots=every:1", "--no-progress"]
SUB = "subprocess"
MNIST = ["--set", "data.source=mnist", "--set", "data.d=784", "--set", "model.d_out=10"]


class _Evil:
    """A pickle that would run a shell command if loaded with pickle.load."""

    def __reduce__(self):
        return (os.system, ("touch pwned",))


def _build(w: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["train", *TINY, "--seeds", "2", "--out", str(w / "runs/earlier")]) == 0
    (w / "notes.txt").write_text("my notes\n")
    (w / "repro/fig3").mkdir(parents=True)
    (w / "repro/fig3/claims.json").write_text("{}\n")
    bad = w / "bad"
    seed0 = w / "runs/earlier/seed0"
    for name in ("trunc", "empty", "pickled", "shape", "meta", "nodata", "loss", "losscsv"):
        shutil.copytree(seed0, bad / name)
    snap = (seed0 / "snapshots/layer1.npy").read_bytes()
    (bad / "trunc/snapshots/layer1.npy").write_bytes(snap[: len(snap) // 2])
    (bad / "empty/snapshots/layer1.npy").write_bytes(b"")
    (bad / "pickled/snapshots/layer1.npy").write_bytes(pickle.dumps({"epochs": [0]}))
    layer1 = np.load(seed0 / "snapshots/layer1.npy")
    np.save(bad / "shape/snapshots/layer1.npy", layer1[:, :2])  # 2 of 4 neurons: a wrong-shaped snapshot
    (bad / "meta/meta.json").write_text('{"seed": 0, ')
    (bad / "nodata/data.npz").unlink()
    loss = (seed0 / "loss.npy").read_bytes()
    (bad / "loss/loss.npy").write_bytes(loss[: len(loss) // 2])
    (bad / "losscsv/loss.npy").unlink()  # a record of format 2 keeps its loss in loss.csv
    (bad / "losscsv/loss.csv").write_text("epoch,loss\n0,abc,,\n")
    shutil.copytree(w / "runs/earlier", bad / "batch")
    (bad / "batch/seed1/snapshots/layer1.npy").write_bytes(snap[:100])
    shutil.copytree(w / "runs/earlier", bad / "batchjson")
    (bad / "batchjson/batch.json").write_text("{not json")
    cifar = w / "evil/cifar-10-batches-py"
    cifar.mkdir(parents=True)
    for f in [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]:
        (cifar / f).write_bytes(pickle.dumps(_Evil(), protocol=2))
    (w / "mnist").mkdir()
    (w / "mnist/train-images-idx3-ubyte").write_bytes(b"\x00\x00\x08\x03\x00\x00")
    (w / "mnist/train-labels-idx1-ubyte").write_bytes(b"\x00\x00\x08\x01")
    (w / "bad.yaml").write_text("model: [width: 5\n")
    (w / "evil.yaml").write_text("model: !!python/object/apply:os.system ['touch pwned']\n")
    (w / "list.yaml").write_text("- 1\n- 2\n")
    # a booby-trapped module beside the specs: importing it (a spec naming it) leaves `pwned`
    (w / "helper_task.py").write_text("open('pwned', 'w').close()\nprint('TRAPPED')\n"
                                      "def train_part(*a):\n    pass\n\ndef write_part(*a):\n    pass\n")
    _spec(w, "trap", task="helper_task")
    _spec(w, "zen", task="this")
    _spec(w, "os", task="os")
    _spec(w, "escape", name="x/../../../escaped_sweep")
    _spec(w, "dotname", name=".hidden")
    _spec(w, "ctrl", name="a\x07b")
    _spec(w, "longname", name="s" * 101)
    for name, keys in PHASE_SPECS.items():
        _phase(w, name, keys)
    _build_more(w)


SPEC_BASE = {"data": {"n": 8, "d": 2}, "model": {"width": 4}, "train": {"epochs": 2, "snapshots": "every:1"}}


def _spec(w: Path, file: str, **keys) -> str:
    """Write specs/NAME.yaml: a tiny sweep with `keys` (a spec mapping) added; its path."""
    import yaml

    (w / "specs").mkdir(exist_ok=True)
    (w / f"specs/{file}.yaml").write_text(yaml.safe_dump({"base": SPEC_BASE, **keys}))
    return f"specs/{file}.yaml"


PHASE_SPECS = {  # diagram specs with one bad value each: the key, then the value as YAML writes it
    "gammas-empty": {"gammas": []}, "widths-negative": {"widths": [-5, 0]},
    "gammas-nan": {"gammas": [float("nan")]}, "gammas-text": {"gammas": ["a"]},
    "gammas-dup": {"gammas": [0.5, 0.5]}, "seeds-negative": {"seeds": [-1]},
    "tol-zero": {"tol": 0}, "max-steps-zero": {"max_steps": 0}, "widths-number": {"widths": 5},
    "name-escape": {"name": "../../escaped_phase"}, "c-inf": {"c": float("inf")},
    "schemes-unknown": {"schemes": ["nope"]}, "unknown-key": {"gama": [1.0]},
}


def _phase(w: Path, name: str, keys: dict) -> str:
    import yaml

    (w / "phase").mkdir(exist_ok=True)
    (w / f"phase/{name}.yaml").write_text(yaml.safe_dump(keys))
    return f"phase/{name}.yaml"


def _build_more(w: Path) -> None:
    """Specs, folders of each kind of result and checkpoints for the cases of issue 23."""
    import torch

    (w / "specs/empty.yaml").write_text("")
    (w / "empty.yaml").write_text("")
    _spec(w, "ok", name="ok")
    _spec(w, "device-zip", zip={"train.device": ["cpu", "auto"], "model.width": [4, 5]})
    _spec(w, "huge", grid={k: list(range(1, 11)) for k in HUGE_KEYS})
    _spec(w, "task-number", task=5)
    for name, keys in SWEEP_SPECS.items():
        _spec(w, name, **keys)
    (w / "specs/yaml-list.yaml").write_text("- 1\n")
    (w / "specs/syntax.yaml").write_text("grid: {model.width: [4\n")
    _phase(w, "ok", {"gammas": [1.5], "gamma_primes": [1.0], "widths": [4], "seeds": [0], "schemes": []})
    grid = [round(0.01 * k, 2) for k in range(1, 501)]
    _phase(w, "huge", {"gammas": grid, "gamma_primes": grid, "widths": [4]})  # 5 schemes, 2 seeds by default
    _phase(w, "huge-exact", {"gammas": grid, "gamma_primes": grid, "widths": [4, 8], "seeds": [0],
                             "schemes": []})
    (w / "done_sweep").mkdir()
    (w / "done_sweep/spec.yaml").write_text("name: other\n")
    (w / "done_sweep/plan.json").write_text("{}\n")
    (w / "done_phase").mkdir()
    (w / "done_phase/spec.yaml").write_text("task: phase-diagram\nname: other\n")
    (w / "done_phase/claims.json").write_text("{}\n")
    (w / "ckpt").mkdir()
    attn = "model.layers.0.self_attn."
    torch.save({f"{attn}{k}_proj.weight": torch.randn(8, 8) for k in "qkvo"}, w / "ckpt/attn.pt")
    torch.save({"fc.weight": torch.zeros(0, 4), "fc2.weight": torch.randn(3, 4)}, w / "ckpt/rows0.pt")
    torch.save({"fc.weight": torch.randn(4, 0), "fc2.weight": torch.randn(3, 4)}, w / "ckpt/cols0.pt")
    torch.save({"fc.weight": torch.randn(4, 4), "fc.bias": torch.randn(3)}, w / "ckpt/bias.pt")
    torch.save({"fc.weight": torch.randn(5, 4, dtype=torch.complex64)}, w / "ckpt/complex.pt")
    torch.save({"w": torch.randn(5, 4, dtype=torch.complex64)}, w / "ckpt/complex_unnamed.pt")
    shutil.copytree(w / "runs/earlier/seed0", w / "reduced/seed0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["reduce", str(w / "reduced/seed0"), "--epoch", "4"]) == 0
        assert main(["inspect", str(w / "ckpt/attn.pt"), "--out", str(w / "insp"), "--no-figures"]) == 0


HUGE_KEYS = ["model.width", "data.n", "train.epochs", "data.seed", "train.lr", "model.init_std", "data.high"]
SWEEP_SPECS = {  # a tiny base plus one bad axis each (a repeat is refused as `train` refuses it)
    "dup-seeds": {"seeds": {"init": [0, 0, 1]}}, "dup-width": {"grid": {"model.width": [4, 4]}},
    "dup-lr": {"grid": {"train.lr": [1.0e-3, 0.001]}}, "dup-data-seed": {"seeds": {"data": [1, 1]}},
    "dup-zip": {"zip": {"data.n": [8, 8], "data.high": [1.0, 1.0]}},
    "dup-list": {"list": [{"data.n": 8}, {"data.n": 8}]},
    "unknown-key": {"axes": {}}, "base-missing": {"base": "nope.yaml"},
    "grid-scalar": {"grid": {"model.width": 4}}, "grid-empty": {"grid": {"model.width": []}},
    "zip-lengths": {"zip": {"data.n": [8, 9], "data.high": [1.0]}},
    "seeds-zero": {"seeds": 0}, "seeds-unknown": {"seeds": {"model": 3}},
    "list-empty": {"list": []}, "key-twice": {"grid": {"data.n": [5]}, "list": [{"data.n": 4}]},
    "bad-value": {"grid": {"model.width": ["x"]}}, "unknown-config-key": {"grid": {"model.widht": [4]}},
    "negative-width": {"grid": {"model.width": [-4]}}, "set-not-mapping": {"set": [1]},
    # points that differ only in a key left out of the run hash would be merged into one run
    "device-axis": {"grid": {"train.device": ["cpu", "auto"]}},
    "checkpoint-axis": {"grid": {"train.checkpoint_seconds": [10, 20], "model.width": [4, 5]}},
    "name-axis": {"list": [{"name": "a"}, {"name": "b"}]},
}
SWEEP_NEEDLES = {
    "dup-seeds": "seeds.init=[0, 0, 1]", "dup-width": "grid.model.width=[4, 4]",
    "dup-lr": "grid.train.lr=[0.001, 0.001]", "dup-data-seed": "seeds.data=[1, 1]",
    "dup-zip": "zip group 1", "dup-list": "sweep list=", "unknown-key": "'axes'",
    "base-missing": "nope.yaml", "grid-scalar": "grid.model.width=4", "grid-empty": "grid.model.width=[]",
    "zip-lengths": "different lengths", "seeds-zero": "seeds.init=0", "seeds-unknown": "'seeds.model'",
    "list-empty": "'list'", "key-twice": "'data.n' is set by both", "bad-value": "model.width='x'",
    "unknown-config-key": "model.widht", "negative-width": "model.width=-4", "set-not-mapping": "'set'",
    "device-axis": "train.device='cpu' and train.device='auto' make the same run",
    "checkpoint-axis": "train.checkpoint_seconds=10.0 and train.checkpoint_seconds=20.0",
    "name-axis": "name='a' and name='b' make the same run",
}


def _name(value: str) -> list[str]:
    return ["train", *TINY, "--set", f"name={value}"]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("bad_inputs")
    cwd = os.getcwd()
    os.chdir(w)
    try:
        _build(w)
    finally:
        os.chdir(cwd)
    return w


def _act(text: str) -> list[str]:
    return ["train", *TINY, "--set", f"model.activations=[{text!r}]"]


# (id, argv, expected exit code, substrings of the one stderr line, how it runs)
CASES = [
    # --- output folders: never clobber, checked before training
    ("out-exists", ["train", *TINY, "--out", "runs/earlier"], 2,
     ["runs/earlier", "--resume", "--overwrite"], SUB),
    ("out-is-file", ["train", *TINY, "--out", "notes.txt"], 2, ["notes.txt", "is a file"], ""),
    ("out-under-file", ["train", *TINY, "--out", "notes.txt/sub"], 2, ["notes.txt/sub", "is a file"], ""),
    ("reproduce-out-exists", ["reproduce", "fig3", "--quick", "--out", "repro"], 2,
     ["repro", "already holds results", "--overwrite"], ""),
    ("reproduce-out-file", ["reproduce", "fig3", "--out", "notes.txt"], 2, ["notes.txt", "is a file"], ""),
    ("analyze-out-under-file", ["analyze", "runs/earlier/seed0", "--no-figures", "--no-replay", "--out",
                                "notes.txt/sub"], 2, ["notes.txt", "not a folder"], ""),
    # --- config files and YAML
    ("yaml-syntax", ["train", "bad.yaml", *TINY], 2, ["bad.yaml", "not valid YAML", "line"], SUB),
    ("yaml-python-tag", ["train", "evil.yaml", *TINY], 2, ["evil.yaml", "not valid YAML"], ""),
    ("yaml-not-mapping", ["train", "list.yaml", *TINY], 2, ["list.yaml", "mapping"], ""),
    ("config-missing", ["train", "nope.yaml"], 2, ["nope.yaml", "does not exist"], ""),
    ("config-is-folder", ["train", "runs"], 2, ["'runs'", "is a folder"], ""),
    ("config-and-preset", ["train", "bad.yaml", "--preset", "fig3"], 2, ["--preset", "not both"], ""),
    ("preset-unknown", ["train", "--preset", "fig99"], 2, ["fig99"], ""),
    # --- --set and flags
    ("set-unknown-key", ["train", *TINY, "--set", "model.widht=5"], 2, ["model.widht", "width"], ""),
    ("set-bad-value", ["train", *TINY, "--set", "model.width=abc"], 2, ["model.width='abc'", "integer"], ""),
    ("set-no-equals", ["train", *TINY, "--set", "model.width"], 2, ["model.width", "key=value"], ""),
    ("set-bad-yaml", ["train", *TINY, "--set", "train.lr=[1e-3"], 2, ["train.lr=[1e-3", "YAML"], ""),
    ("set-nan", ["train", *TINY, "--set", "train.lr=.nan"], 2, ["train.lr", "finite"], ""),
    ("set-negative-lr", ["train", *TINY, "--set", "train.lr=-1"], 2, ["train.lr=-1", "> 0"], ""),
    ("set-duplicate-lr", ["train", *TINY, "--set", "train.lr=[1e-3,0.001]"], 2,
     ["train.lr", "repeated values"], ""),
    ("set-optimizer", ["train", *TINY, "--set", "train.optimizer=lbfgs"], 2, ["'lbfgs'", "adam"], ""),
    ("seeds-text", ["train", *TINY, "--seeds", "abc"], 2, ["--seeds 'abc'", "range"], ""),
    ("seeds-zero", ["train", *TINY, "--seeds", "0"], 2, ["--seeds 0", ">= 1"], ""),
    ("seeds-empty-range", ["train", *TINY, "--seeds", "5-2"], 2, ["train.seeds", "empty"], ""),
    ("epochs-negative", ["train", *TINY, "--epochs", "-5"], 2, ["train.epochs=-5", "positive"], ""),
    ("dtype-choice", ["train", *TINY, "--dtype", "float16"], 2, ["float16", "float64"], ""),
    ("device-unknown", ["train", *TINY, "--device", "tpu"], 2, ["'tpu'", "cpu"], ""),
    ("snapshots-bad", ["train", *TINY, "--set", "train.snapshots=log:x"], 2, ["log:x", "every:K"], ""),
    ("snapshot-neurons-above-width", ["train", *TINY, "--set", "train.snapshot_neurons=5"], 2,
     ["train.snapshot_neurons=5", "model.width=4"], ""),
    ("snapshot-neurons-negative", ["train", *TINY, "--set", "train.snapshot_neurons=-1"], 2,
     ["train.snapshot_neurons=-1"], ""),
    # --- sizes that cannot fit: refused before allocating
    ("huge-width", ["train", *TINY, "--set", "model.width=1000000000"], 2, ["needs about", "GiB"], ""),
    ("huge-n", ["train", *TINY, "--set", "data.n=1000000000000"], 2, ["needs about", "data.n"], ""),
    ("huge-epochs", ["train", *TINY, "--set", "train.epochs=100000000000", "--set", "train.snapshots=log:5"],
     2, ["needs about"], ""),
    ("huge-snapshots", ["train", *TINY, "--set", "train.epochs=1000000000",
                        "--set", "train.snapshots=every:1"], 2, ["every:1", "snapshots"], ""),
    # --- data
    ("digits-other-d", ["train", *TINY, "--set", "data.source=digits", "--set", "data.d=10"], 2,
     ["data.d=10", "64"], ""),
    ("mnist-missing-dir", ["train", *TINY, *MNIST, "--set", "data.data_dir=nodir"], 2,
     ["nodir", "does not exist"], ""),
    ("mnist-corrupt", ["train", *TINY, *MNIST, "--set", "data.data_dir=mnist"], 2,
     ["train-images-idx3-ubyte", "truncated"], ""),
    ("reproduce-data-dir", ["reproduce", "mnist", "--quick", "--data-dir", "nodir"], 2,
     ["--data-dir 'nodir'", "not an existing folder"], ""),
    ("cifar-evil-pickle", ["reproduce", "fig2", "--quick", "--seeds", "1", "--data-dir", "evil",
                           "--out", "fresh"], 2,
     ["data_batch_1", "refusing to load global", "not loaded"], SUB),
    ("reproduce-unknown", ["reproduce", "fig9"], 2, ["'fig9'", "fig3"], ""),
    # --- activations
    ("act-constant", _act("1"), 2, ["'1'", "constant"], ""),
    ("act-zero-derivative", _act("relu(sin(x) - 2)"), 2, ["relu(sin(x) - 2)", "derivative 0"], ""),
    ("act-pole", _act("1/x"), 2, ["'1/x'", "not finite at 0"], ""),
    ("act-deep-minus", _act("-" * 300 + "x"), 2, ["nested deeper than 100"], SUB),
    ("act-too-long", _act("x+" * 1001 + "x"), 2, ["2000 characters"], ""),
    ("act-injection", _act("__import__('os').system('touch pwned')"), 2, ["__import__", "not allowed"], ""),
    ("act-unknown", _act("tanhh"), 2, ["'tanhh'", "known activations"], ""),
    ("activations-syntax", ["activations", "x**"], 2, ["x**", "invalid syntax"], ""),
    # --- corrupt records and impossible analysis options
    ("npy-truncated", ["analyze", "bad/trunc", "--no-figures"], 2, ["layer1.npy", "not a readable"], SUB),
    ("npy-empty", ["analyze", "bad/empty", "--no-figures"], 2,
     ["bad/empty/snapshots/layer1.npy", "corrupt"], ""),
    ("npy-pickled", ["analyze", "bad/pickled", "--no-figures"], 2, ["layer1.npy", "does not load"], ""),
    ("npz-wrong-shape", ["analyze", "bad/shape", "--no-figures"], 2,
     ["layer1", "has shape", "(5, 4, 3)"], ""),
    ("meta-json", ["analyze", "bad/meta", "--no-figures"], 2, ["bad/meta/meta.json", "not valid JSON"], ""),
    ("data-missing", ["analyze", "bad/nodata", "--no-figures"], 2, ["bad/nodata/data.npz", "missing"], ""),
    ("loss-npy", ["analyze", "bad/loss", "--no-figures"], 2, ["bad/loss/loss.npy", "not a readable"], ""),
    ("loss-csv", ["analyze", "bad/losscsv", "--no-figures"], 2, ["loss.csv", "epoch,loss"], ""),
    ("batch-json", ["analyze", "bad/batchjson", "--no-figures"], 2, ["batch.json", "not valid JSON"], ""),
    ("batch-one-corrupt", ["analyze", "bad/batch", "--no-figures", "--no-replay"], 2,
     ["seed1", "layer1.npy"], ""),
    ("not-a-run", ["analyze", "repro", "--no-figures"], 2, ["'repro'", "no meta.json"], ""),
    ("no-such-path", ["analyze", "nowhere", "--no-figures"], 2, ["'nowhere'", "not a folder"], ""),
    ("penalty-0", ["analyze", "runs/earlier", "--penalty", "0"], 2, ["--penalty 0.0", "> 0"], ""),
    ("penalty-nan", ["analyze", "runs/earlier", "--penalty", "nan"], 2, ["--penalty nan"], ""),
    ("mads-negative", ["analyze", "runs/earlier", "--negligible-mads", "-1"], 2,
     ["--negligible-mads -1.0", "> 0"], ""),
    ("min-share-above-1", ["analyze", "runs/earlier", "--min-share", "1.5"], 2,
     ["--min-share 1.5", "[0, 1]"], ""),
    ("epoch-not-recorded", ["analyze", "runs/earlier/seed0", "--epoch", "7", "--no-figures"], 2,
     ["epoch 7", "recorded"], ""),
    ("layer-too-deep", ["analyze", "runs/earlier/seed0", "--layer", "3", "--no-figures"], 2,
     ["--layer layer3", "matches no hidden layer", "layer1"], ""),
    ("layer-zero", ["analyze", "runs/earlier/seed0", "--layer", "0", "--no-figures"], 2, ["layer0"], ""),
    ("unknown-command", ["fly"], 2, ["'fly'"], ""),
    # --- a spec is data: its task is a registered name, nothing is imported (also with --dry-run)
    ("spec-task-trap-dry", ["sweep", "specs/trap.yaml", "--dry-run"], 2,
     ["task='helper_task'", "not a registered task", "phase"], SUB),
    ("spec-task-trap", ["sweep", "specs/trap.yaml", "--out", "sw/trap"], 2,
     ["task='helper_task'", "not a registered task"], SUB),
    ("spec-task-zen", ["sweep", "specs/zen.yaml", "--dry-run"], 2, ["task='this'", "facilitators"], SUB),
    ("spec-task-os", ["sweep", "specs/os.yaml", "--dry-run"], 2, ["task='os'", "not a registered task"], ""),
    # --- names are names: a folder made from one stays inside its root
    ("name-escape", _name("../../escaped_train"), 2, ["name='../../escaped_train'", "'..'"], SUB),
    ("name-slash", _name("a/b"), 2, ["name='a/b'", "path separator"], ""),
    ("name-backslash", _name("a\\b"), 2, ["name=", "path separator"], ""),
    ("name-absolute", _name("/tmp/escaped_abs"), 2, ["name='/tmp/escaped_abs'", "path separator"], ""),
    ("name-dot", _name(".hidden"), 2, ["name='.hidden'", "starts with '.'"], ""),
    ("name-dotdot", _name(".."), 2, ["name='..'"], ""),
    ("name-dash", _name("-rf"), 2, ["name='-rf'", "'-'"], ""),
    ("name-long", _name("n" * 101), 2, ["101 characters", "1-100"], ""),
    ("name-control", ["sweep", "specs/ctrl.yaml", "--dry-run"], 2, ["control character"], ""),
    ("name-empty", _name("''"), 2, ["name=''", "empty"], ""),
    ("sweep-name-escape", ["sweep", "specs/escape.yaml", "--dry-run"], 2,
     ["sweep name='x/../../../escaped_sweep'", "'..'"], ""),
    ("sweep-name-escape-run", ["sweep", "specs/escape.yaml"], 2, ["sweep name="], ""),
    ("sweep-name-dot", ["sweep", "specs/dotname.yaml"], 2, ["sweep name='.hidden'"], ""),
    ("sweep-name-long", ["sweep", "specs/longname.yaml", "--dry-run"], 2, ["101 characters"], ""),
    # --- phase diagram specs: every value range-checked before anything is planned
    *[(f"phase-{name}", ["phase-diagram", "--spec", f"phase/{name}.yaml", "--out", f"ph/{name}"], 2,
       [f"phase/{name}.yaml", needle], "") for name, needle in [
        ("gammas-empty", "gammas=[] is not accepted"), ("widths-negative", "widths=[-5, 0]"),
        ("gammas-nan", "gammas=[nan]"), ("gammas-text", "gammas=['a']"), ("gammas-dup", "repeated"),
        ("seeds-negative", "seeds=[-1]"), ("tol-zero", "tol=0"), ("max-steps-zero", "max_steps=0"),
        ("widths-number", "widths"), ("name-escape", "name='../../escaped_phase'"), ("c-inf", "c=inf"),
        ("unknown-key", "'gama'")]],
    ("phase-schemes-unknown", ["phase-diagram", "--spec", "phase/schemes-unknown.yaml"], 2,
     ["scheme 'nope'", "choose from"], ""),
    ("phase-depth-4", ["phase-diagram", "--depth", "4"], 2, ["--depth 4"], ""),
    ("phase-gamma2-depth2", ["phase-diagram", "--spec", "phase/ok.yaml", "--gamma2", "1"], 2,
     ["--gamma2 1.0", "only with 3"], ""),
    ("phase-spec-missing", ["phase-diagram", "--spec", "phase/none.yaml"], 2,
     ["phase/none.yaml", "does not exist"], ""),
    ("phase-spec-list", ["phase-diagram", "--spec", "list.yaml"], 2, ["list.yaml", "not a mapping"], ""),
    # --- sweep specs: repeats refused as in train, every value checked, empty refused
    *[(f"sweep-{name}", ["sweep", f"specs/{name}.yaml", "--dry-run"], 2, [needle], "")
      for name, needle in SWEEP_NEEDLES.items()],
    ("sweep-dup-seeds-run", ["sweep", "specs/dup-seeds.yaml", "--out", "sw/dup"], 2,
     ["seeds.init=[0, 0, 1]"], ""),
    ("sweep-device-zip", ["sweep", "specs/device-zip.yaml", "--dry-run"], 0,
     ["2 runs in 2 batches", "dry run"], ""),  # a device per point of other settings: two runs
    ("sweep-dry-estimate", ["sweep", "specs/ok.yaml", "--dry-run"], 0,
     ["of memory", "of disk", "on one CPU core", "rough estimate"], ""),
    ("sweep-empty", ["sweep", "specs/empty.yaml", "--dry-run"], 2, ["specs/empty.yaml", "is empty"], ""),
    ("sweep-spec-missing", ["sweep", "specs/none.yaml"], 2, ["specs/none.yaml", "does not exist"], ""),
    ("sweep-spec-list", ["sweep", "specs/yaml-list.yaml"], 2, ["mapping"], ""),
    ("sweep-spec-syntax", ["sweep", "specs/syntax.yaml"], 2, ["YAML"], ""),
    ("sweep-task-number", ["sweep", "specs/task-number.yaml", "--dry-run"], 2, ["task=5", "registered"], ""),
    ("sweep-executor-unknown", ["sweep", "specs/ok.yaml", "--executor", "dask"], 2, ["'dask'"], ""),
    ("sweep-address-local", ["sweep", "specs/ok.yaml", "--address", "1.2.3.4:5", "--dry-run"], 2,
     ["--address", "ray"], ""),
    ("sweep-cpus-local", ["sweep", "specs/ok.yaml", "--cpus-per-batch", "2", "--dry-run"], 2,
     ["--cpus-per-batch", "ray"], ""),
    # --- plan before work: counted before expanded, refused beyond the limit without --yes
    ("sweep-huge-dry", ["sweep", "specs/huge.yaml", "--dry-run"], 2, ["10,000,000 runs", "--yes"], ""),
    ("sweep-huge", ["sweep", "specs/huge.yaml", "--out", "sw/huge"], 2, ["10,000,000 runs", "100,000"], ""),
    ("phase-huge-dry", ["phase-diagram", "--spec", "phase/huge.yaml", "--dry-run"], 2,
     ["at least 250,000 runs (250000 x 1 x 1)"], ""),
    ("phase-huge-exact", ["phase-diagram", "--spec", "phase/huge-exact.yaml", "--dry-run"], 2,
     ["plans 500,000 runs (250000 x 1 x 2)", "--yes"], ""),
    ("phase-out-sweep-dry", ["phase-diagram", "--spec", "phase/ok.yaml", "--out", "done_sweep",
                             "--dry-run"], 2, ["sweep result"], ""),
    ("phase-huge", ["phase-diagram", "--spec", "phase/huge.yaml", "--out", "ph/huge"], 2,
     ["at least 250,000 runs", "--yes"], ""),
    # --- one output-folder rule: another kind of result, or other settings, is never replaced
    ("sweep-out-train-batch", ["sweep", "specs/ok.yaml", "--out", "runs/earlier", "--dry-run"], 2,
     ["runs/earlier", "train batch", "not a sweep"], ""),
    ("sweep-out-phase", ["sweep", "specs/ok.yaml", "--out", "done_phase"], 2,
     ["done_phase", "phase diagram result"], ""),
    ("sweep-out-reproduce", ["sweep", "specs/ok.yaml", "--out", "repro"], 2,
     ["repro", "reproduce result"], ""),
    ("sweep-out-run", ["sweep", "specs/ok.yaml", "--out", "runs/earlier/seed0"], 2, ["run result"], ""),
    ("phase-out-sweep", ["phase-diagram", "--spec", "phase/ok.yaml", "--out", "done_sweep"], 2,
     ["done_sweep", "sweep result", "not a phase diagram"], ""),
    ("phase-out-other-spec", ["phase-diagram", "--spec", "phase/ok.yaml", "--out", "done_phase"], 2,
     ["done_phase", "other settings", "--overwrite"], ""),
    ("phase-out-train-batch", ["phase-diagram", "--spec", "phase/ok.yaml", "--out", "runs/earlier"], 2,
     ["train batch"], ""),
    ("phase-out-other-files", ["phase-diagram", "--spec", "phase/ok.yaml", "--out", "ckpt"], 2,
     ["ckpt", "other files"], ""),
    ("reduce-other-settings", ["reduce", "reduced/seed0", "--epoch", "4", "--negligible", "drop"], 2,
     ["reduction.json", "other settings (negligible)", "--overwrite"], ""),
    ("reduce-other-tol", ["reduce", "reduced/seed0", "--epoch", "4", "--amplitude-tol", "0.2"], 2,
     ["other settings (amplitude_tol)"], ""),
    ("train-empty-config", ["train", "empty.yaml"], 2, ["empty.yaml", "is empty"], ""),
    ("sweep-out-file", ["sweep", "specs/ok.yaml", "--out", "notes.txt"], 2, ["notes.txt", "is a file"], ""),
    ("sweep-out-under-file", ["sweep", "specs/ok.yaml", "--out", "notes.txt/sub", "--dry-run"], 2,
     ["notes.txt", "is a file"], ""),
    ("phase-out-file", ["phase-diagram", "--spec", "phase/ok.yaml", "--out", "notes.txt"], 2,
     ["notes.txt", "is a file"], ""),
    ("inspect-out-taken", ["inspect", "ckpt/attn.pt", "--heads", "2", "--out", "insp"], 2,
     ["insp/inspect.json", "an inspect with other settings (heads)", "--overwrite"], ""),
    ("report-out-other-file", ["report", "runs/earlier", "--out", "notes.txt"], 2, ["notes.txt"], ""),
    ("train-out-phase", ["train", *TINY, "--out", "done_phase"], 2,
     ["done_phase", "a phase diagram result, not a train batch", "never replaced"], ""),
    # --- range checks on the newer surfaces
    ("reduce-tol-negative", ["reduce", "reduced/seed0", "--amplitude-tol", "-5"], 2,
     ["--amplitude-tol -5.0", ">= 0"], ""),
    ("reduce-tol-nan", ["reduce", "reduced/seed0", "--amplitude-tol", "nan"], 2, ["--amplitude-tol nan"], ""),
    ("reduce-tol-inf", ["reduce", "reduced/seed0", "--amplitude-tol", "inf"], 2, ["--amplitude-tol inf"], ""),
    ("reduce-tol-text", ["reduce", "reduced/seed0", "--amplitude-tol", "abc"], 2, ["'abc'"], ""),
    ("reduce-negligible", ["reduce", "reduced/seed0", "--negligible", "melt"], 2, ["'melt'", "merge"], ""),
    ("reduce-layer-3", ["reduce", "reduced/seed0", "--layer", "3"], 2, ["layer3"], ""),
    ("reduce-no-run", ["reduce", "nowhere"], 2, ["'nowhere'"], ""),
    ("reduce-epoch", ["reduce", "reduced/seed0", "--epoch", "7"], 2, ["epoch 7"], ""),
    ("inspect-heads-0", ["inspect", "ckpt/attn.pt", "--heads", "0"], 2, ["--heads 0", ">= 1"], ""),
    ("inspect-heads-negative", ["inspect", "ckpt/attn.pt", "--heads", "-2"], 2, ["--heads -2", ">= 1"], ""),
    ("inspect-heads-3", ["inspect", "ckpt/attn.pt", "--heads", "3"], 2, ["--heads 3", "divides 8"], ""),
    ("inspect-heads-text", ["inspect", "ckpt/attn.pt", "--heads", "two"], 2, ["'two'"], ""),
    ("inspect-missing", ["inspect", "ckpt/none.pt"], 2, ["ckpt/none.pt"], ""),
    ("inspect-not-a-checkpoint", ["inspect", "notes.txt"], 2, ["notes.txt"], ""),
    ("inspect-penalty-0", ["inspect", "ckpt/attn.pt", "--penalty", "0"], 2, ["--penalty 0.0"], ""),
    ("inspect-min-share", ["inspect", "ckpt/attn.pt", "--min-share", "2"], 2, ["--min-share 2.0"], ""),
    # weights that cannot be read as rows of neurons: skipped with the reason (exit 0), no traceback
    ("inspect-rows-0", ["inspect", "ckpt/rows0.pt"], 0, ["skipped fc", "(0, 4)", "no rows"], ""),
    ("inspect-cols-0", ["inspect", "ckpt/cols0.pt"], 0,
     ["skipped fc", "(4, 0)", "no rows or no columns"], ""),
    ("inspect-bias-length", ["inspect", "ckpt/bias.pt"], 0, ["skipped fc", "bias of 3"], ""),
    ("inspect-complex", ["inspect", "ckpt/complex.pt"], 0, ["skipped fc", "complex", "not accepted"], ""),
    ("inspect-complex-unnamed", ["inspect", "ckpt/complex_unnamed.pt"], 0,
     ["skipped (root)", "w", "no rule"], ""),
    # --- reproduce --executor does what it says or is refused
    ("reproduce-ray-fig3", ["reproduce", "fig3", "--quick", "--executor", "ray"], 2,
     ["--executor ray", "'fig3'", "facilitators"], ""),
    ("reproduce-ray-all", ["reproduce", "all", "--quick", "--executor", "ray"], 2, ["'all'"], ""),
    ("reproduce-address-fig3", ["reproduce", "fig3", "--quick", "--address", "1.2.3.4:5"], 2,
     ["--address", "'fig3'"], ""),
    ("reproduce-executor-unknown", ["reproduce", "fig3", "--executor", "dask"], 2, ["'dask'"], ""),
    # --- data that overflow the training dtype are named, not "diverged at epoch 0"
    ("target-overflow", ["train", *TINY, "--set", "data.target=exp(100*x1)", "--out", "tr/ovf"], 2,
     ["exp(100*x1)", "overflow float32", "float64"], ""),
    ("target-power", ["train", *TINY, "--set", "data.target=x1**10000000", "--out", "tr/pow"], 2,
     ["x1**10000000", "non-finite"], ""),
]


def _checksums(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def subprocesses(workspace) -> dict:
    """The SUB cases, started together (startup is mostly importing torch), with the workspace
    checksums before and after all of them."""
    env = dict(os.environ, PYTHONPATH=str(Path(condlab.__file__).parents[1]), OMP_NUM_THREADS="1")
    before = _checksums(workspace)
    procs = {name: subprocess.Popen([sys.executable, "-m", "condlab", *argv], cwd=workspace, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, argv, _, _, how in CASES if how == SUB}
    results = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        results[name] = (proc.returncode, out, err)
    return {"results": results, "before": before, "after": _checksums(workspace)}


def _run(argv: list[str], cwd: Path, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    cwd_before = os.getcwd()
    os.chdir(cwd)
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own exit
        code = exit_.code
    finally:
        os.chdir(cwd_before)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, workspace, subprocesses, capsys):
    name, argv, code, needles, how = case
    if how == SUB:
        (got, out, err), before = subprocesses["results"][name], subprocesses["before"]
    else:
        before = _checksums(workspace)
        got, out, err = _run(argv, workspace, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in out + err, err
    assert got == code, (out, err)
    if code == 0:  # handled: the reason is one line of the output
        said = [line for line in (out + err).splitlines() if all(n in line for n in needles)]
        assert len(said) == 1, (needles, out, err)
    else:
        assert len(lines) == 1, err
        assert "error:" in lines[0]
        for needle in needles:
            assert needle in lines[0], (needle, lines[0])
    assert "allow_pickle" not in err  # never suggest the unsafe way to load a record
    after = subprocesses["after"] if how == SUB else _checksums(workspace)
    assert {k: after.get(k) for k in before} == before  # earlier results are untouched
    assert not (workspace / "pwned").exists()
    assert not [p for p in workspace.parent.rglob("escaped*")] and not Path("/tmp/escaped_abs").exists()
    assert "TRAPPED" not in out + err and "Beautiful is better" not in out + err  # nothing imported
    if name == "batch-one-corrupt":
        assert "seed0" in out  # the other run of the batch was analysed


def test_a_spec_imports_nothing_even_with_its_folder_on_the_path(tmp_path, monkeypatch, capsys):
    """The booby-trapped module is importable (its folder on sys.path, as for `python -m`), and
    neither planning, --dry-run nor a real sweep imports it."""
    import yaml

    (tmp_path / "helper_task.py").write_text("open('pwned', 'w').close()\n")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({"base": SPEC_BASE, "task": "helper_task"}))
    monkeypatch.syspath_prepend(str(tmp_path))
    for argv in (["sweep", "spec.yaml", "--dry-run"], ["sweep", "spec.yaml", "--out", "o"]):
        code, _, err = _run(argv, tmp_path, capsys)
        assert code == 2 and "not a registered task" in err
    assert "helper_task" not in sys.modules
    assert sorted(p.name for p in tmp_path.iterdir()) == ["helper_task.py", "spec.yaml"]


# --- the Python API: the same checks, as one-line exceptions (nothing written, nothing imported)
def _api_cases():
    import condlab
    from condlab.reproduce import reproduce
    from condlab.sweeps._plan import make_plan
    from condlab.training import Config

    tiny = {"base": SPEC_BASE}
    state = {f"a.self_attn.{k}_proj.weight": np.ones((8, 8), np.float32) for k in "qkvo"}
    return [
        ("api-sweep-empty", lambda: condlab.sweep({}), "the sweep spec is empty"),
        ("api-task-this", lambda: make_plan({**tiny, "task": "this"}),
         "task='this' is not a registered task"),
        ("api-task-module", lambda: make_plan({**tiny, "task": "os.path"}), "not a registered task"),
        ("api-sweep-name", lambda: make_plan({**tiny, "name": "../up"}), "sweep name='../up'"),
        ("api-sweep-dup", lambda: make_plan({**tiny, "grid": {"model.width": [4, 4]}}), "repeated values"),
        ("api-sweep-huge", lambda: make_plan({**tiny, "grid": {k: list(range(1, 11)) for k in HUGE_KEYS}}),
         "10,000,000 runs"),
        ("api-config-name", lambda: Config.from_dict({"name": "a/b"}), "name='a/b'"),
        ("api-config-name-dot", lambda: Config.from_dict({"name": ".x"}), "name='.x'"),
        ("api-inspect-heads", lambda: condlab.inspect(_tensors(state), heads=0), "heads="),
        ("api-inspect-heads-3", lambda: condlab.inspect(_tensors(state), heads=3), "divides 8"),
        ("api-reproduce-ray", lambda: reproduce("fig3", quick=True, executor="ray"), "--executor ray"),
        ("api-diagram-huge", lambda: _huge_diagram(), "500,010 runs (250005 x 2 x 1)"),
    ]


def _huge_diagram():
    from condlab.phase import DiagramSpec
    from condlab.phase._diagram import plan_diagram

    grid = [round(0.01 * k, 2) for k in range(1, 501)]
    return plan_diagram(DiagramSpec(gammas=grid, gamma_primes=grid, widths=[4]))


def _tensors(state):
    import torch

    return {k: torch.as_tensor(v) for k, v in state.items()}


API_IDS = ["api-sweep-empty", "api-task-this", "api-task-module", "api-sweep-name", "api-sweep-dup",
           "api-sweep-huge", "api-config-name", "api-config-name-dot", "api-inspect-heads",
           "api-inspect-heads-3", "api-reproduce-ray", "api-diagram-huge"]


@pytest.mark.parametrize("case", API_IDS)
def test_bad_input_through_the_api(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _, call, needle = next(c for c in _api_cases() if c[0] == case)
    with pytest.raises(ValueError) as err:  # ConfigError is a ValueError
        call()
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_the_zen_is_not_imported_by_a_spec(capsys):
    from condlab.sweeps._plan import make_plan

    was = "this" in sys.modules
    with pytest.raises(ValueError):
        make_plan({"base": SPEC_BASE, "task": "this"})
    assert ("this" in sys.modules) == was and "Beautiful" not in capsys.readouterr().out


def test_no_misleading_compile_message_is_left():
    """There is no compiled line counter any more: no message may say one is being compiled."""
    src = Path(condlab.__file__).parent
    said = [p for p in src.rglob("*.py") if "compiling the line counter" in p.read_text()]
    assert said == []


# --- records are verified, not trusted: resume retrains a damaged run, named by its path
def test_sweep_resume_retrains_damaged_runs_and_names_them(tmp_path, capsys):
    import yaml

    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "dmg", "base": SPEC_BASE, "seeds": 5}))
    out = tmp_path / "o"
    assert _run(["sweep", "spec.yaml", "--out", "o", "--no-progress"], tmp_path, capsys)[0] == 0
    runs = sorted((out / "runs").iterdir())
    (runs[0] / "meta.json").write_text("[1, 2]")                    # a JSON list
    meta = (runs[1] / "meta.json").read_bytes()
    (runs[1] / "meta.json").write_bytes(meta[: len(meta) // 2])     # truncated
    (runs[2] / "snapshots/layer1.npy").unlink()                      # arrays deleted
    (runs[2] / "loss.npy").unlink()
    snap = (runs[3] / "snapshots/layer1.npy").read_bytes()
    (runs[3] / "snapshots/layer1.npy").write_bytes(snap[:-8])      # cut short
    kept = (runs[4] / "meta.json").read_bytes()
    code, dry, err = _run(["sweep", "spec.yaml", "--out", "o", "--dry-run"], tmp_path, capsys)
    assert code == 0 and "1 already done, 4 to train" in dry and "Traceback" not in err
    assert "of memory" in dry and "of disk" in dry  # the dry run's estimates
    code, _, err = _run(["sweep", "spec.yaml", "--out", "o", "--no-progress"], tmp_path, capsys)
    assert code == 0 and "Traceback" not in err
    whys = ["JSON list", "not valid JSON", "loss.npy is missing", "layer1.npy is truncated"]
    for run, why in zip(runs[:4], whys, strict=True):
        said = [line for line in err.splitlines()
                if str(run) in line and why in line and "trained again" in line]
        assert said, err
    assert (runs[4] / "meta.json").read_bytes() == kept  # the sound run is not retrained
    code, again, err = _run(["sweep", "spec.yaml", "--out", "o", "--no-progress"], tmp_path, capsys)
    assert code == 0 and "skipped 5 already done" in again and err == ""


# --- a user's loop is never broken by condlab
def test_tracker_step_records_nan_weights_and_goes_on(tmp_path):
    import torch

    from condlab import Tracker

    net = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    tracker = Tracker(net, out=tmp_path / "trk", every=1)
    for step in range(4):
        if step == 2:
            with torch.no_grad():
                net[0].weight.fill_(float("nan"))
        tracker.step(step, float("nan") if step >= 2 else 1.0)  # never raises
    tracker.close()
    assert [layer for _, layer in tracker.nonfinite] == ["0", "0"]
    rows = tracker.history
    bad = rows[rows["note"].str.contains("non-finite", na=False)]
    assert len(bad) == 2 and bad["lines"].isna().all()


def test_a_sweep_device_missing_here_is_refused_before_anything_is_written(tmp_path, capsys):
    import torch
    import yaml

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    base = {**SPEC_BASE, "train": {**SPEC_BASE["train"], "device": "cuda"}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({"base": base}))
    code, _, err = _run(["sweep", "spec.yaml", "--out", "o"], tmp_path, capsys)
    assert code == 2 and "device 'cuda' is not available here" in err
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == [".lock"]  # no spec.yaml, plan.json, runs


@pytest.mark.parametrize("argv", [["sweep", "specs/huge.yaml", "--dry-run"],
                                  ["phase-diagram", "--spec", "phase/huge.yaml", "--dry-run"]])
def test_a_huge_plan_is_refused_before_torch_is_imported(argv, workspace):
    """10^7 planned runs are counted, not expanded, and refused before the heavy imports (the
    answer comes in well under a second of work)."""
    code = (f"import sys; from condlab._cli import main; rc = main({argv!r}); "
            "print(rc, 'torch' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=str(Path(condlab.__file__).parents[1]))
    proc = subprocess.run([sys.executable, "-c", code], cwd=workspace, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.stdout.split() == ["2", "False"], (proc.stdout, proc.stderr)
    assert "more than the limit of 100,000" in proc.stderr


# --- the one output-folder rule: every command twice into one folder with other settings
PHASE_A = {"gammas": [1.5], "gamma_primes": [1.0], "widths": [4], "seeds": [0], "schemes": [],
           "max_steps": 100}
REPRO = ["reproduce", "simple-target", "--quick", "--data-seeds", "1", "--out", "D", "--no-progress"]
# mnist without its files: a claims.json of an experiment not run (fast; nothing trained)
MNIST_NOT_RUN = ["reproduce", "mnist", "--quick", "--data-dir", "nodata", "--out", "D", "--no-progress"]
SLOW, EXPERIMENT = pytest.mark.slow, pytest.mark.experiment
TWICE = [  # first run, second run with other settings, substrings of its one-line refusal
    pytest.param(["train", *TINY, "--out", "D"], ["train", *TINY, "--set", "model.width=5", "--out", "D"],
                 ["'D'", "train batch with other settings (model.width)", "--overwrite"], id="train"),
    pytest.param([*MNIST_NOT_RUN, "--seeds", "1"], [*MNIST_NOT_RUN, "--seeds", "2"],
                 ["'D'", "(mnist: init_seeds)", "--overwrite"], id="reproduce"),
    pytest.param([*REPRO, "--seeds", "1"], [*REPRO, "--seeds", "2"],  # trains the experiment (~2 s)
                 ["'D'", "(simple-target: init_seeds)", "--overwrite"], marks=EXPERIMENT,
                 id="reproduce-trained"),
    pytest.param(["sweep", "a.yaml", "--out", "D", "--no-progress"],
                 ["sweep", "b.yaml", "--out", "D", "--no-progress"],
                 ["/w/D'", "sweep with other settings (spec.yaml: grid)", "--overwrite"], id="sweep"),
    pytest.param(["phase-diagram", "--spec", "pa.yaml", "--out", "D", "--no-progress"],  # ~7 s: slow
                 ["phase-diagram", "--spec", "pb.yaml", "--out", "D", "--no-progress"],
                 ["'D'", "phase diagram with other settings", "--overwrite"], marks=SLOW, id="phase-diagram"),
    pytest.param(["reduce", "A/seed0", "--epoch", "4", "--out", "D"],
                 ["reduce", "A/seed0", "--epoch", "4", "--negligible", "drop", "--out", "D"],
                 ["D/seed0/reduction.json", "other settings (negligible)", "--overwrite"], id="reduce"),
    pytest.param(["analyze", "A/seed0", "--no-replay", "--out", "D"],
                 ["analyze", "B/seed0", "--no-replay", "--out", "D"],
                 ["D/seed0/epoch", "analysis with other settings (run)", "--overwrite"], id="analyze"),
    pytest.param(["inspect", "attn.pt", "--out", "D"], ["inspect", "attn.pt", "--heads", "2", "--out", "D"],
                 ["D/inspect.json", "other settings (heads)", "--overwrite"], id="inspect"),
    pytest.param(["report", "A", "--out", "D/page.html"], ["report", "B", "--out", "D/page.html"],
                 ["D/page.html", "report with other settings (result)", "--overwrite"], id="report"),
]


@pytest.fixture(scope="module")
def twice_inputs(tmp_path_factory) -> Path:
    """Two tiny batches (A, B: each a seed0), a checkpoint, two sweep specs and two diagram specs."""
    import torch
    import yaml

    w = tmp_path_factory.mktemp("twice")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, seed in (("A", "0"), ("B", "1")):
            assert main(["train", *TINY, "--set", f"data.seed={seed}", "--out", str(w / name)]) == 0
    attn = "model.layers.0.self_attn."
    torch.save({f"{attn}{k}_proj.weight": torch.randn(8, 8) for k in "qkvo"}, w / "attn.pt")
    for name, width in (("a", 4), ("b", 5)):
        (w / f"{name}.yaml").write_text(yaml.safe_dump({"base": SPEC_BASE, "grid": {"model.width": [width]}}))
    (w / "pa.yaml").write_text(yaml.safe_dump(PHASE_A))
    (w / "pb.yaml").write_text(yaml.safe_dump({**PHASE_A, "gammas": [1.0]}))
    (w / "nodata").mkdir()
    return w


@pytest.mark.parametrize("first, second, needles", TWICE)
def test_every_command_twice_into_one_folder(first, second, needles, twice_inputs, tmp_path, capsys):
    """The second run, of other settings, is refused with one line naming --overwrite; every byte
    the first run wrote (and every input) is the same after it; nothing is written outside."""
    w = tmp_path / "w"
    shutil.copytree(twice_inputs, w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code, out, err = _run(first, w, capsys)
    assert code in (0, 3) and "Traceback" not in err, err  # 3: a diagram's claims may fail: written
    assert (w / "D").is_dir() and any((w / "D").rglob("*")), "the first run wrote nothing into D"
    before = _checksums(tmp_path)
    code, out, err = _run(second, w, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in out + err, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert _checksums(tmp_path) == before  # nothing replaced, added or removed, here or beside it


SAME = [  # the same settings again: resumed or nothing to do, said in one line; nothing rewritten
    pytest.param(["train", *TINY, "--out", "D"], "already holds this config's batch, complete", id="train"),
    pytest.param([*MNIST_NOT_RUN, "--seeds", "1"], "already reproduced with these settings", id="reproduce"),
    pytest.param([*REPRO, "--seeds", "1"], "already reproduced with these settings", marks=EXPERIMENT,
                 id="reproduce-trained"),
    pytest.param(["sweep", "a.yaml", "--out", "D", "--no-progress"], "skipped 1 already done", id="sweep"),
]


@pytest.mark.parametrize("argv, said", SAME)
def test_the_same_settings_twice_change_nothing(argv, said, twice_inputs, tmp_path, capsys):
    w = tmp_path / "w"
    shutil.copytree(twice_inputs, w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _run(argv, w, capsys)[0] == 0
    before = _checksums(w / "D")
    code, out, err = _run(argv, w, capsys)
    assert code == 0 and "Traceback" not in err and said in out + err, (out, err)
    after = _checksums(w / "D")
    assert {k: after.get(k) for k in before} == before


def test_train_into_an_interrupted_batch_of_the_same_config_resumes_it(tmp_path, monkeypatch, capsys):
    """A folder holding only a checkpoint (a batch killed mid-run): the same config continues it
    (as `--resume` does), another config is refused naming the key that differs."""
    from condlab.training._checkpoint import write_checkpoint

    kept = []

    def keep_one(path, config, params, optimizer, dropout, state, *args):
        if state.epoch == 2:
            write_checkpoint(path, config, params, optimizer, dropout, state, *args)
            kept.append(path.read_bytes())

    fast = [*TINY, "--set", "train.checkpoint_seconds=1e-9"]
    monkeypatch.setattr("condlab.training._api.write_checkpoint", keep_one)
    assert _run(["train", *fast, "--out", "a"], tmp_path, capsys)[0] == 0
    monkeypatch.undo()
    (tmp_path / "b").mkdir()
    (tmp_path / "b/checkpoint.pt").write_bytes(kept[0])
    code, _, err = _run(["train", *TINY, "--set", "model.width=5", "--out", "b"], tmp_path, capsys)
    assert code == 2 and "train batch with other settings (model.width)" in err
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["checkpoint.pt"]
    code, out, err = _run(["train", *TINY, "--out", "b"], tmp_path, capsys)
    assert code == 0 and "complete" in out, (out, err)
    for name in ("loss.npy", "snapshots/layer1.npy"):  # the same records as the uninterrupted batch
        assert (tmp_path / "a/seed0" / name).read_bytes() == (tmp_path / "b/seed0" / name).read_bytes()


def test_a_report_in_its_own_folder_is_rewritten_after_the_folder_moves(twice_inputs, tmp_path, capsys):
    """PATH/report.html belongs to PATH wherever PATH is: a copied folder's page is rewritten;
    --out onto the page of another result is refused."""
    w = tmp_path / "w"
    shutil.copytree(twice_inputs, w)
    assert _run(["report", "A"], w, capsys)[0] == 0
    shutil.copytree(w / "A", w / "C")
    code, out, err = _run(["report", "C"], w, capsys)
    assert code == 0 and "C/report.html" in out, err
    code, _, err = _run(["report", "B", "--out", "C/report.html"], w, capsys)
    assert code == 2 and "report with other settings (result)" in err and "--overwrite" in err
    assert _run(["report", "B", "--out", "C/report.html", "--overwrite"], w, capsys)[0] == 0
