"""condlab reproduce: claims.json, real-data experiments on generated files, summaries."""

import json

import numpy as np
import pytest

from condlab._cli import main
from condlab.reproduce import EXPERIMENTS, Claim, ExperimentResult, reproduce, write_summary
from condlab.training._datasets import write_cifar10, write_mnist

NAMES = ["fig2", "fig3", "fig4", "fig4-plain", "fig5", "fig6", "evolution", "relu",
         "simple-target", "mnist", "optimistic", "embedding", "transformer",
         "facilitators"]


def test_every_experiment_of_the_documents_is_listed(capsys):
    assert sorted(EXPERIMENTS) == sorted(NAMES)
    assert main(["experiments"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in NAMES)


def test_unknown_experiment_is_a_one_line_error(capsys):
    assert main(["reproduce", "fig9"]) == 2
    assert "unknown experiment 'fig9'" in capsys.readouterr().err


@pytest.mark.experiment
def test_claims_json_schema(tmp_path):
    reproduce("simple-target", seeds=[0], data_seeds=[0, 1], quick=True, out=tmp_path)
    data = json.loads((tmp_path / "simple-target" / "claims.json").read_text())
    for key in ("experiment", "seeds", "init_seeds", "data_seeds", "claims", "all_hold", "verdict_rule",
                "provisional", "counting_thresholds", "settings", "choices", "figures", "provenance"):
        assert key in data, key
    assert data["init_seeds"] == [0] and data["data_seeds"] == [0, 1] and data["provisional"]
    assert data["counting_thresholds"]["penalty"] == 1.5
    (claim,) = data["claims"]
    assert set(claim) >= {"id", "statement", "expected", "measured", "pairs", "outcomes", "reasons",
                          "verdict", "reason", "explained_by", "variants"}
    assert claim["pairs"] == [[0, 0], [1, 0]]
    assert len(claim["measured"]["lines"]) == 2 and len(claim["outcomes"]) == 2
    assert claim["verdict"] in ("holds", "fails", "inconclusive")
    assert all(bool(r) == (o != "holds") for o, r in zip(claim["outcomes"], claim["reasons"], strict=True))
    assert (tmp_path / "simple-target" / "simple-target.png").is_file()
    assert (tmp_path / "simple-target" / "runs" / "x2tanh" / "data1" / "seed0" / "meta.json").is_file()


@pytest.mark.parametrize("outcomes,verdict", [
    ([True, True, False], "holds"),            # 2/3 of the conclusive pairs
    ([True, False, False], "fails"),           # 1/3
    ([True, True, False, False], "inconclusive"),  # 1/2: depends on the draw
    ([True, None, None], "inconclusive"),      # fewer than half conclusive
    ([True, True, None], "holds"),
    ([], "inconclusive"),
])
def test_verdict_rule_fixed_in_advance(outcomes, verdict):
    claim = Claim("x", "s", {"lines": 1})
    for i, ok in enumerate(outcomes):
        claim.record(ok, pair=(0, i), reason="" if ok else "why", lines=1)
    assert claim.verdict == verdict
    assert (claim.reason == "") == (verdict == "holds")


def test_a_claim_records_pairs_and_reasons():
    claim = Claim("x", "s", {"lines": 1})
    claim.record(True, pair=(0, 0), lines=1)
    claim.record(False, pair=(1, 0), reason="2 lines (expected 1)", lines=2)
    claim.record(None, pair=(2, 0), reason="count not stable", lines=3)
    d = claim.to_dict()
    assert d["pairs"] == [[0, 0], [1, 0], [2, 0]] and d["measured"]["lines"] == [1, 2, 3]
    assert d["outcomes"] == ["holds", "fails", "inconclusive"]
    assert d["counts"] == {"holds": 1, "fails": 1, "inconclusive": 1}
    assert d["verdict"] == "inconclusive" and "1 of 2 conclusive" in d["reason"]


@pytest.mark.experiment
def test_mnist_runs_on_idx_files(tmp_path):
    rng = np.random.default_rng(0)
    write_mnist(tmp_path / "data", (rng.random((120, 28, 28)) * 255).astype(np.uint8),
                rng.integers(0, 10, 120))
    result = reproduce("mnist", seeds=[0], quick=True, out=tmp_path / "out", data_dir=tmp_path / "data")
    assert result.settings["source"] == "mnist"
    assert not any("STAND-IN" in n for n in result.notes)
    assert len(result.claims[0].measured["lines"]) == 1


@pytest.mark.experiment
def test_mnist_without_files_uses_the_labelled_digits_standin(tmp_path, monkeypatch):
    monkeypatch.delenv("CONDLAB_DATA", raising=False)
    result = reproduce("mnist", seeds=[0], quick=True, out=tmp_path)
    assert result.settings["source"] == "digits"
    assert any(n.startswith("STAND-IN") for n in result.notes)
    saved = json.loads((tmp_path / "mnist" / "claims.json").read_text())
    assert saved["settings"]["source"] == "digits"


@pytest.mark.experiment
def test_fig2_runs_on_cifar_files(tmp_path):
    rng = np.random.default_rng(0)
    write_cifar10(tmp_path / "data", (rng.random((40, 3, 32, 32)) * 255).astype(np.uint8),
                  rng.integers(0, 10, 40))
    result = reproduce("fig2", seeds=[0], quick=True, out=tmp_path / "out", data_dir=tmp_path / "data")
    assert result.status == "ran"
    assert [c.id for c in result.claims] == ["fig2/tanh/fc1", "fig2/sigmoid/fc1", "fig2/softplus/fc1",
                                             "fig2/xtanh/fc1"]
    gap = result.settings["fast_path_gap"]
    assert gap["conv_weight_relative_change"] < 1e-3     # lr 3e-8: the conv part barely moves
    assert (tmp_path / "out" / "fig2" / "fig2.png").is_file()


def test_fig2_without_cifar_is_not_run_and_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.delenv("CONDLAB_DATA", raising=False)
    result = reproduce("fig2", seeds=[0], quick=True, out=tmp_path, data_dir=tmp_path)
    assert result.status == "not run" and not result.all_hold
    assert "cifar-10-batches-py" in result.notes[0] or "data_batch_1" in result.notes[0]


def test_summary_table_markdown_and_csv(tmp_path):
    a = ExperimentResult("e1", "src", [0])
    a.claim("e1/x", "x", lines=1).record(True, pair=(0, 0), lines=1)
    a.claim("e1/y", "y", lines=1).record(False, pair=(0, 0), reason="2 lines", lines=2)
    b = ExperimentResult("e2", "src", [0], status="not run", notes=["NOT RUN: no files"])
    table = write_summary([a, b], tmp_path)
    assert "| e1 | e1/x | lines=1 | lines=[1] | 1/1/1 | holds | - | - | - |" in table
    assert "| e1 | e1/y | lines=1 | lines=[2] | 0/1/1 | fails | holds on 0 of 1 conclusive pairs; " \
           "e.g. 2 lines | not diagnosed | - |" in table
    assert "NOT RUN" in table
    assert (tmp_path / "summary.csv").read_text().startswith("experiment,claim,expected")
