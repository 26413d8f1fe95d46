"""The CI check of claims.json (.ci/check_claims.py): schema and invariants, never verdicts."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from condlab.reproduce import ExperimentResult

CHECK = Path(__file__).resolve().parents[1] / ".ci" / "check_claims.py"


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("check_claims", CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(tmp_path: Path, outcomes: list[bool | None], lines: list[int], exp: str = "fig6",
           claim_id: str = "fig6/xtanh/neurons") -> Path:
    res = ExperimentResult(exp, "src", [0], data_seeds=[0, 1, 2])
    claim = res.claim(claim_id, "s", lines=2)
    for i, (ok, n) in enumerate(zip(outcomes, lines, strict=True)):
        claim.record(ok, pair=(i, 0), reason="" if ok else "why", lines=n)
    res.write(tmp_path / exp)
    return tmp_path


@pytest.mark.parametrize("outcomes", [[True, True, False], [False, None, None], [True, False, None]])
def test_condlab_verdicts_follow_the_rule_restated_in_ci(check, outcomes):
    claim = ExperimentResult("e", "s", [0]).claim("e/x", "s")
    for i, ok in enumerate(outcomes):
        claim.record(ok, pair=(i, 0), reason="why")
    labels = ["inconclusive" if o is None else "holds" if o else "fails" for o in outcomes]
    assert claim.verdict == check.rule(labels)


def test_a_good_claims_file_passes_whatever_its_verdict(check, tmp_path):
    assert check.main(str(_write(tmp_path, [False, False, None], [2, 2, 2]))) == 0


def test_more_lines_than_p_in_fig6_breaks_an_invariant(check, tmp_path):
    assert check.main(str(_write(tmp_path, [False, True, True], [3, 2, 2]))) == 1


def test_a_tampered_verdict_or_missing_reason_is_caught(check, tmp_path):
    out = _write(tmp_path, [False, False, True], [2, 2, 2])
    path = out / "fig6" / "claims.json"
    data = json.loads(path.read_text())
    data["claims"][0]["verdict"] = "holds"
    data["claims"][0]["reasons"][0] = ""
    path.write_text(json.dumps(data))
    assert check.main(str(out)) == 1


def _bound(tmp_path: Path, outcome: bool | None, lines: int, band: dict, arcs: int = 0) -> Path:
    res = ExperimentResult("fig3", "src", [0], data_seeds=[0])
    claim = res.claim("fig3/x2tanh/bound", "s", max_lines=3)
    claim.record(outcome, pair=(0, 0), reason="why", lines=lines, arcs=arcs, lines_by_threshold=band)
    res.write(tmp_path / "fig3")
    return tmp_path


@pytest.mark.parametrize("lines,band,arcs,outcome,ok", [
    (5, {"0.93": 5, "0.97": 6}, 0, None, False),   # > p at every count, called inconclusive
    (5, {"0.93": 2, "0.97": 6}, 1, None, False),   # > p beside an arc, called inconclusive
    (5, {"0.93": 5, "0.97": 6}, 0, False, True),
    (5, {"0.93": 2, "0.97": 6}, 0, None, True),    # the band straddles p: may be inconclusive
])
def test_a_hidden_bound_failure_is_caught(check, tmp_path, lines, band, arcs, outcome, ok):
    assert check.main(str(_bound(tmp_path, outcome, lines, band, arcs))) == (0 if ok else 1)


def test_an_explanation_must_be_a_one_factor_variant_that_restored_the_claim(check, tmp_path):
    out = _write(tmp_path, [False, False, False], [2, 2, 2])
    path = out / "fig6" / "claims.json"
    data = json.loads(path.read_text())
    data["claims"][0]["variants"] = [{"variant": "data-draws", "factor": "data draw", "verdict": "holds"},
                                     {"variant": "float64", "factor": "training dtype", "verdict": "holds"}]
    for name, code in [("float64", 0), ("data-draws", 1), ("gd", 1)]:
        data["claims"][0]["explained_by"] = name
        path.write_text(json.dumps(data))
        assert check.main(str(out)) == code, name
