"""The blocked step of a wide layer (condlab._accel._wide_step) against the architecture's own pass."""

import numpy as np
import pytest
import torch

from condlab._accel._wide_step import WideStep, block_width
from condlab.activations._activations import get_activation
from condlab.training._arch import get_architecture
from condlab.training._dropout import Dropout
from condlab.training._models import BatchedNet, augment, init_weights
from condlab.training._optim import Hyper, get_optimizer

D = 3


def make(width: int, n: int, dtype=torch.float64, runs: int = 1, bias: bool = True, d_out: int = 1,
         act: str = "tanh", std: float = 0.5):
    """A net of `runs` runs on shared data (x as a broadcast view, like the trainer's)."""
    arch = get_architecture("fc")(D, width, 1, d_out, (get_activation(act),), bias)
    net = BatchedNet(arch, runs, dtype, torch.device("cpu"))
    for r in range(runs):
        net.load(r, init_weights(arch, r, std))
    gen = torch.Generator().manual_seed(n)
    x = torch.rand(n, D, generator=gen, dtype=torch.float64) * 4 - 2
    y = torch.sin(x[:, :d_out] * 2)
    xb = augment(x).to(dtype)[None].expand(runs, n, D + 1)
    return net, xb, y.to(dtype)[None].expand(runs, n, d_out).contiguous()


def reference(net: BatchedNet, x_aug: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Loss and gradient from the architecture's forward and backward pass (what the step replaces)."""
    work = net._workspace(x_aug.shape[1], x_aug)
    f, inputs = net.arch.batched_forward(net.weights, x_aug, work)
    residual = f - y
    loss = residual.square().sum(dim=(1, 2)) / (2 * x_aug.shape[1])
    saved = net.grad.clone()
    net.arch.batched_backward(net.weights, net.grads, residual.div_(x_aug.shape[1]), inputs, work)
    grad = net.grad.clone()
    net.grad.copy_(saved)
    return loss, grad


# widths around the block width (n = 40, float64: 512 neurons per block), one not a multiple of it
CASES = [(3000, 40, 1, True), (2001, 40, 2, False), (20000, 80, 1, True), (777, 400, 3, True),
         (100000, 4, 1, True)]


@pytest.mark.parametrize("width,n,runs,bias", CASES)
def test_the_blocked_step_agrees_with_the_architecture_pass_in_float64(width, n, runs, bias):
    """Claim: same loss and gradient up to summation order; tolerance 1e-12 relative (to each
    layer's largest gradient entry), stated before the first run."""
    net, x, y = make(width, n, runs=runs, bias=bias)
    assert WideStep.applies(net, x, y)
    loss_ref, grad_ref = reference(net, x, y)
    loss = net.loss_and_grad(x, y)
    assert net._wide[2] is not None   # the blocked step ran
    np.testing.assert_allclose(loss, loss_ref, rtol=1e-12)
    for view, ref in zip(net.grads, net.views(grad_ref), strict=True):
        scale = ref.abs().amax(dim=(1, 2), keepdim=True)
        assert ((view - ref).abs() / scale).max() < 1e-12


def test_float32_agrees_within_float32_rounding():
    net, x, y = make(20000, 80, dtype=torch.float32)
    loss_ref, grad_ref = reference(net, x, y)
    loss = net.loss_and_grad(x, y)
    assert net._wide[2] is not None
    np.testing.assert_allclose(loss, loss_ref, rtol=1e-5)
    for view, ref in zip(net.grads, net.views(grad_ref), strict=True):
        assert ((view - ref).abs() / ref.abs().max()).max() < 1e-5


def test_results_do_not_depend_on_the_thread_count():
    threads = torch.get_num_threads()
    out = {}
    try:
        for t in (1, 2):
            torch.set_num_threads(t)
            net, x, y = make(30000, 64, dtype=torch.float32, runs=2)
            out[t] = net.loss_and_grad(x, y), net.grad.clone()
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(out[1][0], out[2][0]) and torch.equal(out[1][1], out[2][1])


def _other(case: str):
    if case == "depth 2":
        arch = get_architecture("fc")(D, 3000, 2, 1, (get_activation("tanh"),) * 2, True)
        net = BatchedNet(arch, 1, torch.float64, torch.device("cpu"))
        return net, make(3000, 40)[1], make(3000, 40)[2]
    if case == "float16 data":
        net, x, y = make(20000, 40)
        return net, x.half(), y.half()
    kwargs = {"small": dict(width=50, n=40), "two outputs": dict(width=20000, n=40, d_out=2),
              "relu": dict(width=20000, n=40, act="relu"), "sigmoid": dict(width=20000, n=40, act="sigmoid")}
    return make(**kwargs[case])


@pytest.mark.parametrize("case", ["small", "two outputs", "relu", "sigmoid", "depth 2", "float16 data"])
def test_it_steps_aside_where_it_does_not_apply(case):
    assert not WideStep.applies(*_other(case))


def test_dropout_takes_the_architecture_pass_with_its_masks():
    net, x, y = make(3000, 40)
    drop = Dropout([0.5], [0], torch.float64, torch.device("cpu"))
    loss = net.loss_and_grad(x, y, drop)
    again = Dropout([0.5], [0], torch.float64, torch.device("cpu"))
    loss_ref = net.loss(x, y)   # no dropout: differs
    work = net._workspace(40, x)
    f, _ = net.arch.batched_forward(net.weights, x, work, again)
    assert torch.equal(loss, (f - y).square().sum(dim=(1, 2)) / 80)
    assert not torch.equal(loss, loss_ref)


def test_block_width_keeps_the_product_on_one_blas_thread():
    assert block_width(80, 6, 4) == 512 and block_width(80, 6, 8) == 256
    assert block_width(10**6, 6, 4) == 0
    for n, cols in [(16, 2), (80, 6), (500, 11)]:
        assert block_width(n, cols, 8) * n * cols <= 1 << 18


def test_training_resumes_bit_for_bit():
    """Ten Adam steps in one go equal five, a copy of the state, and five more."""
    def steps(net, opt, x, y, k):
        for _ in range(k):
            net.loss_and_grad(x, y)
            opt.step(net.grad)

    net, x, y = make(3000, 40, dtype=torch.float32)
    hyper = Hyper(lr=torch.tensor(1e-3))
    opt = get_optimizer("adam")(net.flat, hyper)
    steps(net, opt, x, y, 5)
    net2, _, _ = make(3000, 40, dtype=torch.float32)
    net2.flat.copy_(net.flat)
    opt2 = get_optimizer("adam")(net2.flat, hyper)
    opt2.load_state_dict(opt.state_dict())
    steps(net, opt, x, y, 5)
    steps(net2, opt2, x, y, 5)
    assert torch.equal(net.flat, net2.flat)


WIDE = {"data": {"n": 20, "d": 2}, "model": {"width": 5000, "init_std": [0.01], "activations": ["tanh"]},
        "train": {"optimizer": "adam", "lr": [1e-3], "epochs": 40, "snapshots": "every:10",
                  "dtype": "float32", "checkpoint_seconds": 1e-9}}


def test_a_wide_training_resumed_from_a_checkpoint_equals_uninterrupted(tmp_path, monkeypatch):
    """The trainer's own checkpoint, written after 20 of 40 epochs and resumed: bit for bit."""
    import condlab
    from condlab.training._checkpoint import write_checkpoint

    calls = []
    original = WideStep.loss_and_grad
    monkeypatch.setattr(WideStep, "loss_and_grad", lambda self: calls.append(1) or original(self))
    full = condlab.train(WIDE, progress=False)
    assert len(calls) >= 40   # the blocked step trained it
    kept = []

    def keep_one(path, config, params, optimizer, dropout, state, *args):
        if state.epoch == 20:
            write_checkpoint(path, config, params, optimizer, dropout, state, *args)
            kept.append(path.read_bytes())

    monkeypatch.setattr("condlab.training._api.write_checkpoint", keep_one)
    condlab.train(WIDE, out=tmp_path / "a", progress=False)
    monkeypatch.undo()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "checkpoint.pt").write_bytes(kept[0])
    resumed = condlab.resume(tmp_path / "b", progress=False)
    for a, b in zip(full, resumed, strict=True):
        np.testing.assert_array_equal(a.loss, b.loss)
        assert all(np.array_equal(a.weights[k], b.weights[k]) for k in a.weights)


def test_the_blocked_step_allocates_no_architecture_workspace():
    """Its one (R, n, m) buffer replaces the architecture's five (z, h, slope, two for dR/dh)."""
    net, x, y = make(20000, 80, dtype=torch.float32)
    net.loss_and_grad(x, y)
    assert net._wide[2] is not None and net._buffers == {}
    assert net._wide[2].h.size == 20000 * 80


@pytest.mark.parametrize("threads", [1, 2])
def test_a_diverged_run_warns_nothing_and_reports_a_non_finite_loss(threads):
    """Overflowing runs are caught by their loss (the trainer freezes them): no numpy warnings,
    also from the pool's threads (pytest turns warnings into errors)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        net, x, y = make(30000, 64, dtype=torch.float32, runs=2, std=1e37)
        loss = net.loss_and_grad(x, y)
    finally:
        torch.set_num_threads(before)
    assert net._wide[2] is not None and not torch.isfinite(loss).any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_numpys_tanh_loop_by_address_gives_the_bits_of_the_per_block_path(dtype, monkeypatch):
    """Pass 1 calls numpy's tanh loop through its address from the compiled kernel; where that loop
    is not found it calls np.tanh per block. Same operations on the same values: same bits."""
    import condlab._accel._wide_step as wide

    if wide._numpy_tanh_loop(torch.empty(0, dtype=dtype).numpy().dtype.char) is None:
        pytest.skip("numpy's tanh loop not found on this numpy: only the per-block path runs")
    out = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(wide, "_numpy_tanh_loop", lambda dtype: None)
            monkeypatch.setattr(wide, "_forward_kernel", wide._forward_kernel.__wrapped__)
        net, x, y = make(20000, 80, dtype=dtype, runs=2)
        loss = net.loss_and_grad(x, y)
        assert net._wide[2].fused_tanh is fused
        out.append((loss, net.grad.clone()))
    assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1])


def test_a_diverged_step_leaves_no_floating_point_flags_for_numpy_to_report():
    """numpy's tanh loop called from the kernel may raise the CPU's invalid flag (NaN inputs);
    numpy clears the flags before its own loops, so a later plain operation warns nothing."""
    net, x, y = make(30000, 64, dtype=torch.float32, std=1e37)
    net.loss_and_grad(x, y)
    np.add(np.ones(3, np.float32), 1)   # pytest turns a RuntimeWarning into an error
