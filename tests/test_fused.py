"""The fused Adam/AdamW step (condlab._accel._fused) equals the plain tensor step it replaces."""

import pytest
import torch

from condlab._accel._fused import FusedAdam, _segments
from condlab.training._optim import Hyper, get_optimizer

needs_kernel = pytest.mark.skipif(not hasattr(torch, "_fused_adam_"), reason="torch without fused Adam")


def test_segments_group_equal_neighbours():
    lr = torch.tensor([1.0, 1.0, 2.0, 2.0, 1.0, 3.0])
    wd = torch.tensor([0.0, 0.0, 0.0, 0.5, 0.0, 0.0])
    assert _segments(lr, wd, 6) == {(1.0, 0.0): [(0, 2), (4, 5)], (2.0, 0.0): [(2, 3)],
                                    (2.0, 0.5): [(3, 4)], (3.0, 0.0): [(5, 6)]}
    assert _segments(torch.tensor(0.5), None, 4) == {(0.5, 0.0): [(0, 4)]}


def _run(name: str, fused: bool, lr, wd, steps: int = 30) -> tuple[torch.Tensor, object]:
    gen = torch.Generator().manual_seed(0)
    params = torch.randn(64, generator=gen, dtype=torch.float64)
    opt = get_optimizer(name)(params, Hyper(lr=lr, weight_decay=wd, eps=1e-8))
    if not fused:
        opt._fused = None
    for k in range(steps):
        grad = torch.sin(params * (k + 1)) + 0.1 * params  # a gradient that depends on params
        opt.step(grad)
        if k == 10:
            opt.stop(torch.arange(64) < 8)  # freeze the first "run" half way, as divergence does
    return params, opt


@needs_kernel
@pytest.mark.parametrize("name", ["adam", "adamw"])
@pytest.mark.parametrize("shared", [True, False])
def test_fused_step_equals_plain_step(name, shared):
    # the claim: the fused kernel computes PyTorch's Adam/AdamW update; tolerance 1e-12 of
    # the parameters' scale after 30 steps in float64 (rounding only)
    if shared:
        lr, wd = torch.tensor(1e-2, dtype=torch.float64), torch.tensor(0.1, dtype=torch.float64)
    else:  # per-element hyper-parameters in runs of 16, as BatchedNet.per_run lays them out
        lr = torch.tensor([1e-2, 2e-2, 1e-2, 5e-3], dtype=torch.float64).repeat_interleave(16)
        wd = torch.tensor([0.0, 0.1, 0.1, 0.3], dtype=torch.float64).repeat_interleave(16)
    fused, opt = _run(name, True, lr, wd)
    assert opt._fused is not None  # the fast path really ran
    plain, _ = _run(name, False, lr, wd)
    assert torch.allclose(fused, plain, rtol=0, atol=1e-12 * plain.abs().max().item())
    start = torch.randn(64, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert (fused - start).abs().max() > 1e-3      # the steps moved the parameters
    frozen, _ = _run(name, True, lr, wd, steps=11)  # params right after the stop
    assert torch.equal(fused[:8], frozen[:8])       # stopped elements never move again


def test_plan_falls_back_without_kernel(monkeypatch):
    monkeypatch.delattr(torch, "_fused_adam_", raising=False)
    params = torch.zeros(4)
    assert FusedAdam.plan(params, params.clone(), params.clone(), torch.tensor(1e-3), None,
                          decoupled=False, betas=(0.9, 0.999), eps=1e-8) is None


@needs_kernel
def test_small_buffer_steps_on_one_thread_and_restores_the_thread_count(monkeypatch):
    # claim: below SERIAL_MAX elements the kernel runs with torch at one thread (no OpenMP region
    # whose workers would spin afterwards), the same numbers, and torch's thread count is restored
    import condlab._accel._fused as fused

    seen = []
    real = fused.FusedAdam._step
    monkeypatch.setattr(fused.FusedAdam, "_step", lambda self, *a: seen.append(torch.get_num_threads())
                        or real(self, *a))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        params, _ = _run("adam", True, torch.tensor(1e-2, dtype=torch.float64), None, steps=3)
        assert seen == [1, 1, 1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    reference, _ = _run("adam", True, torch.tensor(1e-2, dtype=torch.float64), None, steps=3)
    assert torch.equal(params, reference)


@pytest.mark.parametrize("name", ["adam", "adamw", "gd", "sgd"])
def test_large_buffer_split_over_threads_changes_no_bit(monkeypatch, name):
    # claim: above SERIAL_MAX the step is cut into one range per thread, each stepped on
    # condlab's pool with torch at one thread; the update is elementwise, so 1 and 2 threads
    # give the same bits, per-run segments (several lr values) and weight decay included
    import condlab._accel._fused as fused

    seen = []
    real = fused.torch_in_ranges
    monkeypatch.setattr(fused, "SERIAL_MAX", 1000)
    monkeypatch.setattr("condlab.training._optim.SERIAL_MAX", 1000)
    monkeypatch.setattr(fused, "torch_in_ranges", lambda fn, size, split: seen.append(split) or
                        real(fn, size, split))

    def run(threads: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(1)
        params = torch.randn(5000, generator=gen, dtype=torch.float64)
        lr = torch.full_like(params, 1e-2)
        lr[1700:3100] = 3e-3   # a second segment that straddles the middle of the buffer
        opt = get_optimizer(name)(params, Hyper(lr=lr, weight_decay=torch.tensor(0.1, dtype=torch.float64),
                                                momentum=torch.tensor(0.9, dtype=torch.float64)))
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            for k in range(5):
                opt.step(torch.cos(params * (k + 1)))
            assert torch.get_num_threads() == threads
        finally:
            torch.set_num_threads(before)
        return params

    assert torch.equal(run(2), run(1))
    if name.startswith("adam"):
        assert seen and all(split == 1000 for split in seen)
