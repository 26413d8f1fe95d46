"""Network reduction: condensed groups merged into single neurons (condlab.reduce).

Claims, tolerances stated before looking: exact merges (coinciding rows, tanh odd) reproduce
the output to 1e-12 relative; leading-order merges of one direction with different small
amplitudes r ≲ 1e-2 keep the output to 1e-3 relative on |x| ≤ 2 (next-order term ~ (r|x|)²).
"""

import json

import numpy as np
import pytest
import torch

import condlab
from condlab import FCNet, get_activation
from condlab._cli import main
from condlab.analysis import count_orientations
from condlab.training._arch import FullyConnected, Residual
from condlab.training._models import init_weights

X = torch.as_tensor(np.random.default_rng(9).uniform(-2, 2, (200, 3)))


def _net(rows, out, act="tanh", bias=0.1):
    arch = FullyConnected(rows.shape[1] - 1, rows.shape[0], 1, 1, (get_activation(act),), True)
    return FCNet(arch, [torch.as_tensor(rows), torch.as_tensor(np.append(out, bias)[None, :])])


def _rel(a, b):
    with torch.no_grad():
        return float(torch.linalg.norm(a(X) - b(X)) / torch.linalg.norm(b(X)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_lines_merge_exactly(seed):
    rng = np.random.default_rng(seed)
    lines = rng.normal(size=(2, 4))
    which = np.arange(12) % 2
    rows = lines[which] * rng.choice([-1.0, 1.0], 12)[:, None]
    net = _net(rows, rng.normal(size=12))
    red = condlab.reduce(net, x=X)
    assert red.reduced_width == 2 and red.n_lines == 2 and all(red.exact)
    assert _rel(red.net, net) <= 1e-12 and red.errors["train_error"] <= 1e-12
    assert red.errors["reduced_rank"] == red.errors["rank"] == 2 * 5 + 1


@pytest.mark.parametrize("act, p", [("tanh", 1), ("xtanh", 2), ("sigmoid", 1), ("x2tanh", 3)])
def test_one_direction_with_different_small_amplitudes_merges_to_leading_order(act, p):
    rng = np.random.default_rng(4)
    u = rng.normal(size=4)
    u /= np.linalg.norm(u)
    r = rng.uniform(2e-3, 1e-2, 10)
    signs = rng.choice([-1.0, 1.0], 10)
    rows = (r * signs)[:, None] * u + rng.normal(size=(10, 4)) * 1e-7   # one line, tiny spread
    net = _net(rows, rng.normal(size=10) * 1e-2, act=act, bias=0.0)
    red = condlab.reduce(net, x=X)
    assert red.reduced_width == 1 and not any(red.exact)
    assert _rel(red.net, net) <= 1e-3


def test_scattered_neurons_are_kept_and_negligible_ones_merged_dropped_or_kept():
    rng = np.random.default_rng(1)
    line = rng.normal(size=4)
    rows = np.vstack([np.tile(line, (8, 1)), rng.normal(size=(2, 4)) * 3, rng.normal(size=(3, 4)) * 1e-4])
    net = _net(rows, rng.normal(size=13))
    share = {"min_share": 0.3}
    dropped = condlab.reduce(net, x=X, count_kwargs=share, negligible="drop")
    assert dropped.n_lines == 1 and dropped.kept == [8, 9] and dropped.dropped == [10, 11, 12]
    assert dropped.reduced_width == 3
    merged = condlab.reduce(net, x=X, count_kwargs=share)  # the default merges them
    assert merged.reduced_width == 4 and merged.groups[-1] == [10, 11, 12]
    # three tiny tanh neurons act linearly: one neuron holds their sum to leading order
    assert merged.errors["train_error"] < 0.1 * dropped.errors["train_error"]
    kept_all = condlab.reduce(net, x=X, count_kwargs=share, negligible="keep")
    assert kept_all.reduced_width == 6 and kept_all.errors["train_error"] <= 1e-12
    with pytest.raises(ValueError, match="negligible='x' is not accepted"):
        condlab.reduce(net, x=X, negligible="x")


def test_condlab_reduce_cli_writes_reduction_json(tmp_path, capsys):
    cfg = condlab.preset("fig5").with_overrides(["train.epochs=300", "model.width=30",
                                                 "train.snapshots=[100,300]"])
    condlab.train(cfg, out=tmp_path / "b")
    assert main(["reduce", str(tmp_path / "b" / "seed0"), "--epoch", "300"]) == 0
    out = capsys.readouterr().out
    assert "width 30 ->" in out
    data = json.loads((tmp_path / "b" / "seed0" / "reduce" / "epoch300" / "reduction.json").read_text())
    assert data["reduced_width"] < 30 and data["train_error"] < 0.5
    assert main(["reduce", str(tmp_path / "b" / "seed0"), "--epoch", "7"]) == 2
    assert "epoch 7 was not recorded" in capsys.readouterr().err


def test_reduce_refuses_residual_layers():
    arch = Residual(2, 4, 2, 1, (get_activation("tanh"),) * 2, True)
    with pytest.raises(ValueError, match="residual"):
        condlab.reduce(FCNet(arch, init_weights(arch, 0, 0.1)), layer=1)


def test_effective_rank_counts_lines_times_parameters_per_neuron():
    rng = np.random.default_rng(3)
    lines = rng.normal(size=(2, 4))
    rows = lines[np.arange(10) % 2] * rng.choice([-1.0, 1.0], 10)[:, None]
    net = _net(rows, rng.normal(size=10))
    eff = condlab.effective_rank(net, X)
    assert eff["lines"] == 2 and eff["structure"] == 2 * (4 + 1)
    assert eff["reduced"] == eff["raw"] == 2 * 5 + 1   # + the output bias


@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
def test_exactly_zero_neurons_merge_into_the_next_bias_without_nan(act):
    # claim: neurons whose input weights are exactly 0 output sigma(0); merged, they become a zero
    # neuron and a bias shift, and the reduced net reproduces the output to 1e-12 (was NaN: 0/0)
    rng = np.random.default_rng(2)
    line = rng.normal(size=4)
    rows = np.vstack([np.tile(line, (8, 1)), np.zeros((4, 4))])
    net = _net(rows, rng.normal(size=12), act=act)
    red = condlab.reduce(net, x=X)
    assert red.groups[-1] == [8, 9, 10, 11]
    assert all(np.isfinite(w.detach().numpy()).all() for w in red.net.layers)
    assert _rel(red.net, net) <= 1e-12


def test_neurons_on_an_arc_are_kept_not_dropped():
    # claim: an arc's members belong to no line; reduce keeps each of them (they were lost: the
    # reduced net then missed their output) -- with an arc and a line, the reduced net holds the
    # line's one neuron plus every arc neuron and reproduces the output to 1e-12
    rng = np.random.default_rng(5)
    e1, e2, line = np.eye(4)[0], np.eye(4)[1], np.array([0.0, 0.0, 0.6, 0.8])
    angles = np.radians(np.linspace(0.0, 90.0, 40))
    arc = np.cos(angles)[:, None] * e1 + np.sin(angles)[:, None] * e2
    rows = np.vstack([arc * 0.5, np.tile(line, (20, 1))])
    net = _net(rows, rng.normal(size=60))
    o = count_orientations(rows)
    assert o.n_arcs == 1 and o.n_lines == 1  # the premise
    red = condlab.reduce(net, x=X)
    assert red.reduced_width == 1 + len(o.arcs[0].members)
    assert _rel(red.net, net) <= 1e-12
