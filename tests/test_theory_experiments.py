"""Pieces of `reproduce optimistic` and `reproduce embedding` (the experiments themselves run in
`make demo-all` / `reproduce all --quick`; here their parts, on small inputs)."""

import math
from pathlib import Path

import numpy as np
import pytest

from condlab.reproduce._embedding import plateaus
from condlab.reproduce._optimistic import D, optimistic_size, recovery_n, teacher
from condlab.reproduce._optimistic_runs import student_config
from condlab.training._data import make_dataset


@pytest.mark.parametrize("k", [1, 2])
def test_the_target_expression_is_the_teacher(k):
    data = make_dataset(student_config(k, 30, 50, 10, {"init_std": 1e-3, "lr": 0.5}, [0], 0).data)
    assert np.allclose(data.y[:, 0], teacher(k, data.x), atol=1e-12)


@pytest.mark.parametrize("k", [1, 2])
def test_optimistic_size_is_the_rank_at_the_teacher_k_times_d_plus_2(k):
    """With hidden biases every teacher neuron adds d + 2 directions (w, b, a); zero neurons add none."""
    x = np.random.default_rng(0).uniform(-1.7, 1.7, (300, D))
    assert optimistic_size(k, x) == k * (D + 2)


def test_recovery_n_needs_every_larger_n_to_recover():
    ns = [4, 8, 16, 32]
    assert recovery_n(ns, np.array([0.5, 1e-3, 0.2, 1e-3])) == 32
    assert recovery_n(ns, np.array([0.5, 1e-3, 1e-3, 1e-3])) == 8
    assert recovery_n(ns, np.array([0.5, 0.5, 0.5, 0.5])) == math.inf


def test_plateaus_of_a_two_step_loss_curve():
    from scipy.special import expit

    t = np.arange(0, 20001, dtype=float)
    # plateau near 1 until ~200, drop, plateau near 0.5 until ~4000, drop to a final flat 0.01
    loss = 0.01 + 0.49 * expit(-(t - 4000) / 100) + 0.5 * expit(-(t - 200) / 10)
    found = plateaus(loss)
    assert len(found) == 3
    assert 1 <= found[0] < 200 and 400 < found[1] < 4000 and found[2] > 4500


def test_theory_figures_draw_and_save(tmp_path):
    from condlab.plotting import save_figure
    from condlab.plotting._theory import plateau_plot, rank_plot, sample_size_plot

    epochs = np.array([0, 10, 100, 1000])
    figs = [
        rank_plot(epochs, {"numpy rule": np.array([5, 20, 30, 25])}, np.array([0, 1, 1, 1]),
                  reference={"O_f*": 6}, loss=np.array([1.0, 0.5, 0.1, 1e-6]), title="t"),
        sample_size_plot([4, 8, 16], {"small": np.array([[1.0, 0.5], [1e-2, 2e-2], [1e-3, 1e-3]])},
                         optimistic=6, n_params=300, threshold=1e-2),
        plateau_plot(np.linspace(1, 0.01, 100), [5, 50], [0.9, 0.4], [8, 2]),
    ]
    for i, fig in enumerate(figs):
        assert all(p.stat().st_size > 0 for p in save_figure(fig, tmp_path / f"f{i}"))


@pytest.mark.experiment
@pytest.mark.parametrize("name, claims", [("optimistic", 7), ("embedding", 4)])
def test_ci_sized_experiment_writes_claims_and_figures(tmp_path, name, claims):
    """The versions `reproduce all --quick` runs (smoke): claims.json with every claim, figures."""
    import json

    from condlab.reproduce import reproduce

    result = reproduce(name, seeds=[0, 1], quick=True, smoke=True, out=tmp_path)
    data = json.loads((tmp_path / name / "claims.json").read_text())
    assert data["settings"]["mode"] == "smoke" and data["seeds"] == [0]
    assert len(data["claims"]) == claims
    # every claim is judged (an outcome per pair, a verdict); smoke runs are too short to hold
    assert all(c["outcomes"] and c["verdict"] in ("holds", "fails", "inconclusive") for c in data["claims"])
    assert result.figures and all(Path(f).is_file() for f in result.figures)
