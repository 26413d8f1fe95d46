"""The fast paths' seam (condlab._accel): exact classes only, one switch, failures fall back.

Their parity with the reference is tests/test_accel_parity.py; here is what is not parity: a
subclass of a built-in architecture trains with its own pass on every path, CONDLAB_REFERENCE
switches every fast path off, a fast path that fails falls back to the reference with one
warning, and the fast paths' own promises (resume bit for bit, silent divergence, Ctrl-C).
"""

from __future__ import annotations

import signal
import sys
import types
import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
import torch

import condlab
from _accel_helpers import two_layer
from condlab._accel import AccelWarning, _mixture_em, _registry, _relu_fused, _wide_step, find
from condlab.analysis._line_counts import count_lines_many
from condlab.analysis._mixture import em_constants
from condlab.phase import TwoLayer, scales, train_to_convergence
from condlab.training._arch import ARCHITECTURES, FullyConnected, get_architecture
from condlab.training._data import make_dataset
from condlab.training._models import BatchedNet, augment, init_weights
from condlab.training._optim import Hyper, get_optimizer

POINTS = [(0.5, 0.5), (0.25, 1.5), (0.75, -0.5)]


# ----------------------------------------------------------------------------- a subclass's own pass

@dataclass(frozen=True)
class Doubled(FullyConnected):
    """The issue's probe: a depth-1 subclass of ``fc`` with its own forward and backward pass
    (the output doubled), which no fast path written for ``fc`` computes."""

    name: ClassVar[str] = "doubled-probe"

    def batched_forward(self, weights, x_aug, work, dropout=None):
        f, inputs = super().batched_forward(weights, x_aug, work, dropout)
        return f.mul_(2), inputs

    def batched_backward(self, weights, grads, delta, inputs, work):
        super().batched_backward(weights, grads, delta * 2, inputs, work)


def _own_loss(cfg: condlab.Config) -> float:
    """The subclass's own loss at the initial weights, from its own forward pass."""
    data = make_dataset(cfg.data)
    arch = Doubled.from_config(cfg.model, cfg.data.d)
    net = BatchedNet(arch, 1, torch.float64, torch.device("cpu"))
    net.load(0, init_weights(arch, cfg.train.seeds[0], cfg.model.init_std[0]))
    x = augment(torch.as_tensor(data.x, dtype=torch.float64))[None]
    f, _ = arch.batched_forward(net.weights, x, net._workspace(x.shape[1], x))
    y = torch.as_tensor(data.y, dtype=torch.float64)[None]
    return float((f - y).square().sum() / (2 * x.shape[1]))


# widths where `fc` takes the small numpy step and the wide blocked step on CPU
@pytest.mark.parametrize("width", [50, 20000])
def test_a_subclass_trains_with_its_own_pass_on_every_path(width, monkeypatch):
    # claim: training reports the subclass's own loss (float64, within 1e-12 relative), with the
    # fast paths on and off, and trains it the same way on both; the plain `fc` net of the same
    # weights has another loss and does take a fast path here, so the test could fail
    monkeypatch.setitem(ARCHITECTURES, Doubled.name, Doubled)
    overrides = [f"model.width={width}", "model.init_std=0.5", "train.epochs=3", "train.snapshots=every:1",
                 "train.dtype=float64"]
    cfg = condlab.preset("fig3").with_overrides([*overrides, f"model.arch={Doubled.name}"])
    own = _own_loss(cfg)
    losses = {}
    for mode in ("fast", "reference"):
        if mode == "fast":
            monkeypatch.delenv("CONDLAB_REFERENCE", raising=False)
        else:
            monkeypatch.setenv("CONDLAB_REFERENCE", "1")
        losses[mode] = condlab.train(cfg, progress=False)[0].loss
        assert losses[mode][0] == pytest.approx(own, rel=1e-12)
    # the later epochs differ by the optimizer's rounding only (fused Adam is a fast path too)
    np.testing.assert_allclose(losses["fast"], losses["reference"], rtol=1e-12)
    monkeypatch.delenv("CONDLAB_REFERENCE")
    plain = condlab.train(condlab.preset("fig3").with_overrides(overrides), progress=False)[0].loss
    assert abs(plain[0] - own) > 0.05 * own
    net, x, y = _fc(width, 80)
    assert net.fast_step(x, y) is not None


def _fc(width: int, n: int, dtype=torch.float64, runs: int = 1, std: float = 0.5):
    """A d=3 tanh fc net of `runs` runs on shared data (a broadcast view, like the trainer's)."""
    arch = get_architecture("fc")(3, width, 1, 1, (condlab.get_activation("tanh"),), True)
    net = BatchedNet(arch, runs, dtype, torch.device("cpu"))
    for r in range(runs):
        net.load(r, init_weights(arch, r, std))
    gen = torch.Generator().manual_seed(n)
    x = torch.rand(n, 3, generator=gen, dtype=torch.float64) * 4 - 2
    xb = augment(x).to(dtype)[None].expand(runs, n, 4)
    return net, xb, torch.sin(2 * x[:, :1]).to(dtype)[None].expand(runs, n, 1).contiguous()


class MyTwoLayer(TwoLayer):
    """A subclass of the phase diagram's two-layer net (it could change the loss)."""


def test_the_reference_switch_turns_every_fast_path_off(reference):
    for width in (50, 20000):
        net, x, y = _fc(width, 80)
        assert net.fast_step(x, y) is None
    assert find("phase step", TwoLayer, two_layer(), 3) is None
    opt = get_optimizer("adam")(torch.zeros(10), Hyper(lr=torch.tensor(1e-3)))
    assert opt._fast is None
    assert find("mixture EM", np.ndarray, *_em_args()) is None


def _em_args(cls: type = np.ndarray) -> tuple:
    """The arguments `fit` hands the mixture EM's lookup: a stack of 3 layers, 40 rows, 6 inputs."""
    return (np.zeros((3, 6, 40)).view(cls), np.zeros((3, 12, 6)), np.zeros((3, 12)), np.zeros((3, 13)),
            np.zeros(3), np.zeros(3, np.int64), em_constants())


def test_fast_paths_match_the_exact_class_only(accelerated):
    net, x, y = _fc(50, 80)
    assert find("training step", FullyConnected, net, x, y, None) is not None
    assert find("training step", Doubled, net, x, y, None) is None
    assert find("phase step", TwoLayer, two_layer(), 3) is not None
    assert find("phase step", MyTwoLayer, two_layer(), 3) is None
    assert find("phase step", TwoLayer, two_layer("tanh"), 3) is None   # written for ReLU
    assert get_optimizer("adam")(torch.zeros(10), Hyper(lr=torch.tensor(1e-3)))._fast is not None

    class MyAdam(get_optimizer("adam")):
        """A subclass of Adam (it could change the step)."""

    assert MyAdam(torch.zeros(10), Hyper(lr=torch.tensor(1e-3)))._fast is None

    class MyArray(np.ndarray):
        """An array subclass (it could change the arithmetic)."""

    assert find("mixture EM", np.ndarray, *_em_args()) is not None
    assert find("mixture EM", MyArray, *_em_args(MyArray)) is None


# ----------------------------------------------------------------------------- failures fall back

@pytest.fixture
def fresh(monkeypatch, accelerated):
    """A registry that has switched nothing off yet (failures here do not leak into other tests)."""
    monkeypatch.setattr(_registry, "_FAILED", set())


def _once(make_and_run):
    """make_and_run() twice: one AccelWarning the first time, none the second; both results."""
    with pytest.warns(AccelWarning) as caught:
        first = make_and_run()
    assert len(caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = make_and_run()
    return first, second


def _wide_loss_and_grad(net_args=(20000, 80)):
    net, x, y = _fc(*net_args, runs=2)
    loss = net.loss_and_grad(x, y)
    return loss, net.grad.clone(), net.fast_step(x, y)


def _reference_wide(monkeypatch) -> tuple[torch.Tensor, torch.Tensor]:
    monkeypatch.setenv("CONDLAB_REFERENCE", "1")
    loss, grad, _ = _wide_loss_and_grad()
    monkeypatch.delenv("CONDLAB_REFERENCE")
    return loss, grad


def _uncached(monkeypatch, module, *names: str) -> None:
    """Make the module's cached functions compute afresh (their caches hold a working kernel)."""
    for name in names:
        monkeypatch.setattr(module, name, getattr(module, name).__wrapped__)


def test_a_failing_numpy_ufunc_probe_falls_back_to_the_reference(fresh, monkeypatch):
    class Renamed:   # numpy's ufunc struct cannot be read as expected: TypeError
        @staticmethod
        def from_address(address):
            raise TypeError("an integer is required")

    monkeypatch.setattr(_wide_step, "_UFunc", Renamed)
    _uncached(monkeypatch, _wide_step, "_numpy_tanh_loop", "_forward_kernel")
    ref_loss, ref_grad = _reference_wide(monkeypatch)
    for loss, grad, step in _once(_wide_loss_and_grad):
        assert step is None
        assert torch.equal(loss, ref_loss) and torch.equal(grad, ref_grad)


def test_a_missing_numba_falls_back_to_the_reference(fresh, monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)   # `import numba` raises ImportError
    _uncached(monkeypatch, _wide_step, "_kernels", "_forward_kernel")
    ref_loss, ref_grad = _reference_wide(monkeypatch)
    for loss, grad, step in _once(_wide_loss_and_grad):
        assert step is None and torch.equal(loss, ref_loss) and torch.equal(grad, ref_grad)
    # the phase step's module imports numba itself: its import fails, the reference loop trains
    monkeypatch.setattr(_registry, "_LOADED", _registry._LOADED - {"phase step"})
    monkeypatch.setattr(_registry, "_PATHS", {k: v for k, v in _registry._PATHS.items() if k != "phase step"})
    monkeypatch.delitem(sys.modules, "condlab._accel._relu_fused")
    runs = _once(lambda: train_to_convergence(20, [scales(0.5, 0.5, 20)], [0], max_steps=5).runs[0])
    assert all(run.steps == 5 for run in runs)


def test_a_compile_failure_falls_back_to_the_reference(fresh, monkeypatch):
    def njit(*args, **kwargs):   # numba's decorator, returning a function that fails to compile
        def failing(*call_args):
            raise RuntimeError("Failed in nopython mode pipeline (step: native lowering)")
        return lambda fn: failing

    monkeypatch.setattr(_relu_fused, "numba", types.SimpleNamespace(njit=njit))
    _uncached(monkeypatch, _relu_fused, "kernels")
    scale = [scales(g, gp, 30) for g, gp in POINTS]
    monkeypatch.setenv("CONDLAB_REFERENCE", "1")
    ref = train_to_convergence(30, scale, [0, 1, 2], max_steps=200).runs
    monkeypatch.delenv("CONDLAB_REFERENCE")
    for runs in _once(lambda: train_to_convergence(30, scale, [0, 1, 2], max_steps=200).runs):
        assert [(r.steps, r.loss, r.rd_w) for r in runs] == [(r.steps, r.loss, r.rd_w) for r in ref]


def test_any_exception_of_a_fast_path_falls_back(fresh, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("a renamed internal")

    monkeypatch.setattr("condlab._accel._cpu_step.OneLayerStep.__init__", broken)
    monkeypatch.setenv("CONDLAB_REFERENCE", "1")
    net, x, y = _fc(50, 80, runs=3)
    ref = net.loss_and_grad(x, y)
    monkeypatch.delenv("CONDLAB_REFERENCE")

    def run():
        other, xb, yb = _fc(50, 80, runs=3)
        return other.loss_and_grad(xb, yb), other.fast_step(xb, yb)

    for loss, step in _once(run):
        assert step is None and torch.equal(loss, ref)


@pytest.mark.parametrize("build", ["missing", "stale"])
def test_a_build_without_the_compiled_em_counts_with_the_reference(build, fresh, monkeypatch):
    """pip installs condlab without the C extension where no compiler is found: not a failure, no
    warning; a stale in-place build (another ABI_VERSION) is not used either."""
    rng = np.random.default_rng(3)
    axes = rng.standard_normal((3, 6))
    stack = axes[rng.integers(0, 3, (4, 60))] + 0.05 * rng.standard_normal((4, 60, 6))
    monkeypatch.setenv("CONDLAB_REFERENCE", "1")
    want = count_lines_many(stack)
    monkeypatch.delenv("CONDLAB_REFERENCE")
    stale = types.SimpleNamespace(ABI_VERSION=_mixture_em.ABI_VERSION + 1, em=None)
    monkeypatch.setattr(_mixture_em, "_em", None if build == "missing" else stale)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert find("mixture EM", np.ndarray, *_em_args()) is None
        assert count_lines_many(stack) == want


def _adam_steps(name: str) -> tuple[torch.Tensor, object]:
    params = torch.linspace(-1, 1, 64, dtype=torch.float64)
    opt = get_optimizer(name)(params, Hyper(lr=torch.tensor(1e-2), weight_decay=torch.tensor(0.1)))
    for k in range(5):
        opt.step(torch.sin(params * (k + 1)))
    return params, opt._fast


@pytest.mark.parametrize("name,kernel", [("adam", "_fused_adam_"), ("adamw", "_fused_adamw_")])
@pytest.mark.parametrize("change", ["renamed keyword", "removed"])
def test_a_changed_private_torch_kernel_falls_back(name, kernel, change, fresh, monkeypatch):
    # the case: with one keyword of torch._fused_adam_ renamed, condlab.train crashed
    def renamed(*args, lr=None, **kwargs):   # as if torch now called it `learning_rate`
        raise TypeError(f"{kernel}() got an unexpected keyword argument 'lr'")

    monkeypatch.setenv("CONDLAB_REFERENCE", "1")
    plain, _ = _adam_steps(name)
    cfg = condlab.preset("fig3").with_overrides([f"train.optimizer={name}", "train.epochs=5",
                                                 "train.snapshots=every:5", "train.dtype=float64"])
    ref = condlab.train(cfg, progress=False)[0]
    monkeypatch.delenv("CONDLAB_REFERENCE")
    if change == "removed":
        monkeypatch.delattr(torch, kernel)
    else:
        monkeypatch.setattr(torch, kernel, renamed)
    for params, fast in _once(lambda: _adam_steps(name)):
        assert fast is None and torch.equal(params, plain)   # the plain step, bit for bit
    record = condlab.train(cfg, progress=False)[0]          # trains (the small step may be numpy's)
    np.testing.assert_allclose(record.loss, ref.loss, rtol=1e-12)


# ----------------------------------------------------------------------------- the wide step's promises

def test_block_width_keeps_the_product_on_one_blas_thread():
    assert _wide_step.block_width(80, 6, 4) == 512 and _wide_step.block_width(80, 6, 8) == 256
    assert _wide_step.block_width(10**6, 6, 4) == 0
    for n, cols in [(16, 2), (80, 6), (500, 11)]:
        assert _wide_step.block_width(n, cols, 8) * n * cols <= 1 << 18


def test_a_wide_training_resumes_bit_for_bit(accelerated):
    """Ten Adam steps in one go equal five, a copy of the state, and five more."""
    def steps(net, opt, x, y, k):
        for _ in range(k):
            net.loss_and_grad(x, y)
            opt.step(net.grad)

    net, x, y = _fc(3000, 40, dtype=torch.float32)
    hyper = Hyper(lr=torch.tensor(1e-3))
    opt = get_optimizer("adam")(net.flat, hyper)
    steps(net, opt, x, y, 5)
    assert net.fast_step(x, y) is not None
    net2, _, _ = _fc(3000, 40, dtype=torch.float32)
    net2.flat.copy_(net.flat)
    opt2 = get_optimizer("adam")(net2.flat, hyper)
    opt2.load_state_dict(opt.state_dict())
    steps(net, opt, x, y, 5)
    steps(net2, opt2, x, y, 5)
    assert torch.equal(net.flat, net2.flat)


WIDE = {"data": {"n": 40, "d": 2}, "model": {"width": 5000, "init_std": [0.01], "activations": ["tanh"]},
        "train": {"optimizer": "adam", "lr": [1e-3], "epochs": 40, "snapshots": "every:10",
                  "dtype": "float32", "checkpoint_seconds": 1e-9}}


def test_a_wide_training_resumed_from_a_checkpoint_equals_uninterrupted(tmp_path, monkeypatch, accelerated):
    """The trainer's own checkpoint, written after 20 of 40 epochs and resumed: bit for bit."""
    from condlab.training._checkpoint import write_checkpoint

    calls = []
    original = _wide_step.WideStep.loss_and_grad
    monkeypatch.setattr(_wide_step.WideStep, "loss_and_grad",
                        lambda self, dropout=None: calls.append(1) or original(self))
    full = condlab.train(WIDE, progress=False)
    assert len(calls) >= 40   # the blocked step trained it
    kept = []

    def keep_one(path, config, params, optimizer, dropout, state, *args):
        if state.epoch == 20:
            write_checkpoint(path, config, params, optimizer, dropout, state, *args)
            kept.append(path.read_bytes())

    with monkeypatch.context() as patch:
        patch.setattr("condlab.training._api.write_checkpoint", keep_one)
        condlab.train(WIDE, out=tmp_path / "a", progress=False)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "checkpoint.pt").write_bytes(kept[0])
    resumed = condlab.resume(tmp_path / "b", progress=False)
    for a, b in zip(full, resumed, strict=True):
        np.testing.assert_array_equal(a.loss, b.loss)
        assert all(np.array_equal(a.weights[k], b.weights[k]) for k in a.weights)


def test_the_blocked_step_allocates_no_architecture_workspace(accelerated):
    """Its one (R, n, m) buffer replaces the architecture's five (z, h, slope, two for dR/dh)."""
    net, x, y = _fc(20000, 80, dtype=torch.float32)
    net.loss_and_grad(x, y)
    step = net.fast_step(x, y)
    assert isinstance(step, _wide_step.WideStep) and net._buffers == {}
    assert step.h.size == 20000 * 80


@pytest.mark.parametrize("threads", [1, 2])
def test_a_diverged_wide_run_warns_nothing_and_reports_a_non_finite_loss(threads, accelerated):
    """Overflowing runs are caught by their loss (the trainer freezes them): no numpy warnings,
    also from the pool's threads (pytest turns warnings into errors)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        net, x, y = _fc(30000, 64, dtype=torch.float32, runs=2, std=1e37)
        loss = net.loss_and_grad(x, y)
    finally:
        torch.set_num_threads(before)
    assert net.fast_step(x, y) is not None and not torch.isfinite(loss).any()
    # numpy's tanh loop called from the kernel may raise the CPU's invalid flag (NaN inputs);
    # numpy clears the flags before its own loops, so a later plain operation warns nothing
    np.add(np.ones(3, np.float32), 1)


# ----------------------------------------------------------------------------- the phase step's promises

def test_phase_progress_counts_the_slowest_runs_steps(accelerated):
    class Count:
        total = 0

        def update(self, k: int = 1) -> None:
            self.total += k

    count = Count()
    batch = train_to_convergence(50, [scales(g, gp, 50) for g, gp in POINTS], [0, 1, 2], progress=count)
    assert count.total == max(r.steps for r in batch.runs)


def test_ctrl_c_stops_the_compiled_phase_runs_and_marks_the_batch_interrupted(accelerated):
    import _thread
    import threading
    import time

    m = 2000  # never reaches tol = 0 within the budget: only Ctrl-C can end it early
    points = [scales(g, gp, m) for g, gp in POINTS[:2]]
    assert find("phase step", TwoLayer, two_layer(), 3) is not None
    # compile first (seconds on a loaded machine), so that the interrupt lands in the training loop
    train_to_convergence(m, points, [0, 1], tol=0.0, max_steps=2)
    # Python's own Ctrl-C handler, as in a terminal: a suite started as a background job of a
    # non-interactive shell inherits SIGINT ignored, and interrupt_main then does nothing
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, _thread.interrupt_main)
    start = time.perf_counter()
    timer.start()
    try:
        batch = train_to_convergence(m, points, [0, 1], tol=0.0, max_steps=1_000_000)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert batch.interrupted and time.perf_counter() - start < 30
    assert all(r.status == "interrupted" for r in batch.runs)
