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
from _variants import diagnose_planted
from condlab import FCNet, get_activation
from condlab.embed import gradient_norm, newton_refine, split
from condlab.reproduce import _embedding as E
from condlab.reproduce._claims import ExperimentResult
from condlab.reproduce._embedding_points import critical_point, degenerate, embedded
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


# --- `reproduce embedding`: the degeneracy rule and the claims on planted data (no training) ---

GOOD = {"newton_grad": 1e-15, "newton_loss": 4e-4, "active": 1, "norm": 5.0, "moved": 0.5,
        "hessian_ratio": 1e-3}


@pytest.mark.parametrize("change, words", [
    ({}, ""), ({"newton_grad": 1e-3}, "did not reach"), ({"active": 0}, "constant fit"),
    ({"norm": 1e4}, "infinity"), ({"hessian_ratio": 1e-20}, "singular Hessian")])
def test_the_degeneracy_rule_names_each_trivial_plateau(change, words):
    why = degenerate({**GOOD, **change}, **E.DEGENERACY)
    assert (why == "") if not words else (words in why)


def _row(epoch, *, degenerate="", not_embedded="", width=3, loss_gap=0.0):
    return {"epoch": epoch, "narrow_width": width, "loss_gap": loss_gap, "newton_gap": 0.01,
            "output_gap": 0.01, "degenerate": degenerate, "not_embedded": not_embedded}


def _verdicts(rows_per_seed) -> dict:
    res = ExperimentResult("embedding", "src", list(range(len(rows_per_seed))))
    claims = E._claims(res, 200)
    for seed, rows in enumerate(rows_per_seed):
        E.record(claims, rows, seed, 200)
    return {c.id.split("/")[1]: c.verdict for c in res.claims}


def test_claims_hold_on_planted_non_degenerate_embedded_plateaus():
    good = [[_row(7, degenerate="1 active neuron(s)"), _row(60000)] for _ in range(5)]
    assert _verdicts(good) == {"narrow": "holds", "loss": "holds", "nondegenerate": "holds",
                               "critical": "holds"}


def test_claims_fail_when_every_plateau_is_trivial_or_not_the_critical_point():
    trivial = [[_row(7, degenerate="0 active neuron(s)"), _row(800, degenerate="at infinity")]] * 5
    verdicts = _verdicts(trivial)
    assert verdicts["nondegenerate"] == "fails" and verdicts["critical"] == "inconclusive"
    off = [[_row(60000, not_embedded="critical loss 47% off")]] * 5
    assert _verdicts(off)["critical"] == "fails"
    wide = [[_row(60000, width=50, loss_gap=0.5)]] * 5
    assert _verdicts(wide)["narrow"] == "fails" and _verdicts(wide)["loss"] == "fails"


def _one_neuron(w: float, b: float, a: float, c: float = 0.0) -> FCNet:
    arch = FullyConnected(1, 1, 1, 1, (get_activation("tanh"),), True)
    weights = [torch.tensor([[w, b]], dtype=torch.float64), torch.tensor([[a, c]], dtype=torch.float64)]
    return FCNet(arch, weights)


def test_a_planted_finite_critical_point_is_non_degenerate_and_its_embedding_is_recognised():
    """Data = one tanh neuron + a wiggle; Newton from the neuron meets a finite non-degenerate point,
    whose split (a 3-neuron network, same output) is 'embedded'; a wide output that differs is not."""
    x = np.linspace(-1, 1.5, 40)[:, None]
    y = np.tanh(5 * x - 1) + 0.05 * np.sin(12 * x)
    point = critical_point(_one_neuron(5.0, -1.0, 1.0), x, y, steps=40, active_share=E.ACTIVE_SHARE)
    assert degenerate(point, **E.DEGENERACY) == ""
    narrow = _one_neuron(*[float(v) for v in point_params(x, y)])
    wide = split(split(narrow, 0, 0.3), 0, 0.5)
    with torch.no_grad():
        f_wide = wide(torch.as_tensor(x)).numpy()[:, 0]
    kw = {"loss_match": E.LOSS_MATCH, "output_match": E.OUTPUT_MATCH}
    assert embedded(point, point["newton_loss"], f_wide, **kw) == ""
    assert "off the wide network" in embedded(point, point["newton_loss"], f_wide + 0.2, **kw)
    assert "off the plateau" in embedded(point, 2 * point["newton_loss"], f_wide, **kw)


def point_params(x, y):
    refined, _ = newton_refine(_one_neuron(5.0, -1.0, 1.0), x, y, steps=40, lbfgs_iters=0)
    return [*refined.layers[0].detach()[0].tolist(), *refined.layers[1].detach()[0].tolist()]


def test_a_planted_linear_fit_at_infinity_is_degenerate():
    """One neuron with w -> 0, a -> ∞ (a w fixed) fitting a line: no finite critical point."""
    x = np.linspace(-1, 1.5, 40)[:, None]
    y = np.sin(3 * x) + np.sin(6 * x) / 2
    slope = float(np.polyfit(x[:, 0], y[:, 0], 1)[0])
    point = critical_point(_one_neuron(1e-3, 0.0, slope / 1e-3), x, y, steps=40, active_share=E.ACTIVE_SHARE)
    assert degenerate(point, **E.DEGENERACY) != ""
    # each part of the rule sees it: far out, and a Hessian singular in the limit
    assert point["norm"] > E.MAX_NORM and point["hessian_ratio"] < E.MIN_HESSIAN_RATIO


@pytest.mark.parametrize("mode", list(E.MODES))
def test_gd_and_float64_variants_are_not_run_on_the_embedding_experiment(tmp_path, mode):
    """The experiment trains by plain GD in float64: those variants (and the others) change nothing,
    so a failing claim is diagnosed without a single rerun."""
    result, runs = diagnose_planted("embedding", tmp_path, lambda ctx: E.train_config(mode, ctx.seeds))
    assert runs == 1
    variants = {v["variant"]: v for v in result.claims[0].variants}
    assert {v["verdict"] for v in variants.values()} == {"not applicable"}
    assert variants["gd"]["reason"] == "already trained with plain GD"
    assert variants["float64"]["reason"] == "already trained in float64"
