"""The numpy one-hidden-layer step (condlab._accel._cpu_step): its tanh slope fold and its split over threads.

Claims, stated before looking (float64):
* the step with tanh folds the slope as colsum(x delta) - (h^2)^T (x delta); it equals the
  plain slope 1 - h^2 (the activation's own pass) within 1e-12 of sum_n |a_j x_nq delta_n|,
  the size both forms' rounding errors scale with, per gradient entry -- with and without
  output bias, with saturated units (|z| up to ~10), with fewer points than inputs and with
  two outputs (where the step keeps the plain slope);
* with dropout it equals the architecture's pass (same masks) within 1e-12 of the largest
  gradient entry; runs with q = 0 take the folded form, so they do not depend on the batch;
* split over threads (by runs) it changes no bit of the loss or the gradient; with dropout
  it is not split.
"""

from __future__ import annotations

import pytest
import torch

import condlab
from condlab._accel import _cpu_step
from condlab.training._dropout import Dropout
from condlab.training._models import Architecture, BatchedNet, augment, init_weights

RUNS = 5


def _setup(n: int, d: int, width: int, d_out: int, bias: bool, init_std: float):
    cfg = condlab.ModelConfig(width=width, depth=1, activations=["tanh"], d_out=d_out, output_bias=bias)
    arch = Architecture.from_config(cfg, d=d)
    gen = torch.Generator().manual_seed(11)
    x = torch.rand(n, d, generator=gen, dtype=torch.float64) * 4 - 2
    y = torch.sin(x).sum(1, keepdim=True).repeat(1, d_out)
    xb, yb = augment(x).expand(RUNS, -1, -1).contiguous(), y.expand(RUNS, -1, -1).contiguous()

    def net() -> BatchedNet:
        made = BatchedNet(arch, RUNS, torch.float64, torch.device("cpu"))
        for r in range(RUNS):
            made.load(r, init_weights(arch, r, init_std * (1 + r)))
        return made
    return net, xb, yb


@pytest.mark.parametrize("n,d,width,d_out,bias,init_std", [
    (30, 3, 16, 1, True, 0.5), (80, 5, 50, 1, True, 1e-3), (40, 3, 12, 1, False, 0.7),
    (25, 4, 20, 1, True, 3.0),      # saturated units: |z| up to ~10, slopes near 0
    (3, 5, 8, 1, True, 0.5),        # fewer points than inputs: no fold
    (30, 3, 16, 2, True, 0.5),      # two outputs: no fold
])
def test_folded_tanh_slope_equals_the_plain_slope(n, d, width, d_out, bias, init_std):
    make, xb, yb = _setup(n, d, width, d_out, bias, init_std)
    fast, plain = make(), make()
    loss = fast.loss_and_grad(xb, yb)
    step = fast._step[2]
    assert step is not None and step.tanh and step.fold == (d_out == 1 and n > d + 1)
    reference_step = _cpu_step.OneLayerStep(plain, xb, yb, plain._workspace(n, xb))
    reference_step.tanh = False            # the activation's own pass: s = 1 - h^2, then s^T (x delta)
    plain._step = (xb, yb, reference_step)
    reference = plain.loss_and_grad(xb, yb)
    assert torch.equal(loss, reference)    # the forward pass is the same calls
    # per entry of the first layer's gradient: sum_n |x_nq| sum_o |delta_no a_oj|
    w, a = plain.weights
    h = torch.tanh(xb @ w.transpose(1, 2))
    f = h @ a[:, :, :width].transpose(1, 2) + (a[:, None, :, width] if bias else 0)
    delta = ((f - yb) / n).abs()                                            # (R, n, d_out)
    bound = ((delta @ a[:, :, :width].abs()).transpose(1, 2) @ xb.abs())    # (R, m, d+1)
    assert (fast.grads[0] - plain.grads[0]).abs().le(1e-12 * bound + 1e-300).all()
    assert torch.equal(fast.grads[1], plain.grads[1])


def test_step_with_dropout_equals_the_architectures_pass():
    make, xb, yb = _setup(30, 3, 16, 1, True, 0.5)
    q, seeds = [0.0, 0.3, 0.0, 0.5, 0.1], list(range(RUNS))
    fast, slow = make(), make()
    fast_loss = fast.loss_and_grad(xb, yb, Dropout(q, seeds, torch.float64, torch.device("cpu")))
    assert fast._step[2] is not None
    slow._step = (xb, yb, None)            # the architecture's pass
    slow_loss = slow.loss_and_grad(xb, yb, Dropout(q, seeds, torch.float64, torch.device("cpu")))
    torch.testing.assert_close(fast_loss, slow_loss, rtol=0, atol=1e-12 * slow_loss.abs().max().item())
    torch.testing.assert_close(fast.grad, slow.grad, rtol=0, atol=1e-12 * slow.grad.abs().max().item())
    # a run without dropout computes exactly what it computes in a batch without dropout
    alone = make()
    alone.loss_and_grad(xb, yb)
    for r in (0, 2):
        assert all(torch.equal(a[r], b[r]) for a, b in zip(fast.grads, alone.grads, strict=True))


@pytest.mark.parametrize("dropout", [False, True])
@pytest.mark.parametrize("d_out", [1, 2])
def test_step_split_over_threads_changes_no_bit(dropout, d_out, monkeypatch):
    make, xb, yb = _setup(30, 3, 16, d_out, True, 0.5)
    results, calls, real = [], [], _cpu_step._cpu.in_parallel
    monkeypatch.setattr(_cpu_step._cpu, "in_parallel", lambda tasks: calls.append(len(tasks)) or real(tasks))
    for threads, parallel_min in ((1, _cpu_step.STEP_PARALLEL_MIN), (3, 1)):
        monkeypatch.setattr(_cpu_step, "STEP_PARALLEL_MIN", parallel_min)
        net = make()
        drop = Dropout([0.2, 0.0, 0.4, 0.0, 0.1], list(range(RUNS)), torch.float64,
                       torch.device("cpu")) if dropout else None
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        calls.clear()
        try:
            loss = net.loss_and_grad(xb, yb, drop)
            assert net._step[2] is not None and net._step[2].most_threads == (1 if threads == 1 else RUNS)
            assert calls == ([3] if threads == 3 and not dropout else [])
        finally:
            torch.set_num_threads(before)
        results.append((loss, net.grad.clone()))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


@pytest.mark.parametrize("shared", [True, False])
def test_step_equals_the_architectures_pass_with_shared_or_per_run_data(shared):
    # per-run data (each run its own x) take one product per run instead of one per block of runs
    make, xb, yb = _setup(30, 3, 16, 1, True, 0.5)
    if not shared:
        xb = xb.clone()
        xb[..., :-1] += torch.arange(RUNS, dtype=torch.float64)[:, None, None] / 10
    fast, slow = make(), make()
    fast_loss = fast.loss_and_grad(xb, yb)
    assert fast._step[2] is not None and (fast._step[2].x_t is not None) == shared
    slow._step = (xb, yb, None)
    slow_loss = slow.loss_and_grad(xb, yb)
    torch.testing.assert_close(fast_loss, slow_loss, rtol=0, atol=1e-12 * slow_loss.abs().max().item())
    torch.testing.assert_close(fast.grad, slow.grad, rtol=0, atol=1e-12 * slow.grad.abs().max().item())


def test_step_needs_the_appended_one():
    make, xb, yb = _setup(30, 3, 16, 1, True, 0.5)
    net, other = make(), make()
    xb = xb.clone()
    xb[..., -1] = 2.0                      # the last input column is not the bias's 1
    loss = net.loss_and_grad(xb, yb)
    assert net._step[2] is None            # the architecture's pass, which computes the same
    other._step = (xb, yb, None)
    assert torch.equal(loss, other.loss_and_grad(xb, yb))
