"""Every registered fast path (condlab._accel) against the reference computation it replaces.

Claims, stated before running. For every fast path in the registry, on each of its cases below
(float32 and float64 where the reference takes both; with dropout where the fast path takes it):

* the fast path applies (the registry hands out this one) and computes what the reference
  computes, within rounding. Training step: the loss and every gradient entry within 1e-12
  (float64) / 1e-5 (float32) of the largest magnitude of that quantity, i.e. about 5000 / 100
  units of rounding: the fast paths sum over points, neurons and runs in other orders (BLAS
  blocks, per-block partial sums) and may take numpy's tanh (within 1.31 / 1.09 ulp of exact,
  where torch's is within 0.51 / 0.74 ulp). The one-layer step's tanh is chosen by measurement
  on the machine (``_kernels``): its cases run with each choice forced, numpy's and torch's.
  Phase step: the same number of steps, the same stopping reason, and RD, t, the loss curve and
  the final neurons within 1e-8 relative -- rounding in a different summation order, grown over
  a few thousand steps. Optimizer step: the parameters
  after 30 steps (one run frozen half way) within 1e-12 (float64) / 1e-5 (float32) of their
  largest magnitude: PyTorch's fused kernel rounds each update differently from the plain
  tensor step, and 30 steps add up such differences. Plan resolution: exactly the reference's
  plan (runs, hashes -- existing sweep folders resume by hash --, batches, columns, settings,
  duplicates), and for a bad point exactly the reference's error;
* at 2 threads (work split over condlab's pool) it gives the same bits as at 1 thread;
* on its "stands aside" cases it does not apply, and the reference runs.

Mixture EM (the line counter's fit): the same kept components, groups and row labels and the same
line and arc counts as the reference, and axes, spreads and weights within 1e-6 (absolute on unit
axes and log weights, relative on spreads): each EM step agrees to rounding, but a layer whose
log-likelihood moves by about TOL at a step may stop one step apart, and one step then moves the
parameters by about that much. At 2 threads (count_lines_many splits the stack over the pool) the
same counts; the layers of a stack do not interact.

A fast path without cases here fails the first test: a new one comes with its parity cases.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
import torch

from _accel_helpers import two_layer
from condlab._accel import ENV_VAR, MODULES, _kernels, _mixture_em, find, paths
from condlab._accel._mixture_em import MAX_INPUTS
from condlab.activations import get_activation
from condlab.analysis import _line_counts as line_counts
from condlab.analysis._counting import MIN_SHARE, NEGLIGIBLE_MADS, PENALTY, structures
from condlab.analysis._line_counts import count_lines_many
from condlab.analysis._mixture import em_constants
from condlab.analysis._planted import planted
from condlab.phase import scales, train_to_convergence
from condlab.phase._diagram import HARDER_X, HARDER_Y
from condlab.sweeps import run_hash
from condlab.sweeps._plan import make_plan
from condlab.training import Config, ConfigError
from condlab.training._arch import get_architecture
from condlab.training._dropout import Dropout
from condlab.training._models import BatchedNet, augment, init_weights
from condlab.training._optim import Hyper, get_optimizer

D = 3
DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: 1e-5, torch.float64: 1e-12}
PHASE_REL = 1e-8
POINTS = [(0.5, 0.5), (0.25, 1.5), (0.75, -0.5), (1.75, 0.0), (2.25, 0.5), (2.0, -0.5)]

# fast path -> training-step cases (keyword arguments of _net); pre-registered, not tuned
TRAINING = {
    "one-layer numpy step": [
        dict(width=16, n=30),
        dict(width=50, n=80, d=5, std=1e-3),              # the Fig. 3 shape at small initialization
        dict(width=12, n=40, bias=False),
        dict(width=20, n=25, d=4, std=3.0),               # saturated units: |z| up to ~10
        dict(width=8, n=3, d=5),                          # fewer points than inputs: no slope fold
        dict(width=16, n=30, d_out=2),                    # two outputs: no slope fold
        dict(width=16, n=30, d_out=2, act="xtanh", bias=False),   # the activation's torch pass
        dict(width=16, n=12, act="sigmoid", bias=False),
        dict(width=16, n=30, shared=False),               # per-run data: one product per run
        dict(width=16, n=30, dropout=(0.0, 0.3, 0.0, 0.5, 0.1)),
        dict(width=16, n=30, arch="residual"),
    ],
    "wide blocked step": [
        dict(width=3000, n=40, runs=1),                   # blocks of 512 (float64) or 1024 neurons
        dict(width=2001, n=40, runs=2, bias=False),       # a ragged last block
        dict(width=20000, n=80, runs=1),
        dict(width=777, n=400, runs=3),
        dict(width=20000, n=40, runs=2, arch="residual"),
    ],
}
# fast path -> cases where it must not apply (it is not what the reference computes there)
TRAINING_ASIDE = {
    "one-layer numpy step": [
        dict(width=8, n=10, depth=2),
        dict(width=20000, n=40, runs=1),                  # too wide: a product past one BLAS thread
        dict(width=16, n=30, no_one=True),                # the last input column is not the bias's 1
    ],
    "wide blocked step": [
        dict(width=50, n=40),
        dict(width=20000, n=40, runs=1, d_out=2),
        dict(width=20000, n=40, runs=1, act="relu"),
        dict(width=20000, n=40, runs=1, act="sigmoid"),
        dict(width=3000, n=40, runs=1, depth=2),
        dict(width=3000, n=40, runs=1, dropout=(0.5,)),
        dict(width=20000, n=40, runs=1, half=True),
        dict(width=100000, n=20, runs=1),                 # too few points to pay for its compile
    ],
}
# fast path -> phase cases: (width, points, seeds, keyword arguments of train_to_convergence)
PHASE = {
    "compiled ReLU phase step": [
        (40, POINTS, [0, 1, 2, 0, 1, 2], {}),                        # the authors' target
        (300, POINTS, [0, 1, 2, 0, 1, 2], {}),
        # 4 points (another generated kernel); most runs stop at the budget
        (60, POINTS[:4], [3, 4, 5, 6], dict(x=HARDER_X, y=HARDER_Y, max_steps=1500)),
        # c = 8 overshoots: the loss rises and c is halved several times
        (80, POINTS[:3], [0, 1, 2], dict(asi=False, c=8.0, max_steps=3000)),
    ],
}
# more points than the kernel takes; another activation than the ReLU it hard-codes
PHASE_ASIDE = {"compiled ReLU phase step": [(7, "relu"), (3, "tanh")]}
# fast path -> optimizer cases: (optimizer, hyper-parameters shared by every element or per run)
OPTIMIZER = {"fused Adam": [("adam", True), ("adam", False), ("adamw", True), ("adamw", False)]}
OPTIMIZER_ASIDE = {"fused Adam": [("adam", torch.float16)]}   # a dtype the kernel does not take
# fast path -> sweep specs it must plan as the reference does, then specs with a bad point
PLAN_SPECS = {
    "tiny": {"name": "tiny", "base": "fig5",
             "set": {"train.epochs": 30, "train.snapshots": "every:10", "train.dtype": "float64"},
             "grid": {"model.width": [8, 12]},
             "zip": {"train.lr": [1e-3, 5e-4], "model.init_std": [0.005, 0.01]},
             "seeds": {"init": 2, "data": [0, 1]}},
    "bench-batched": {"base": "fig3", "set": {"train.snapshots": "every:100"},
                      "grid": {"train.lr": [1e-3 * 1.25**i for i in range(4)],
                               "model.init_std": [0.005 * 1.25**i for i in range(3)]},
                      "seeds": {"init": 4}},
    "bench-separate": {"base": "fig3", "grid": {"data.amplitude": [3.0, 3.1], "data.frequency": [4, 4.25]},
                       "seeds": {"init": [3, 1]}},
    "base-lists-and-list-axis": {"base": {"train": {"lr": [1e-3, 2e-3], "epochs": 5}},
                                 "list": [{"model.width": 4}, {"model.width": 6, "data.n": 10},
                                          {"model.width": 4, "train.lr": "3e-3, 1e-3"}]},
    "values-as-text-and-ints": {"grid": {"train.lr": ["1e-3", 0.001, 1], "train.seeds": [[0, 1], 2]}},
    "sgd-momentum-decay-dropout": {"set": {"train.optimizer": "sgd", "train.nesterov": True},
                                   "grid": {"train.momentum": [0.5, 0.9], "train.weight_decay": [0, 1e-4],
                                            "model.dropout": [0.0, 0.25]}},
    "duplicates": {"list": [{"train.lr": 1e-3}, {"train.lr": [1e-3, 2e-3]}, {"model.width": 50}]},
    "task": {"base": "fig5", "task": "condlab.phase._task", "seeds": 3},
    "section-replaced": {"grid": {"train": [{"epochs": 3, "lr": [1e-3]}, {"epochs": 4}]}},
    "slot-lookalike": {"set": {"data.data_dir": "@@condlab-batched-0@@"}, "seeds": 2},
    "negative-zero": {"grid": {"train.weight_decay": [0.0, -0.0]}, "seeds": 2},
}
PLAN_BAD = {
    "lr-zero-late": {"grid": {"train.lr": [1e-3, 2e-3, 0]}, "seeds": 2},
    "momentum-without-sgd": {"grid": {"train.lr": [1e-3, 2e-3], "train.momentum": [0.0, 0.5]}},
    "nesterov-zero-momentum": {"set": {"train.optimizer": "sgd", "train.nesterov": True},
                               "grid": {"train.momentum": [0.9, 0.0]}},
    "repeated-lr": {"list": [{"train.lr": 1e-3}, {"train.lr": [2e-3, 0.002]}]},
    "dropout-one": {"grid": {"model.dropout": [0.5, 1.0]}},
    "bool-seed": {"grid": {"train.seeds": [1, True]}},
    "width-zero": {"grid": {"model.width": [3, 0]}, "seeds": 2},
    "device-axis": {"grid": {"train.device": ["cpu", "auto"]}, "seeds": 2},   # one run twice
}
PLAN = {"grouped plan resolution": sorted(PLAN_SPECS) + [f"bad:{k}" for k in sorted(PLAN_BAD)]}


class _OwnConfig(Config):
    """A config class of a user's own: the resolver was written for Config, not for it."""


PLAN_ASIDE = {"grouped plan resolution": [_OwnConfig]}
# fast path -> stacks of line-counter layers: (planted class, first dev layers) or a named stack
MIXTURE = {"compiled mixture EM": [("tight", 12), ("broad", 6), ("background", 8), ("arc", 8),
                                   ("heavy-amplitudes", 4), ("close-pairs", 8), ("random", 20),
                                   ("giant", 4), "degenerate"]}
MIXTURE_ASIDE = {"compiled mixture EM": ["wide inputs", "float32", "not contiguous"]}


def _registered() -> dict[str, object]:
    return {path.name: path for protocol in MODULES for path in paths(protocol)}


def test_every_registered_fast_path_has_parity_cases():
    names = set(_registered())
    assert names == set(TRAINING) | set(PHASE) | set(OPTIMIZER) | set(PLAN) | set(MIXTURE)
    assert names == (set(TRAINING_ASIDE) | set(PHASE_ASIDE) | set(OPTIMIZER_ASIDE) | set(PLAN_ASIDE)
                     | set(MIXTURE_ASIDE))


@contextmanager
def _mode(monkeypatch, fast: bool, threads: int = 1):
    """Fast paths on or off (the registry reads the switch at each lookup), at `threads` threads."""
    before = torch.get_num_threads()
    if fast:
        monkeypatch.delenv(ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(ENV_VAR, "1")
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _net(width: int, n: int, dtype: torch.dtype, d: int = D, runs: int = 5, d_out: int = 1,
         bias: bool = True, act: str = "tanh", arch: str = "fc", depth: int = 1, std: float = 0.5,
         shared: bool = True, dropout: tuple[float, ...] | None = None, no_one: bool = False,
         half: bool = False):
    """A net of `runs` runs (init std grows with the run), data, targets and dropout masks."""
    net_arch = get_architecture(arch)(d, width, depth, d_out, (get_activation(act),) * depth, bias)
    net = BatchedNet(net_arch, runs, dtype, torch.device("cpu"))
    for r in range(runs):
        net.load(r, init_weights(net_arch, r, std * (1 + r / 2)))
    gen = torch.Generator().manual_seed(n)
    x = torch.rand(n, d, generator=gen, dtype=torch.float64) * 4 - 2
    y = torch.sin(2 * x).sum(1, keepdim=True).repeat(1, d_out)
    xb = augment(x).to(dtype).expand(runs, -1, -1).contiguous()
    if not shared:
        xb[..., :-1] += torch.arange(runs, dtype=dtype)[:, None, None] / 10
    if no_one:
        xb[..., -1] = 2.0
    yb = y.to(dtype).expand(runs, -1, -1).contiguous()
    if half:
        xb, yb = xb.half(), yb.half()
    drop = None if dropout is None else Dropout(dropout, list(range(runs)), dtype, torch.device("cpu"))
    return net, xb, yb, drop


def _cases(table: dict[str, list]) -> list:
    return [pytest.param(name, case, id=f"{name}-{k}") for name, cases in table.items()
            for k, case in enumerate(cases)]


# fast path -> the elementwise kernels it chooses between by measurement (_kernels): its cases
# run with each alternative forced, so both are held to the reference whatever this CPU picks
KERNEL_CHOICES = {"one-layer numpy step": ("tanh",)}


def _training_cases() -> list:
    return [pytest.param(name, case, which, id=f"{name}-{k}-tanh:{which}")
            for name, cases in TRAINING.items() for k, case in enumerate(cases)
            for which in (("fast", "reference") if name in KERNEL_CHOICES else ("measured",))]


@contextmanager
def _kernel(name: str, which: str):
    """The fast path's kernels forced to `which` ("measured": left to the calibration)."""
    if which == "measured":
        yield
        return
    with _kernels.forced(KERNEL_CHOICES[name][0], which):
        yield


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name,case,kernel", _training_cases())
def test_training_step_equals_the_reference(name, case, kernel, dtype, monkeypatch):
    path = _registered()[name]
    net, xb, yb, drop = _net(dtype=dtype, **case)
    with _mode(monkeypatch, fast=True):
        assert path.make(net, xb, yb, drop) is not None             # it applies here
    # split whenever there are 2 threads: the thresholds are set for speed, not for what is computed
    monkeypatch.setattr("condlab._accel._cpu_step.STEP_PARALLEL_MIN", 1)
    monkeypatch.setattr("condlab._accel._wide_step.PARALLEL_MIN", 1)
    out = {}
    for key, fast, threads in (("fast", True, 1), ("split", True, 2), ("reference", False, 1)):
        net, xb, yb, drop = _net(dtype=dtype, **case)
        with _mode(monkeypatch, fast, threads), _kernel(name, kernel):
            loss = net.loss_and_grad(xb, yb, drop)
            step = net.fast_step(xb, yb, drop)
        assert (step is not None) == fast and (not fast or type(step) is path.make.__self__)
        out[key] = (loss, [g.clone() for g in net.grads])
    assert torch.equal(out["fast"][0], out["split"][0])
    assert all(torch.equal(a, b) for a, b in zip(out["fast"][1], out["split"][1], strict=True))
    (loss, grads), (ref_loss, ref_grads) = out["fast"], out["reference"]
    tol = TOL[dtype]
    torch.testing.assert_close(loss, ref_loss, rtol=0, atol=tol * ref_loss.abs().max().item())
    for grad, ref in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(grad, ref, rtol=0, atol=tol * ref.abs().max().item())


@pytest.mark.parametrize("name,case", _cases(TRAINING_ASIDE))
def test_training_step_stands_aside_where_it_does_not_apply(name, case, accelerated):
    net, xb, yb, drop = _net(dtype=torch.float64, **case)
    assert _registered()[name].make(net, xb, yb, drop) is None


def _phase(width: int, points, seeds, kw: dict):
    return train_to_convergence(width, [scales(g, gp, width) for g, gp in points], seeds, **kw).runs


@pytest.mark.parametrize("name,case", _cases(PHASE))
def test_phase_step_equals_the_reference(name, case, monkeypatch):
    width, points, seeds, kw = case
    n = len(kw.get("x", (0, 0, 0)))
    with _mode(monkeypatch, fast=True):
        assert _registered()[name].make(two_layer(), n) is not None
    out = {}
    for key, fast, threads in (("fast", True, 1), ("split", True, 2), ("reference", False, 1)):
        with _mode(monkeypatch, fast, threads):
            out[key] = _phase(width, points, seeds, kw)
    for a, b in zip(out["fast"], out["split"], strict=True):   # each run on its own: same bits
        assert (a.steps, a.loss, a.rd_w, a.rd_a, a.time) == (b.steps, b.loss, b.rd_w, b.rd_a, b.time)
    ref = out["reference"]
    assert len(out["fast"]) == len(ref) == len(seeds)
    for a, b in zip(out["fast"], ref, strict=True):
        assert (a.steps, a.converged, a.status) == (b.steps, b.converged, b.status)
        for field in ("rd_w", "rd_a", "time", "loss"):
            assert getattr(a, field) == pytest.approx(getattr(b, field), rel=PHASE_REL)
        np.testing.assert_allclose(a.curve["loss"], b.curve["loss"], rtol=PHASE_REL)
        np.testing.assert_allclose(a.curve["time"], b.curve["time"], rtol=PHASE_REL)
        for key in ("a", "w", "b"):   # a weight that cancels to ~0 has only an absolute error
            scale = np.abs(b.neurons[key]).max()
            np.testing.assert_allclose(a.neurons[key], b.neurons[key], rtol=PHASE_REL, atol=PHASE_REL * scale)


@pytest.mark.parametrize("name,case", _cases(PHASE_ASIDE))
def test_phase_step_stands_aside_where_it_does_not_apply(name, case, accelerated):
    n, activation = case
    assert _registered()[name].make(two_layer(activation), n) is None


def _adam(name: str, shared: bool, dtype: torch.dtype, size: int = 5000):
    """An Adam/AdamW optimizer over `size` parameters (lr and weight decay shared, or in runs of
    different values), after 30 steps; the first 8 parameters (a diverged run) are frozen after
    step 10."""
    params = torch.randn(size, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(dtype)
    if shared:
        lr, wd = torch.tensor(1e-2, dtype=dtype), torch.tensor(0.1, dtype=dtype)
    else:
        lr, wd = torch.full_like(params, 1e-2), torch.zeros_like(params)
        lr[1700:3100], wd[1000:2500] = 3e-3, 0.3
    opt = get_optimizer(name)(params, Hyper(lr=lr, weight_decay=wd))
    for k in range(30):
        opt.step(torch.sin(params * (k + 1)) + 0.1 * params)   # a gradient that depends on params
        if k == 10:
            opt.stop(torch.arange(size) < 8)
    return params, opt


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name,case", _cases(OPTIMIZER))
def test_optimizer_step_equals_the_reference(name, case, dtype, monkeypatch):
    optimizer, shared = case
    path = _registered()[name]
    out = {}
    for key, fast, threads in (("fast", True, 1), ("split", True, 2), ("reference", False, 1)):
        with _mode(monkeypatch, fast, threads):
            params, opt = _adam(optimizer, shared, dtype)
        assert (opt._fast is not None) == fast and (not fast or type(opt._fast) is path.make.__self__)
        out[key] = params
    assert torch.equal(out["fast"], out["split"])
    ref = out["reference"]
    torch.testing.assert_close(out["fast"], ref, rtol=0, atol=TOL[dtype] * ref.abs().max().item())


@pytest.mark.parametrize("name,case", _cases(OPTIMIZER_ASIDE))
def test_optimizer_step_stands_aside_where_it_does_not_apply(name, case, accelerated):
    optimizer, dtype = case
    opt = get_optimizer(optimizer)(torch.zeros(10, dtype=dtype), Hyper(lr=torch.tensor(1e-3)))
    assert _registered()[name].make(opt) is None


@pytest.mark.parametrize("name,case", _cases(PLAN))
def test_plan_resolution_equals_the_reference(name, case, monkeypatch):
    spec = PLAN_BAD[case[4:]] if case.startswith("bad:") else PLAN_SPECS[case]
    out = {}
    for key, fast in (("fast", True), ("reference", False)):
        with _mode(monkeypatch, fast):
            assert type(find("plan resolution", Config, "")).__name__ == ("Groups" if fast else "NoneType")
            try:
                plan = make_plan(spec)
                out[key] = (plan.to_dict(), plan.duplicates, [(r.hash, run_hash(r.config, plan.task))
                                                              for r in plan.runs])
            except ConfigError as err:
                out[key] = str(err)
    assert out["fast"] == out["reference"]
    assert isinstance(out["fast"], str) == case.startswith("bad:")
    if not case.startswith("bad:"):
        assert all(h == again for h, again in out["fast"][2])   # hashes are the runs' own


@pytest.mark.parametrize("name,case", _cases(PLAN_ASIDE))
def test_plan_resolution_stands_aside_where_it_does_not_apply(name, case, accelerated):
    assert find("plan resolution", case, "") is None


def _stack(case) -> np.ndarray:
    """Layers (B, m, k) of one shape for the mixture cases: planted dev layers with k <= MAX_INPUTS
    of the class's most common shape, or the degenerate stack (no active row, two rows, repeated
    rows, a circle's worth of inputs)."""
    if case == "degenerate":
        rng = np.random.default_rng(7)
        W = np.repeat(rng.standard_normal((1, 1, 2)), 6, axis=0).repeat(30, axis=1)
        W[0] = 0.0
        W[1, 2:] = 0.0
        W[2] += 1e-3 * rng.standard_normal((30, 2))
        W[3] = rng.standard_normal((30, 2))
        W[4, :15] = [1.0, 0.0]
        W[4, 15:] = [0.0, 1.0]
        return W
    layers = [planted(case[0], i, dev=True).W for i in range(case[1])]
    layers = [W for W in layers if W.shape[1] <= MAX_INPUTS]
    shape = max(set(W.shape for W in layers), key=[W.shape for W in layers].count)
    return np.stack([W for W in layers if W.shape == shape]).astype(np.float64)


@pytest.mark.parametrize("name,case", _cases(MIXTURE))
def test_mixture_em_equals_the_reference(name, case, monkeypatch):
    W = _stack(case)
    out, ran, call = {}, [], _mixture_em.CompiledEM.__call__
    monkeypatch.setattr(_mixture_em.CompiledEM, "__call__", lambda *a, **kw: ran.append(1) or call(*a, **kw))
    for key, fast in (("fast", True), ("reference", False)):
        with _mode(monkeypatch, fast):
            B = len(W)
            out[key] = structures(W, np.full(B, PENALTY), np.full(B, NEGLIGIBLE_MADS), MIN_SHARE)
            if fast:   # the same counts whatever the split over threads (split however small)
                monkeypatch.setattr(line_counts, "LAYERS_PER_CALL", 1)
                assert count_lines_many(W, threads=2) == out[key].n_lines.tolist()
    fast, ref = out["fast"], out["reference"]
    assert ran   # the compiled EM computed the fast side
    for field in ("n_lines", "n_arcs", "live", "arc"):
        np.testing.assert_array_equal(getattr(fast, field), getattr(ref, field), err_msg=field)
    for field in ("alive", "root", "comp"):
        np.testing.assert_array_equal(getattr(fast.fit, field), getattr(ref.fit, field), err_msg=field)
    on = ref.fit.alive
    np.testing.assert_allclose(np.abs((fast.fit.mu * ref.fit.mu).sum(axis=2))[on], 1.0, atol=1e-6)
    np.testing.assert_allclose(fast.fit.s[on], ref.fit.s[on], rtol=1e-6)
    np.testing.assert_allclose(fast.fit.log_pi[:, 1:][on], ref.fit.log_pi[:, 1:][on], atol=1e-6)


def test_mixture_em_is_built():
    """The C extension is part of the development install (`make setup` builds it with a C compiler)."""
    assert _mixture_em._em is not None, "condlab._accel._em is not built: pip install -e . with a C compiler"
    assert _mixture_em._em.ABI_VERSION == _mixture_em.ABI_VERSION


@pytest.mark.parametrize("name,case", _cases(MIXTURE_ASIDE))
def test_mixture_em_stands_aside_where_it_does_not_apply(name, case, accelerated):
    k = MAX_INPUTS + 1 if case == "wide inputs" else 6
    dtype = np.float32 if case == "float32" else np.float64
    UT = np.zeros((3, k, 40), dtype)
    mu, log_s, log_pi = np.zeros((3, 4, k)), np.zeros((3, 4)), np.zeros((3, 5))
    if case == "not contiguous":
        mu = np.zeros((3, 8, k))[:, ::2]
    prev, steps = np.zeros(3), np.zeros(3, np.int64)
    assert find("mixture EM", np.ndarray, UT, mu, log_s, log_pi, prev, steps, em_constants()) is None
