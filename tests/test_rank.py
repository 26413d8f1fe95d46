"""Model rank r_θ = rank DF(θ) (the talk's definition) on condlab networks and plain modules."""

import numpy as np
import pytest
import torch
from torch import nn

from condlab import FCNet, get_activation
from condlab.analysis import model_rank, rank_over_snapshots
from condlab.training._arch import FullyConnected


class TwoTanh(nn.Module):
    """The talk's example F(θ)(x) = a1 tanh(w1 x) + a2 tanh(w2 x), x in R, θ in R^4."""

    def __init__(self, a, w):
        super().__init__()
        self.a = nn.Parameter(torch.tensor(a, dtype=torch.float64))
        self.w = nn.Parameter(torch.tensor(w, dtype=torch.float64))

    def forward(self, x):
        return (self.a * torch.tanh(x * self.w)).sum(1, keepdim=True)


X1 = torch.linspace(-3, 3, 40, dtype=torch.float64)[:, None]


@pytest.mark.parametrize("a, w", [([1.0, -0.5], [0.7, 1.3]), ([0.3, 2.0], [-1.1, 0.4]),
                                  ([1.0, 1.0], [0.5, -2.0])])
def test_talk_example_not_condensed_has_rank_4(a, w):
    assert model_rank(TwoTanh(a, w), X1).rank == 4


@pytest.mark.parametrize("a, w", [([1.0, -0.5], [0.7, 0.7]), ([1.0, -0.5], [0.7, -0.7]),
                                  ([2.0, 3.0], [-1.2, 1.2])])
def test_talk_example_condensed_has_rank_at_most_2(a, w):
    r = model_rank(TwoTanh(a, w), X1)
    assert r.rank <= 2
    assert r.rank_at(1e-8) <= 2  # a clear gap: the third singular value is round-off
    assert r.singular_values[2] < 1e-12 * r.singular_values[0]


def _net(rows: np.ndarray, out: np.ndarray, act: str = "tanh") -> FCNet:
    d = rows.shape[1] - 1
    arch = FullyConnected(d, rows.shape[0], 1, 1, (get_activation(act),), True)
    return FCNet(arch, [torch.as_tensor(rows), torch.as_tensor(out[None, :])])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_neurons_on_k_exact_lines_have_the_rank_of_a_k_neuron_network(seed):
    rng = np.random.default_rng(seed)
    d, k, m = 3, 2, 9
    lines = rng.normal(size=(k, d + 1))
    which = np.arange(m) % k
    signs = rng.choice([-1.0, 1.0], m)
    wide_rows = lines[which] * signs[:, None]                 # tanh is odd: ±w is one line
    wide = _net(wide_rows, np.append(rng.normal(size=m), 0.3))
    # the k-neuron network it equals: a_line = sum_j s_j a_j
    a = wide.layers[1].detach().numpy()[0]
    narrow_out = np.array([(a[:m][which == i] * signs[which == i]).sum() for i in range(k)] + [a[-1]])
    narrow = _net(lines, narrow_out)
    x = torch.as_tensor(rng.uniform(-2, 2, (60, d)))
    with torch.no_grad():
        assert torch.allclose(wide(x), narrow(x), atol=1e-12)
    r_wide, r_narrow = model_rank(wide, x).rank, model_rank(narrow, x).rank
    assert r_narrow == k * (d + 2) + 1  # generic: every parameter of the k-neuron net counts
    assert r_wide == r_narrow


def test_rank_is_capped_by_the_data_and_rules_are_stated():
    rng = np.random.default_rng(0)
    net = _net(rng.normal(size=(10, 3)), rng.normal(size=11))
    x = torch.as_tensor(rng.normal(size=(5, 2)))
    r = model_rank(net, x)
    assert r.rank == 5 and r.n_params == 10 * 3 + 11 and r.n_outputs == 5
    assert "eps" in r.rule and model_rank(net, x, rtol=1e-4).rule == "sigma > 0.0001 * sigma_max"
    assert r.to_dict()["rank_at"]["1e-08"] <= 5


def test_rank_over_snapshots_of_a_run():
    import condlab

    cfg = condlab.preset("fig5").with_overrides(["train.epochs=40", "train.snapshots=[0,20,40]",
                                                 "model.width=20"])
    run = condlab.train(cfg)[0]
    trace = rank_over_snapshots(run)
    assert trace.epochs.tolist() == [0, 20, 40]
    assert trace.rank.shape == (3,) and trace.lines.shape == (3,)
    assert np.all(trace.rank <= min(run.x.shape[0], trace.n_params))


def test_condlab_analyze_reports_the_model_rank(tmp_path, capsys):
    import json

    import condlab
    from condlab._cli import main

    cfg = condlab.preset("fig5").with_overrides(["train.epochs=30", "model.width=12"])
    condlab.train(cfg, out=tmp_path / "b")
    assert main(["analyze", str(tmp_path / "b" / "seed0"), "--no-figures", "--no-replay"]) == 0
    assert "model rank" in capsys.readouterr().out
    out = tmp_path / "b" / "seed0" / "analysis" / "epoch30-noreplay"  # keyed by the options
    data = json.loads((out / "analysis.json").read_text())
    assert 1 <= data["model_rank"]["rank"] <= 40 and data["model_rank"]["n_params"] == 12 * 2 + 13
