"""The condlab command line, as a user types it."""

import json
import subprocess
import sys

import pytest

from condlab._cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_activations_table_prints_computed_multiplicities(capsys):
    code, out, _ = run_cli(capsys, "activations")
    assert code == 0
    rows = {line.split()[0]: line.split()[-1] for line in out.splitlines()[1:]}
    expected = {"tanh": "1", "sigmoid": "1", "softplus": "1", "gelu": "1", "silu": "1",
                "xtanh": "2", "x2tanh": "3", "relu": "undefined"}
    for name, p in expected.items():
        assert rows[name] == p, name


@pytest.mark.parametrize("expr,p", [("x**3*tanh(x)", 4), ("sin(x)**2", 2)])
def test_activations_of_an_expression(capsys, expr, p):
    code, out, _ = run_cli(capsys, "activations", expr, "--json")
    assert code == 0 and json.loads(out)[0]["p"] == p


def test_unknown_activation_is_one_line_error(capsys):
    code, _, err = run_cli(capsys, "activations", "tanhh")
    assert code == 2 and err.count("\n") == 1 and "known activations" in err


def test_train_preset_fig3_eight_seeds(capsys, tmp_path):
    out = tmp_path / "fig3"
    code, stdout, _ = run_cli(capsys, "train", "--preset", "fig3", "--seeds", "8", "--out", str(out),
                              "--set", "train.epochs=20", "--no-progress")
    assert code == 0
    runs = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert runs == [f"seed{i}" for i in range(8)]
    batch = json.loads((out / "batch.json").read_text())
    assert batch["batch_runs"] == 8                 # one batched computation, not 8
    assert "8 runs trained as one batch" in stdout


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["train", "--preset", "fig3", "--set", "train.lrr=1"], "unknown key 'train.lrr'"),
        (["train", "--preset", "nope"], "known presets are fig3"),
        (["train", "--preset", "fig3", "--set", "model.activations=[foo]"], "unknown activation 'foo'"),
        (["train", "--preset", "fig3", "--device", "tpu"], "device 'tpu'"),
        (["train", "missing.yaml"], "does not exist"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, tmp_path, argv, needle):
    code, _, err = run_cli(capsys, *argv, "--out", str(tmp_path / "o"))
    assert code == 2
    assert err.startswith("condlab: error:") and err.count("\n") == 1 and needle in err, err


def test_bad_seeds_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", "--seeds", "x"])
    assert info.value.code == 2
    assert "--seeds 'x'" in capsys.readouterr().err


def test_diverged_run_exits_3_and_names_the_epoch(capsys, tmp_path):
    code, _, err = run_cli(
        capsys, "train", "--out", str(tmp_path / "d"), "--no-progress",
        "--set", "train.optimizer=gd", "--set", "train.lr=100", "--set", "model.init_std=0.5",
        "--set", "model.activations=x2tanh", "--set", "train.epochs=100", "--dtype", "float64")
    assert code == 3
    assert "diverged: loss not finite at epoch" in err


def test_config_command_prints_resolved_json(capsys):
    code, out, _ = run_cli(capsys, "config", "--preset", "fig5", "--set", "train.lr=1e-4")
    cfg = json.loads(out)
    assert code == 0 and cfg["train"]["lr"] == [1e-4] and cfg["data"]["target"] == "fig5"


def test_console_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "condlab", "presets"], capture_output=True, text=True)
    assert proc.returncode == 0 and "fig3-xtanh" in proc.stdout


def test_layer_means_one_thing_a_name_glob_or_number(tmp_path, capsys):
    # --layer selects layers by name or glob everywhere; K is shorthand for layerK
    from condlab._cli import _layer

    picked = [_layer(t) for t in ("2", "layer2", "fc*", " h.0.attn.* ")]
    assert picked == ["layer2", "layer2", "fc*", "h.0.attn.*"]
    assert main(["train", "--preset", "fig3", "--seeds", "1", "--epochs", "3", "--out", str(tmp_path / "b"),
                 "--no-progress"]) == 0
    capsys.readouterr()
    run = str(tmp_path / "b" / "seed0")
    assert main(["analyze", run, "--layer", "layer*", "--json", "--no-figures", "--no-replay"]) == 0
    assert main(["analyze", run, "--layer", "7", "--json", "--no-figures", "--no-replay"]) == 2
    assert "matches no hidden layer" in capsys.readouterr().err


def test_every_table_has_json_and_listing_has_one_form(capsys):
    import json

    for argv in (["presets", "--json"], ["experiments", "--json"], ["activations", "--json"]):
        assert main(argv) == 0
        assert json.loads(capsys.readouterr().out)
    with pytest.raises(SystemExit) as stop:  # one form of listing: `condlab experiments`
        main(["reproduce", "--list"])
    assert stop.value.code == 2


@pytest.mark.parametrize("verdicts, line", [
    (["holds", "holds"], "all claims hold"),
    (["holds", "inconclusive"], "SOME CLAIMS INCONCLUSIVE, none fails"),
    (["inconclusive", "fails"], "SOME CLAIMS FAIL"),
])
def test_reproduce_summary_tells_a_failure_from_an_inconclusive_claim(verdicts, line):
    from condlab._cli_lists import _summary

    assert _summary("ran", verdicts) == line
    assert _summary("skipped", verdicts) == "NOT RUN"
