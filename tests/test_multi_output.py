"""Multi-output theory (issue 8): with d_out > 1 the p = 1 line is the top right singular vector of G.

Claim (tolerance fixed before running): under the leading-order dynamics with the residual
frozen, w' = -Gᵀa, a' = -Gw with G = EᵀX/n (exact for p = 1 at small initialization), every
test neuron of a d_out = 2 network ends within 1° of the line `p1_line(X, E)` predicts, on
10 of 10 pre-registered seeds (0-9).
"""

from __future__ import annotations

import numpy as np
import pytest

import condlab
from condlab.analysis import effective_residual, line_angles, predict_lines
from condlab.analysis._replay import History, replay_neurons
from condlab.analysis._theory import p1_line


def _leading_order(X: np.ndarray, E: np.ndarray, rng, neurons: int = 50, steps: int = 4000) -> np.ndarray:
    """Integrate w' = -Gᵀa, a' = -Gw from N(0, 1e-6²) for `neurons` neurons; -> W (neurons, q)."""
    G = E.T @ X / len(X)
    W = rng.standard_normal((neurons, X.shape[1])) * 1e-6
    A = rng.standard_normal((neurons, E.shape[1])) * 1e-6
    lr = 0.1 / np.linalg.norm(G, 2)
    for _ in range(steps):
        W, A = W - lr * A @ G, A - lr * W @ G.T
        # The system is linear: rescaling each neuron's (w, a) keeps its orientation, not overflow.
        scale = np.sqrt((W**2).sum(1, keepdims=True) + (A**2).sum(1, keepdims=True))
        W, A = W / scale, A / scale
    return W


@pytest.mark.parametrize("seed", range(10))
def test_d_out_2_neurons_condense_on_the_top_singular_vector(seed):
    rng = np.random.default_rng(seed)
    X = np.c_[rng.uniform(-2, 2, size=(40, 3)), np.ones(40)]
    E = rng.standard_normal((40, 2)) + np.array([0.5, -0.3])
    W = _leading_order(X, E, rng)
    predicted = p1_line(X, E)
    assert line_angles(W, predicted[None]).max() < 1.0  # tolerance: 1 degree


def test_d_out_1_reduces_to_the_sum_of_residual_weighted_inputs():
    rng = np.random.default_rng(0)
    X, e = rng.standard_normal((30, 4)), rng.standard_normal(30)
    g = e @ X
    assert np.allclose(p1_line(X, e[:, None]), g / np.linalg.norm(g), atol=1e-12)
    assert np.allclose(p1_line(X, e), p1_line(X, e[:, None]), atol=0)
    assert np.allclose(effective_residual(X, e[:, None]), e, atol=0)


def test_predictions_take_residuals_of_shape_n_by_d_out():
    rng = np.random.default_rng(1)
    X, E = rng.standard_normal((30, 2)), rng.standard_normal((30, 3))
    for p in (1, 2, 3):
        pred = predict_lines(X, E, p)
        assert pred.lines.shape[1] == 2 and len(pred.lines) <= p
    with pytest.raises(ValueError):
        predict_lines(X, E[:10], 1)


def test_replay_with_vector_output_weights_matches_the_singular_vector():
    # The replay under GD with a frozen residual (one snapshot) is the leading-order dynamics.
    rng = np.random.default_rng(3)
    X = np.c_[rng.uniform(-2, 2, size=(40, 3)), np.ones(40)]
    E = rng.standard_normal((40, 2))
    history = History(np.array([0]), X[None], E[None])
    W = replay_neurons(history, 1, 1.0, optimizer="gd", lr=0.01 / np.linalg.norm(E.T @ X / 40, 2),
                       init_std=1e-6, until=4000, n_neurons=40)
    assert line_angles(W, p1_line(X, E)[None]).max() < 1.0  # tolerance: 1 degree


def test_data_target_accepts_one_expression_per_output():
    cfg = condlab.preset("fig3").with_overrides(["data.target=[sin(x1) + x2, cos(x3)]", "model.d_out=2",
                                                 "train.epochs=5", "train.seeds=[0]"])
    run = condlab.train(cfg, progress=False)[0]
    assert run.y.shape == (cfg.data.n, 2)
    assert np.allclose(run.y[:, 1], np.cos(run.x[:, 2]))
    with pytest.raises(condlab.ConfigError):
        condlab.preset("fig3").with_overrides(["data.target=[sin(x1), nope(x2)]"])
