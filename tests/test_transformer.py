"""`condlab reproduce transformer`: the task, the init scales, and what the experiment writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from condlab.reproduce import EXPERIMENTS, reproduce
from condlab.reproduce import _transformer as tr


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
