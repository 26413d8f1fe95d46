"""One optimizer protocol: batched training equals nn.Module + torch.optim run by run, for every
optimizer with per-run hyper-parameters in one batch, and for dropout with the same masks.

Claim and tolerance, fixed before looking: in float64, after 50 steps every weight of every
run is within 1e-9 of that layer's weight scale (max |w|) of the reference trained alone
(round-off only), and training moved the weights by more than 1e-6 of that scale.
"""

import numpy as np
import pytest
import torch
from torch import nn

import condlab
from _reference import Reference
from condlab.analysis._replay import History, replay_neurons
from condlab.records._records import RunSpec
from condlab.training._config import ConfigError
from condlab.training._dropout import dropout_seed
from condlab.training._models import Architecture, BatchedNet, init_weights
from condlab.training._optim import OPTIMIZERS, Hyper, get_optimizer
from condlab.training._trainer import train_batch

STEPS = 50
TOL = 1e-9


def torch_optimizer(name: str, params, spec: RunSpec, nesterov: bool = False):
    """The torch.optim counterpart of each registered optimizer, built independently."""
    if name == "adam":
        return torch.optim.Adam(params, lr=spec.lr, weight_decay=spec.weight_decay, foreach=False)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=spec.lr, weight_decay=spec.weight_decay, foreach=False)
    if name == "sgd":
        return torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum, nesterov=nesterov,
                               weight_decay=spec.weight_decay, foreach=False)
    assert name == "gd"
    return torch.optim.SGD(params, lr=spec.lr, weight_decay=spec.weight_decay, foreach=False)


def setup(arch_name: str = "fc", depth: int = 2, width: int = 12):
    cfg = condlab.ModelConfig(arch=arch_name, width=width, depth=depth,
                              activations=["tanh", "xtanh", "sigmoid"][:depth] if depth <= 3 else ["tanh"])
    arch = Architecture.from_config(cfg, d=3)
    gen = torch.Generator().manual_seed(7)
    x = torch.rand(30, 3, generator=gen, dtype=torch.float64) * 6 - 4
    y = torch.sin(3 * x).sum(1, keepdim=True)
    return arch, x, y


def train_both(arch, x, y, specs, name, nesterov=False, masks_for=None):
    """Batched training, and each run alone with torch.optim; -> (net, inits, references, losses)."""
    net = BatchedNet(arch, len(specs), torch.float64, torch.device("cpu"))
    inits = [init_weights(arch, s.seed, s.init_std) for s in specs]
    for r, w in enumerate(inits):
        net.load(r, w)
    outcome = train_batch(net, x, y, specs, optimizer=name, epochs=STEPS, snapshot_at=[0, STEPS],
                          nesterov=nesterov)
    refs, losses = [], []
    for r, spec in enumerate(specs):
        model = Reference(arch, inits[r])
        opt = torch_optimizer(name, model.parameters(), spec, nesterov)
        masks = masks_for(spec) if masks_for is not None else None
        curve = []
        for _ in range(STEPS):
            with torch.no_grad():
                curve.append(0.5 * (model(x) - y).square().sum(1).mean().item())
            opt.zero_grad()
            loss = 0.5 * (model(x, next(masks) if masks else None) - y).square().sum(1).mean()
            loss.backward()
            opt.step()
        refs.append(model.flat_weights())
        losses.append(curve)
    return net, inits, refs, losses, outcome


def assert_equal_runs(net, inits, refs) -> float:
    """Every layer of every run within TOL of its scale; returns the largest relative deviation."""
    worst = 0.0
    for r, ref in enumerate(refs):
        for k, w_ref in enumerate(ref):
            scale = w_ref.abs().max().item()
            dev = (net.weights[k][r] - w_ref).abs().max().item() / scale
            worst = max(worst, dev)
            assert dev <= TOL, (r, k, dev)
            assert (w_ref - inits[r][k]).abs().max().item() > 1e-6 * scale   # training moved it
    return worst


# runs with different lr and weight decay (and momentum for sgd) share one batch
CASES = {
    "adam": [(0, 0.05, 1e-3, 0.0, 0.0), (1, 0.1, 2e-3, 0.1, 0.0), (2, 0.3, 5e-4, 1.0, 0.0)],
    "adamw": [(0, 0.05, 1e-3, 0.0, 0.0), (1, 0.1, 2e-3, 0.5, 0.0), (2, 0.3, 5e-4, 5.0, 0.0)],
    "sgd": [(0, 0.1, 0.05, 0.0, 0.9), (1, 0.2, 0.02, 0.1, 0.5), (2, 0.3, 0.05, 0.01, 0.0)],
    "gd": [(0, 0.1, 0.05, 0.0, 0.0), (1, 0.2, 0.02, 0.1, 0.0), (2, 0.3, 0.1, 0.01, 0.0)],
}


@pytest.mark.parametrize("arch_name", ["fc", "residual"])
@pytest.mark.parametrize("name,nesterov", [("adam", False), ("adamw", False), ("sgd", False),
                                           ("sgd", True), ("gd", False)])
def test_batched_optimizer_equals_torch_optim(name, nesterov, arch_name):
    arch, x, y = setup(arch_name, depth=3 if arch_name == "residual" else 2)
    rows = CASES[name] if not nesterov else [r[:4] + (max(r[4], 0.3),) for r in CASES[name]]
    specs = [RunSpec(seed, std, lr, wd, mu) for seed, std, lr, wd, mu in rows]
    net, inits, refs, _, _ = train_both(arch, x, y, specs, name, nesterov)
    worst = assert_equal_runs(net, inits, refs)
    label = name + ("+nesterov" if nesterov else "")
    print(f"{label} {arch_name}: max deviation {worst:.2e} of the weight scale")


def test_registry_is_the_only_place_names_live():
    assert set(OPTIMIZERS) >= {"adam", "adamw", "sgd", "gd"}
    assert get_optimizer("adamw").scale_free and not get_optimizer("sgd").scale_free
    with pytest.raises(ValueError, match="'rmsprop'.*adam, adamw, sgd, gd"):
        get_optimizer("rmsprop")
    with pytest.raises(ConfigError, match="momentum.*not used by train.optimizer='adam'"):
        condlab.Config().with_overrides(["train.momentum=0.9"])
    with pytest.raises(ConfigError, match="nesterov"):
        condlab.Config().with_overrides(["train.optimizer=sgd", "train.nesterov=true"])
    with pytest.raises(ConfigError, match="weight_decay=-0.1"):
        condlab.Config().with_overrides(["train.weight_decay=-0.1"])


def test_weight_decay_sweep_is_one_batch_with_unique_names(tmp_path):
    cfg = condlab.preset("fig3").with_overrides([
        "train.epochs=5", "train.optimizer=adamw", "train.weight_decay=[0, 0.01, 0.1]",
        "model.dropout=[0, 0.25]", "train.dtype=float64"])
    result = condlab.train(cfg, out=tmp_path / "b", progress=False)
    names = [r.path.name for r in result]
    assert len(result) == 6 and len(set(names)) == 6 and "seed0-wd0.01-drop0.25" in names
    back = condlab.load_run(result[3].path)
    assert back.spec == result[3].spec and back.spec.weight_decay == 0.01 and back.spec.dropout == 0.25
    assert back.config.train.weight_decay == [0.01] and back.config.model.dropout == [0.25]
    with pytest.raises(ConfigError, match="repeated"):   # two runs would share one name
        cfg.with_overrides(["train.lr=[1e-3, 0.001]"])


def test_old_records_without_new_fields_still_load(tmp_path):
    import json

    cfg = condlab.preset("fig3").with_overrides(["train.epochs=3"])
    run = condlab.train(cfg, out=tmp_path / "b", progress=False)[0]
    meta_file = run.path / "meta.json"
    meta = json.loads(meta_file.read_text())
    for key in ("weight_decay", "momentum", "dropout"):
        meta.pop(key)
    meta_file.write_text(json.dumps(meta))
    assert condlab.load_run(run.path).spec == RunSpec(0, run.spec.init_std, run.spec.lr)


# ---------------------------------------------------------------------------------- dropout


def replayed_masks(arch, n, dtype=torch.float64):
    """The documented mask stream of condlab.training._dropout, re-drawn by hand for one run."""
    def masks_for(spec):
        gen = torch.Generator().manual_seed(dropout_seed(spec.seed))
        while True:
            if spec.dropout == 0:
                yield None
                continue
            yield [(torch.rand((n, arch.width), generator=gen, dtype=dtype) >= spec.dropout).to(dtype)
                   / (1 - spec.dropout) for _ in range(arch.depth)]
    return masks_for


@pytest.mark.parametrize("arch_name", ["fc", "residual"])
def test_dropout_equals_reference_with_the_same_masks(arch_name):
    arch, x, y = setup(arch_name, depth=3)
    specs = [RunSpec(0, 0.1, 1e-3, dropout=0.0), RunSpec(1, 0.2, 2e-3, dropout=0.2),
             RunSpec(2, 0.3, 1e-3, dropout=0.5)]
    net, inits, refs, losses, outcome = train_both(arch, x, y, specs, "adam",
                                                   masks_for=replayed_masks(arch, len(x)))
    worst = assert_equal_runs(net, inits, refs)
    print(f"dropout {arch_name}: max deviation {worst:.2e} of the weight scale")
    # the recorded loss is the network's loss without dropout (evaluation mode)
    np.testing.assert_allclose(outcome.loss[:STEPS].T, np.array(losses), rtol=1e-9)


def test_dropout_masks_have_nn_dropout_semantics():
    from condlab.training._dropout import Dropout

    q = 0.3
    drop = Dropout([0.0, q], [0, 1], torch.float64, torch.device("cpu"))
    mask = drop.masks(0, torch.empty(2, 200, 500, dtype=torch.float64))
    assert torch.equal(mask[0], torch.ones(200, 500, dtype=torch.float64))   # q = 0: kept
    values = set(mask[1].unique().tolist())
    reference = nn.Dropout(q).train()(torch.ones(1000, dtype=torch.float64))
    assert values == set(reference.unique().tolist()) == {0.0, 1 / (1 - q)}
    # share zeroed: q within 5 binomial standard deviations (sd = 6.5e-4 here)
    assert abs((mask[1] == 0).double().mean().item() - q) < 5 * (q * (1 - q) / 1e5) ** 0.5


@pytest.mark.parametrize("depth", [1, 2])   # depth 1 trains through condlab._accel._cpu_step on CPU
def test_zero_dropout_run_is_unchanged_by_its_batch(depth):
    arch, x, y = setup("fc", depth=depth)
    base = [RunSpec(0, 0.1, 1e-3), RunSpec(1, 0.2, 1e-3)]
    mixed = [base[0], RunSpec(1, 0.2, 1e-3, dropout=0.4)]
    weights = []
    for specs in (base, mixed):
        net = BatchedNet(arch, 2, torch.float64, torch.device("cpu"))
        for r, s in enumerate(specs):
            net.load(r, init_weights(arch, s.seed, s.init_std))
        train_batch(net, x, y, specs, optimizer="adam", epochs=20, snapshot_at=[0])
        weights.append([w[0].clone() for w in net.weights])
    assert all(torch.equal(a, b) for a, b in zip(*weights, strict=True))  # bit for bit


# ---------------------------------------------------------------------------------- replay


def direct_replay(history, p, coef, name, lr, init_std, until, n_neurons, eps, wd=0.0, mu=0.0):
    """The leading-order dynamics neuron by neuron, with torch.optim (independent of condlab)."""
    import math

    gen = torch.Generator().manual_seed(0)
    q = history.inputs.shape[2]
    w0 = torch.randn(n_neurons, q, generator=gen, dtype=torch.float64) * init_std
    a0 = torch.randn(n_neurons, 1, generator=gen, dtype=torch.float64) * init_std
    out = []
    for k in range(n_neurons):
        w, a = nn.Parameter(w0[k].clone()), nn.Parameter(a0[k].clone())
        spec = RunSpec(0, init_std, lr, wd, mu)
        opt = torch_optimizer(name, [w, a], spec)
        if name in ("adam", "adamw"):
            opt.param_groups[0]["eps"] = eps
        for t in range(until):
            s = max(i for i, e in enumerate(history.epochs) if e <= t)
            x, e = torch.as_tensor(history.inputs[s]), torch.as_tensor(history.residuals[s])
            n = len(e)
            with torch.no_grad():
                proj = [float(w @ x[i]) for i in range(n)]
                gw = sum(e[i] * proj[i] ** (p - 1) * x[i] for i in range(n))
                gw = gw * coef / math.factorial(p - 1) * a / n
                ga = sum(e[i] * proj[i] ** p for i in range(n)) * coef / math.factorial(p) / n
            w.grad, a.grad = gw.clone(), ga.reshape(1).clone()
            opt.step()
        out.append(w.detach().numpy())
    return np.stack(out)


@pytest.mark.parametrize("name,p,wd,mu", [("gd", 1, 0.0, 0.0), ("adam", 2, 0.0, 0.0),
                                          ("adamw", 1, 0.1, 0.0), ("sgd", 2, 0.01, 0.9)])
def test_replay_uses_the_same_optimizers(name, p, wd, mu):
    gen = np.random.default_rng(0)
    epochs = np.array([0, 7, 15])
    inputs = np.concatenate([gen.normal(size=(3, 6, 2)), np.ones((3, 6, 1))], axis=2)
    history = History(epochs, inputs, gen.normal(size=(3, 6)))
    lr = 1e-3 if name.startswith("adam") else 0.05
    eps = 1e-12
    got = replay_neurons(history, p, 1.0, optimizer=name, lr=lr, init_std=0.1, until=25,
                         n_neurons=4, eps=eps, weight_decay=wd, momentum=mu)
    want = direct_replay(history, p, 1.0, name, lr, 0.1, 25, 4, eps, wd, mu)
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= TOL * scale
    start = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.1
    assert np.abs(want - start.numpy()).max() > 1e-6 * scale   # the replay moved the neurons


def test_optimizer_state_round_trip_and_stop():
    params = torch.randn(6, dtype=torch.float64)
    opt = get_optimizer("adam")(params, Hyper(lr=torch.tensor(0.1, dtype=torch.float64)))
    opt.step(torch.ones(6, dtype=torch.float64))
    twin = get_optimizer("adam")(params.clone(), Hyper(lr=torch.tensor(0.1, dtype=torch.float64)))
    twin.load_state_dict(opt.state_dict())
    g = torch.linspace(-1, 1, 6, dtype=torch.float64)
    opt.step(g.clone())
    twin.step(g.clone())
    assert torch.equal(opt.params, twin.params)
    frozen = torch.tensor([True, False, False, False, False, True])
    before = opt.params.clone()
    opt.stop(frozen)
    opt.step(g.clone())
    assert torch.equal(opt.params[frozen], before[frozen]) and not torch.equal(opt.params, before)
    with pytest.raises(ValueError, match="'adam' cannot be loaded into 'sgd'"):
        get_optimizer("sgd")(params, Hyper(lr=torch.tensor(0.1))).load_state_dict(twin.state_dict())
