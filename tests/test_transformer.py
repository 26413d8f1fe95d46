"""`condlab reproduce transformer`: the task, the init scales, and what the experiment writes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from _variants import diagnose_planted
from condlab.reproduce import EXPERIMENTS, reproduce
from condlab.reproduce import _transformer as tr
from condlab.reproduce._claims import ExperimentResult


def test_anchor_task_target_is_key_plus_both_shifts() -> None:
    x, y = tr.anchor_task(500, seed=3)
    assert x.shape == (500, tr.SEQ) and y.shape == (500,)
    for row, target in zip(x.tolist(), y.tolist(), strict=True):
        anchors = [i for i, t in enumerate(row) if t in tr.SHIFTS]
        assert len(anchors) == 2 and anchors[1] == anchors[0] + 1 and anchors[0] >= 1
        key = row[anchors[0] - 1]
        assert tr.KEYS[0] <= key < tr.KEYS[1]
        assert target == key + tr.SHIFTS[row[anchors[0]]] + tr.SHIFTS[row[anchors[1]]]
        assert 0 <= target < tr.VOCAB


def test_gamma_init_scales_every_matrix_by_its_fan_in() -> None:
    model = tr.make_model("small", layer_norm=False, seed=0)
    attn = model.encoder.layers[0].self_attn
    assert float(attn.in_proj_weight.detach().std()) == pytest.approx(tr.D_MODEL ** -1.0, rel=0.1)
    ffn_out = model.encoder.layers[0].linear2.weight.detach()
    assert float(ffn_out.std()) == pytest.approx(tr.FFN ** -1.0, rel=0.1)
    assert float(model.embed.weight.detach().std()) == pytest.approx(tr.D_MODEL ** -1.0, rel=0.1)
    assert isinstance(model.encoder.layers[0].norm1, torch.nn.Identity)
    default = tr.make_model("default", layer_norm=True, seed=0)
    assert float(default.embed.weight.detach().std()) == pytest.approx(1.0, rel=0.1)  # PyTorch's N(0, 1)
    torch.testing.assert_close(default.pos, tr.make_model("default", layer_norm=True, seed=0).pos)


@pytest.mark.experiment
def test_experiment_writes_claims_figures_and_tracker_runs(tmp_path: Path, monkeypatch) -> None:
    assert "transformer" in EXPERIMENTS
    monkeypatch.setattr(tr, "QUICK_STEPS", 24)  # the pipeline, not the science: a few steps
    result = reproduce("transformer", seeds=[0], quick=True, out=tmp_path)
    saved = json.loads((tmp_path / "transformer" / "claims.json").read_text())
    ids = [c["id"] for c in saved["claims"]]
    assert {"transformer/no-layernorm/small/layer0.q", "transformer/layernorm/default/layer0.k"} <= set(ids)
    assert len(ids) == 2 * (2 + 4 + 3)
    assert all(len(c["passed_per_seed"]) == 1 for c in saved["claims"])
    assert {Path(f).name for f in result.figures} >= {"transformer_condensation.png",
                                                     "transformer_cosine_layernorm.png"}
    run = tmp_path / "transformer" / "runs" / "layernorm_small_seed0"
    assert (run / "condensation.csv").is_file() and (run / "meta.json").is_file()


# --- the judge on planted curves (no training) ---

def _curve(c: list[float]) -> tuple:
    steps = np.arange(len(c)) * 100
    return steps, np.asarray(c), np.ones(len(c), dtype=int)


CONDENSES, DOES_NOT = {"max_c_at_least": tr.CONDENSED}, {"max_c_below": tr.NOT_CONDENSED}
LEARNED, ON_PLATEAU, H = 2.0, 4.3, 4.4


def test_judge_on_planted_curves() -> None:
    assert tr.judge(CONDENSES, _curve([0, 0.3, 0.8, 0.6]), LEARNED, H)[0] is True
    assert tr.judge(CONDENSES, _curve([0, 0.1, 0.4, 0.2]), LEARNED, H)[0] is False
    assert tr.judge(DOES_NOT, _curve([0, 0.0, 0.1, 0.0]), LEARNED, H)[0] is True
    assert tr.judge(DOES_NOT, _curve([0, 0.0, 0.25, 0.0]), LEARNED, H)[0] is False
    ok, why, _ = tr.judge(CONDENSES, _curve([0, 1.0, 1.0]), ON_PLATEAU, H)
    assert ok is None and "still on the loss plateau" in why


def _verdicts(c_small_q: list[float], c_default_q: list[float], loss: float) -> dict:
    res = ExperimentResult("transformer", "src", list(range(5)))
    claims = tr._claims(res, "no-layernorm")
    for seed in range(5):
        for (init, m), claim in claims.items():
            if m == "q" and init in ("small", "default"):
                curve = _curve(c_small_q if init == "small" else c_default_q)
                ok, why, v = tr.judge(claim.expected, curve, loss, H)
                claim.record(ok, pair=(seed, seed), reason=why, **v)
    return {c.id: c.verdict for c in res.claims if c.outcomes}


def test_claims_fail_when_planted_weights_break_them_and_hold_otherwise() -> None:
    good = _verdicts([0, 0.6, 0.9], [0, 0.0, 0.05], LEARNED)
    assert good == {"transformer/no-layernorm/small/layer0.q": "holds",
                    "transformer/no-layernorm/default/layer0.q": "holds"}
    # planted broken: Q never condenses at small init, and does at default init
    broken = _verdicts([0, 0.1, 0.2], [0, 0.5, 0.9], LEARNED)
    assert set(broken.values()) == {"fails"}
    plateau = _verdicts([0, 0.6, 0.9], [0, 0.0, 0.05], ON_PLATEAU)
    assert set(plateau.values()) == {"inconclusive"}


def _planted_runs(monkeypatch, quick: bool, tmp_path: Path) -> tuple[list[tuple], ExperimentResult]:
    """Run the experiment with train_run planted (no training, no figures) -> (its calls, result)."""
    from condlab.reproduce._context import Context

    calls: list[tuple] = []

    def fake_run(init, layer_norm, seed, steps, out):
        calls.append((layer_norm, init, seed, steps))
        def c(m: str) -> list[float]:  # planted to satisfy every claim: Q, K condense at small init only
            return [0.0, 0.9, 0.9] if init == "small" and m in ("q", "k") else [0.0, 0.0, 0.0]
        curves = {(layer, m): _curve(c(m)) for layer in (0, 1) for m in tr.MATRICES}
        return {"curves": curves, "loss": [LEARNED] * steps}

    monkeypatch.setattr(tr, "train_run", fake_run)
    monkeypatch.setattr(tr, "_heatmaps", lambda *a: None)
    monkeypatch.setattr(tr, "_curves_figure", lambda *a: None)
    monkeypatch.setattr(Context, "save", lambda self, res, fig, name: None)
    return calls, tr.transformer(Context(seeds=[0, 1], quick=quick, out=tmp_path))


def test_the_default_run_trains_and_judges_both_variants_quick_one(monkeypatch, tmp_path: Path) -> None:
    """--quick saves time by training only QUICK_VARIANTS; the default run is unchanged by that:
    every variant, init and seed for STEPS steps, every claim judged on its runs."""
    calls, res = _planted_runs(monkeypatch, False, tmp_path)
    assert sorted(calls) == sorted((ln, init, seed, tr.STEPS) for ln in tr.VARIANTS.values()
                                   for init in tr.INITS for seed in (0, 1))
    assert len(res.claims) == 18 and all(c.outcomes == ["holds", "holds"] for c in res.claims)
    calls, res = _planted_runs(monkeypatch, True, tmp_path)
    assert sorted(calls) == sorted((tr.VARIANTS[v], init, 0, tr.QUICK_STEPS) for v in tr.QUICK_VARIANTS
                                   for init in tr.INITS)
    for claim in res.claims:
        trained = claim.id.split("/")[1] in tr.QUICK_VARIANTS
        assert claim.outcomes == (["holds"] if trained else ["inconclusive"]), claim.id
        assert trained or "not trained by --quick" in claim.reasons[0]
    assert any("variant only" in note for note in res.notes)


def test_the_plateau_is_the_entropy_of_the_targets() -> None:
    assert tr.marginal_entropy(torch.arange(4).repeat(10)) == pytest.approx(np.log(4))
    _, y = tr.anchor_task(tr.TRAIN_N, seed=0)
    assert np.log(60) < tr.marginal_entropy(y) < np.log(tr.VOCAB)
    assert tr.final_loss([5.0] * 100 + [1.0] * 100, 1200) == pytest.approx(1.0)


def test_no_diagnostic_variant_reruns_the_transformer(tmp_path: Path) -> None:
    """It trains outside the shared trainer: every variant is "not applicable", none reruns it."""
    result, runs = diagnose_planted("transformer", tmp_path)
    assert runs == 1
    assert {v["verdict"] for v in result.claims[0].variants} == {"not applicable"}
