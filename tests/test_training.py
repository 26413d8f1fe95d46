"""Batched training equals each run trained alone with torch.optim on an nn.Module."""

import numpy as np
import pytest
import torch

import condlab
from _reference import Reference
from condlab.records._records import RunSpec
from condlab.training._models import Architecture, BatchedNet, init_weights
from condlab.training._trainer import TrainingWarning, initial_stage_end, train_batch

STEPS = 50


def _train_alone(arch, weights, x, y, optimizer, lr, steps):
    model = Reference(arch, weights)
    opt = torch.optim.Adam(model.parameters(), lr=lr) if optimizer == "adam" else \
        torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        loss = 0.5 * (model(x) - y).square().sum(1).mean()
        loss.backward()
        opt.step()
    return model.flat_weights()


CASES = [
    # (arch, width, depth, activations, optimizer, output_bias, d_out)
    ("fc", 20, 1, ["tanh"], "adam", True, 1),
    ("fc", 20, 1, ["x2tanh"], "adam", False, 1),
    ("fc", 12, 3, ["xtanh", "sigmoid", "softplus"], "adam", True, 2),
    ("residual", 10, 4, ["x2tanh", "xtanh", "tanh", "gelu"], "adam", True, 1),
    ("fc", 16, 2, ["tanh", "silu"], "gd", True, 1),
]


@pytest.mark.parametrize("arch_name,width,depth,acts,optimizer,output_bias,d_out", CASES)
def test_batched_equals_single_runs(arch_name, width, depth, acts, optimizer, output_bias, d_out, n=30):
    cfg = condlab.ModelConfig(arch=arch_name, width=width, depth=depth, activations=acts,
                              d_out=d_out, output_bias=output_bias)
    arch = Architecture.from_config(cfg, d=3)
    gen = torch.Generator().manual_seed(7)
    x = torch.rand(n, 3, generator=gen, dtype=torch.float64) * 6 - 4
    y = torch.sin(3 * x).sum(1, keepdim=True).repeat(1, d_out)
    # GD step sizes kept in the stable regime: a chaotic run amplifies round-off itself
    lr_scale = 1e-3 if optimizer == "adam" else 0.05
    specs = [RunSpec(seed=s, init_std=std, lr=lr * lr_scale)
             for s, std, lr in [(0, 0.01, 1.0), (1, 0.05, 2.0), (2, 0.3, 0.5)]]
    net = BatchedNet(arch, len(specs), torch.float64, torch.device("cpu"))
    inits = [init_weights(arch, s.seed, s.init_std) for s in specs]
    for r, w in enumerate(inits):
        net.load(r, w)
    train_batch(net, x, y, specs, optimizer=optimizer, epochs=STEPS, snapshot_at=[0, STEPS])
    for r, spec in enumerate(specs):
        alone = _train_alone(arch, inits[r], x, y, optimizer, spec.lr, STEPS)
        for k, w_ref in enumerate(alone):
            w_batched = net.weights[k][r]
            scale = w_ref.abs().max().item()
            # tolerance: 1e-9 of the weights' scale (round-off only; float64)
            assert torch.allclose(w_batched, w_ref, rtol=0, atol=1e-9 * scale), (r, k)
            # and training really moved the weights (the test would pass on a no-op otherwise)
            assert (w_ref - inits[r][k]).abs().max().item() > 1e-6 * scale


def test_one_hidden_layer_with_fewer_points_than_inputs_equals_single_runs():
    # n <= d + 1 takes the backward pass's other branch (no folding of dR/df into the inputs)
    test_batched_equals_single_runs("fc", 20, 1, ["tanh"], "adam", True, 1, n=3)


def test_loss_curve_matches_eq3_and_initial_stage():
    # Fig. 3's xtanh network leaves the initial stage near epoch 260 (measured: 259-270).
    cfg = condlab.preset("fig3-xtanh").with_overrides(["train.epochs=350", "train.dtype=float64"])
    run = condlab.train(cfg, progress=False)[0]
    net = run.network(0)
    x, y = torch.as_tensor(run.x), torch.as_tensor(run.y)
    expected = 0.5 * (net(x) - y).square().sum(1).mean().item()
    assert run.loss[0] == pytest.approx(expected, rel=1e-12)
    stage = run.initial_stage_epoch
    assert stage is not None and 150 < stage < 350
    assert run.loss[stage] <= 0.7 * run.loss[0] < run.loss[stage - 1]


def test_initial_stage_end_definition():
    loss = np.array([10.0, 9.0, 7.5, 7.0, 6.0, 8.0])
    assert initial_stage_end(loss) == 3      # first epoch with loss <= 70% of loss[0]
    assert initial_stage_end(np.array([1.0, 0.9, 0.8])) is None


def test_diverging_run_stops_and_keeps_earlier_snapshots():
    cfg = condlab.Config.from_dict({
        "data": {"n": 20, "d": 2, "target": "sine_sum"},
        "model": {"width": 8, "init_std": [0.5], "activations": ["x2tanh"]},
        "train": {"optimizer": "gd", "lr": [1e-3, 50.0], "epochs": 120,
                  "snapshots": [0, 1, 2, 60, 120], "dtype": "float64"},
    })
    result = condlab.train(cfg, progress=False)
    ok, bad = result[0], result[1]
    assert ok.status == "complete" and ok.diverged_epoch is None
    assert bad.status == "diverged" and 0 < bad.diverged_epoch <= 60
    assert np.all(bad.epochs < bad.diverged_epoch)          # only snapshots before the NaN
    assert all(np.isfinite(w).all() for w in bad.weights.values())
    assert np.isnan(bad.loss[bad.diverged_epoch:]).all()
    assert np.isfinite(ok.loss).all()                       # the other run is untouched


def test_adam_eps_trap_warns():
    cfg = condlab.Config.from_dict({
        "data": {"n": 40, "d": 1, "low": -1, "high": 1.5, "target": "fig5"},
        "model": {"width": 20, "init_std": [5e-5], "activations": ["xtanh"]},
        "train": {"lr": [1e-4], "epochs": 2, "dtype": "float64"},
    })
    with pytest.warns(TrainingWarning, match="below Adam eps"):
        condlab.train(cfg, progress=False)
    with_small_eps = cfg.with_overrides(["train.eps=1e-30"])
    condlab.train(with_small_eps, progress=False)           # no warning (warnings are errors)


def test_float32_resolution_trap_warns():
    cfg = condlab.Config.from_dict({
        "model": {"width": 10, "init_std": [0.3]},
        "train": {"lr": [1e-8], "epochs": 2, "dtype": "float32"},
    })
    with pytest.warns(TrainingWarning, match="float32 resolution"):
        condlab.train(cfg, progress=False)
    condlab.train(cfg.with_overrides(["train.dtype=float64"]), progress=False)


def test_float32_and_float64_agree_early():
    cfg = condlab.preset("fig3").with_overrides(["train.epochs=20", "train.snapshots=[20]"])
    w32 = condlab.train(cfg, progress=False)[0].layer("layer1", 20)
    w64 = condlab.train(cfg.with_overrides(["train.dtype=float64"]), progress=False)[0].layer("layer1", 20)
    assert np.allclose(w32, w64, atol=1e-5 * np.abs(w64).max())


def test_sweep_runs_share_init_per_seed():
    cfg = condlab.preset("fig3").with_overrides(
        ["train.epochs=5", "train.seeds=[0,1]", "train.lr=[1e-3,5e-4]"])
    result = condlab.train(cfg, progress=False)
    assert [(r.spec.seed, r.spec.lr) for r in result] == [(0, 1e-3), (0, 5e-4), (1, 1e-3), (1, 5e-4)]
    assert np.array_equal(result[0].layer("layer1", 0), result[1].layer("layer1", 0))
    assert not np.array_equal(result[0].layer("layer1", 0), result[2].layer("layer1", 0))
    assert not np.array_equal(result[0].layer("layer1", 5), result[1].layer("layer1", 5))
