"""Embedding principle (talk; Zhang et al., NeurIPS 2021): one-step splitting embedding.

Claims, tolerances fixed before looking: (i) the output is preserved to float64 round-off
(relative 1e-13); (ii) a critical point of the narrow network, refined until ‖∇R‖ ≤ 1e-12,
maps to a point of the wide network with ‖∇R‖ ≤ 1e-12 for every α tried; a non-critical
point stays non-critical (control).
"""

import numpy as np
import pytest
import torch

import condlab
from condlab import FCNet, get_activation
from condlab.embed import gradient_norm, newton_refine, split
from condlab.training._arch import FullyConnected, Residual
from condlab.training._models import init_weights

ALPHAS = [0.5, 0.3, -1.0, 2.0]


def _deep(seed: int, depth: int = 2, width: int = 3, d: int = 1) -> FCNet:
    arch = FullyConnected(d, width, depth, 1, (get_activation("tanh"),) * depth, True)
    return FCNet(arch, init_weights(arch, seed, 0.8))


@pytest.mark.parametrize("depth, layer", [(1, 0), (2, 0), (2, 1), (3, 1)])
def test_split_preserves_the_output(depth, layer):
    net = _deep(depth, depth)
    x = torch.linspace(-2, 2, 50, dtype=torch.float64)[:, None]
    with torch.no_grad():
        f = net(x)
        for alpha in ALPHAS:
            wide = split(net, 1, alpha, layer)
            assert wide.layers[layer].shape[0] == net.layers[layer].shape[0] + 1
            assert torch.allclose(wide(x), f, rtol=1e-13, atol=1e-13 * float(f.abs().max()))


def test_split_refuses_bad_neurons_and_residual_layers():
    with pytest.raises(ValueError, match="neuron 7 does not exist"):
        split(_deep(0, 1), 7, 0.5)
    arch = Residual(1, 3, 2, 1, (get_activation("tanh"),) * 2, True)
    with pytest.raises(ValueError, match="residual"):
        split(FCNet(arch, init_weights(arch, 0, 0.5)), 0, 0.5)


@pytest.fixture(scope="module")
def critical_two_layer():
    """A 1-3-1 tanh net trained by GD on 20 points of Fig. 5's target, refined to round-off."""
    cfg = condlab.preset("fig5").with_overrides([
        "model.width=3", "model.init_std=0.5", "data.n=20", "train.optimizer=gd", "train.lr=0.05",
        "train.epochs=3000", "train.dtype=float64", "train.snapshots=[0]"])
    run = condlab.train(cfg)[0]
    net = run.network(int(run.epochs[-1]))
    refined, norms = newton_refine(net, run.x, run.y)
    return net, refined, run.x, run.y, norms


def test_a_critical_point_of_the_narrow_net_is_critical_in_the_wide_one(critical_two_layer):
    _, refined, x, y, norms = critical_two_layer
    assert norms[-1] <= 1e-12
    with torch.no_grad():
        loss = float(((refined(torch.as_tensor(x)) - torch.as_tensor(y)) ** 2).mean() / 2)
    assert loss > 1e-4  # a critical point with a nonzero residual, not a trivial interpolation
    for neuron in range(3):
        for alpha in ALPHAS:
            assert gradient_norm(split(refined, neuron, alpha), x, y) <= 1e-12


def test_a_non_critical_point_stays_non_critical(critical_two_layer):
    net, _, x, y, _ = critical_two_layer
    before = gradient_norm(net, x, y)
    assert before > 1e-8
    assert gradient_norm(split(net, 0, 0.5), x, y) > 1e-3 * before


def test_deep_gradient_of_the_embedding_is_bounded_by_the_narrow_gradient():
    """Deep nets: ∇R_wide consists of ∇R_narrow's blocks, the split row's scaled by α and 1 − α and
    the split column's repeated, so ‖∇R_wide‖ ≤ max(√2, √(α² + (1 − α)²)) ‖∇R_narrow‖ at every θ;
    hence criticality is preserved. Checked at a point refined by L-BFGS + Newton (deep tanh nets
    converge slowly there, so the point is near-critical rather than critical to round-off).
    """
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (15, 1))
    y = np.sin(3 * x)
    refined, norms = newton_refine(_deep(0, 2, 2), x, y, lbfgs_iters=1000)
    narrow = gradient_norm(refined, x, y)
    assert narrow < 1e-3 and norms[-1] <= norms[0]
    for layer in (0, 1):
        for alpha in (0.5, 2.0, -1.0):
            bound = max(np.sqrt(2), np.sqrt(alpha ** 2 + (1 - alpha) ** 2)) * narrow
            wide = gradient_norm(split(refined, 0, alpha, layer), x, y)
            assert wide <= bound * (1 + 1e-6) + 1e-14
            assert wide >= narrow * (1 - 1e-6) / np.sqrt(2)  # alpha^2 + (1 - alpha)^2 >= 1/2
