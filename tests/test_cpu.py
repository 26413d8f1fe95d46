"""The CPU fast paths of the hot loop (condlab._accel._cpu): numpy's tanh and BLAS on torch's memory.

Claims, stated before looking: on a fixed grid (tiny 1e-30..1e-3, moderate, saturated up to
|x| = 50, signed zeros, subnormals, inf, NaN), the fast tanh is within 1.5 ulp of the
correctly rounded tanh in float32 (reference: float64 tanh) and in float64 (reference:
mpmath at 40 digits), within 2 ulp of torch.tanh, exact on 0, ±inf, NaN, subnormals; strided
views are read and written in place; splitting over threads changes no bit; other dtypes
and devices fall back to torch.tanh. Batched products equal torch.bmm within rounding
(1e-6 f32, 1e-15 f64 of O(1) values), write strided outputs in place, change no bit when
split over threads, stay silent on overflow, and leave layouts and sizes numpy would do
badly to torch.bmm.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch

from condlab._accel import _cpu
from condlab._accel._cpu import as_numpy, bmm_into, numpy_bmm, tanh_into, tanh_slope_into

DTYPES = [torch.float32, torch.float64]


def _grid() -> np.ndarray:
    """A fixed grid of |x|: log-spaced tiny and moderate values, a linear range, saturation."""
    mag = np.concatenate([np.logspace(-30, -3, 400), np.logspace(-3, 0.5, 800), np.linspace(0, 20, 801),
                          np.linspace(20, 50, 61)])
    return np.concatenate([mag, -mag])


def _ulps(approx: np.ndarray, x: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """|approx - tanh(x)| in units of the spacing of `dtype` at tanh(x)."""
    if dtype == torch.float32:
        ref = np.tanh(x.astype(np.float64))
        return np.abs(approx.astype(np.float64) - ref) / np.spacing(np.abs(ref).astype(np.float32))
    mpmath.mp.dps = 40
    exact = [mpmath.tanh(mpmath.mpf(float(v))) for v in x]
    spacing = np.spacing(np.abs(np.array([float(e) for e in exact])))
    errors = [float(abs(mpmath.mpf(float(a)) - e)) for a, e in zip(approx, exact, strict=True)]
    return np.array(errors) / spacing


@pytest.mark.parametrize("dtype", DTYPES)
def test_fast_tanh_is_within_stated_ulps_of_exact_and_of_torch(dtype):
    x = torch.from_numpy(_grid()).to(dtype)
    x = x[:: 2 if dtype == torch.float64 else 1]  # mpmath is slow: half the grid in float64
    out = torch.empty_like(x)
    tanh_into(x, out)
    assert _ulps(out.numpy(), x.numpy(), dtype).max() <= 1.5
    spacing = np.spacing(np.abs(torch.tanh(x).numpy()))
    assert (np.abs(out.numpy() - torch.tanh(x).numpy()) / spacing).max() <= 2.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_fast_tanh_special_values_are_exact(dtype):
    tiny = torch.finfo(dtype).tiny
    x = torch.tensor([0.0, -0.0, tiny / 4, -tiny / 4, tiny, float("inf"), -float("inf"), float("nan")],
                     dtype=dtype)
    out = torch.empty_like(x)
    tanh_into(x, out)
    torch.testing.assert_close(out, torch.tanh(x), rtol=0, atol=0, equal_nan=True)
    assert torch.equal(torch.signbit(out[:5]), torch.signbit(x[:5]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_fast_tanh_reads_and_writes_strided_views(dtype):
    base = torch.linspace(-5, 5, 6 * 7 * 8, dtype=dtype).reshape(6, 7, 8)
    t = base.transpose(0, 2)[:, ::2]                     # non-contiguous input
    holder = torch.full((8, 4, 6, 3), float("nan"), dtype=dtype)
    out = holder[..., 1]                                 # non-contiguous output
    tanh_into(t, out)
    torch.testing.assert_close(out, torch.tanh(t), rtol=2e-7 if dtype == torch.float32 else 1e-15, atol=0)
    assert holder[..., 0].isnan().all() and holder[..., 2].isnan().all()  # nothing else touched


@pytest.mark.parametrize("dtype", DTYPES)
def test_splitting_over_threads_changes_no_bit(dtype, monkeypatch):
    x = torch.randn(3, 100_000, generator=torch.Generator().manual_seed(0), dtype=dtype) * 3
    one, two = torch.empty_like(x), torch.empty_like(x)
    tanh_into(x, one)  # one element range on the calling thread (set below PARALLEL_MIN apart)
    monkeypatch.setattr(_cpu, "PARALLEL_MIN", 1000)
    threads = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        tanh_into(x, two)
        tanh_into(x.T, two.T)  # the strided split, along the longest axis
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, two)


def test_other_dtypes_and_autograd_tensors_fall_back_to_torch():
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.linspace(-3, 3, 50, dtype=dtype)
        assert as_numpy(x) is None
        out = torch.empty_like(x)
        tanh_into(x, out)
        assert torch.equal(out, torch.tanh(x))
    leaf = torch.ones(3, requires_grad=True)
    assert as_numpy(leaf) is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_tensors_fall_back_to_torch():
    x = torch.linspace(-3, 3, 50, device="cuda")
    assert as_numpy(x) is None
    out = torch.empty_like(x)
    tanh_into(x, out)
    assert torch.equal(out, torch.tanh(x))


# ----------------------------------------------------------------------------- batched products

def _stacks(dtype: torch.dtype):
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(5, 7, 3, generator=gen, dtype=torch.float64).to(dtype)
    b = torch.randn(5, 4, 7, generator=gen, dtype=torch.float64).to(dtype).transpose(1, 2)  # (5, 7, 4)
    return a.transpose(1, 2), b   # (5, 3, 7) @ (5, 7, 4): both operands transposed views


@pytest.mark.parametrize("dtype", DTYPES)
def test_bmm_into_equals_torch_bmm_within_rounding(dtype):
    a, b = _stacks(dtype)
    holder = torch.full((5, 3, 6), float("nan"), dtype=dtype)
    out = holder[:, :, 1:5]                              # a strided output, as the trainer's grad slices
    assert numpy_bmm(a, b, out)                          # the fast path really ran
    tol = 1e-6 if dtype == torch.float32 else 1e-15
    torch.testing.assert_close(out, torch.bmm(a, b), rtol=tol, atol=tol)
    assert holder[:, :, 0].isnan().all() and holder[:, :, 5].isnan().all()


def test_bmm_into_split_over_threads_changes_no_bit(monkeypatch):
    a, b = _stacks(torch.float64)
    one, two = torch.empty(5, 3, 4, dtype=torch.float64), torch.empty(5, 3, 4, dtype=torch.float64)
    bmm_into(a, b, one)
    monkeypatch.setattr(_cpu, "PARALLEL_MIN_FLOPS", 1)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        bmm_into(a, b, two)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, two)


def test_bmm_into_leaves_what_numpy_cannot_do_well_to_torch():
    a, b = _stacks(torch.float64)
    out = torch.empty(5, 3, 4, dtype=torch.float64)
    assert not numpy_bmm(a[:, :, ::2], b[:, ::2, :], out)                 # no unit stride: numpy's slow loop
    assert not numpy_bmm(a.float(), b.float(), out.to(torch.bfloat16))   # dtypes numpy cannot view
    wide = torch.zeros(1, 64, 2048)   # a product above OpenBLAS's one-thread size with a wide output
    assert not numpy_bmm(wide, torch.zeros(1, 2048, 2048), torch.empty(1, 64, 2048))
    bmm_into(a[:, :, ::2], b[:, ::2, :], out)
    torch.testing.assert_close(out, torch.bmm(a[:, :, ::2], b[:, ::2, :]), rtol=0, atol=0)


@pytest.mark.parametrize("threads", [1, 3])
def test_large_products_in_row_blocks_equal_torch_bmm(threads, monkeypatch):
    # the wide layer's weight gradient g^T x: (m x n) @ (n x d+1), cut into row blocks
    gen = torch.Generator().manual_seed(2)
    g = torch.randn(2, 80, 30_001, generator=gen, dtype=torch.float64)
    x = torch.randn(2, 80, 6, generator=gen, dtype=torch.float64)
    out = torch.empty(2, 30_001, 6, dtype=torch.float64)
    monkeypatch.setattr(_cpu, "BLAS_SINGLE_MAX", 6 * 80 * 1000)   # blocks of 1000 rows, one ragged
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert numpy_bmm(g.transpose(1, 2), x, out)
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(out, torch.bmm(g.transpose(1, 2), x), rtol=1e-13, atol=1e-13)


def test_bmm_into_is_silent_on_overflow():
    # a diverging run overflows its products; the trainer detects it by the loss, not a warning
    a = torch.full((2, 3, 3), 1e300, dtype=torch.float64)
    out = torch.empty_like(a)
    bmm_into(a, a, out)   # pytest turns any RuntimeWarning into an error
    assert torch.isinf(out).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_tanh_slope_equals_tanh_and_one_minus_its_square(dtype, monkeypatch):
    t = torch.linspace(-20, 20, 3 * 4001, dtype=dtype).reshape(3, 4001)
    value, slope = torch.empty_like(t), torch.empty_like(t)
    assert tanh_slope_into(t, value, slope)
    reference = torch.empty_like(t)
    tanh_into(t, reference)
    assert torch.equal(value, reference)
    assert torch.equal(slope, 1 - reference * reference)   # the same formula, so exactly
    monkeypatch.setattr(_cpu, "PARALLEL_MIN", 100)
    threads = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        split_value, split_slope = torch.empty_like(t), torch.empty_like(t)
        assert tanh_slope_into(t, split_value, split_slope)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(split_value, value) and torch.equal(split_slope, slope)
    assert not tanh_slope_into(t, value, slope.to(torch.bfloat16))   # mixed dtypes: torch's job


# ----------------------------------------------------------------------------- the numpy one-layer step

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,d_out,output_bias,act", [(30, 1, True, "tanh"), (3, 1, True, "tanh"),
                                                      (30, 2, False, "xtanh"), (12, 1, False, "sigmoid")])
def test_numpy_one_layer_step_equals_the_architectures_pass(dtype, n, d_out, output_bias, act):
    # claim: same loss and gradient as Architecture.batched_forward/backward, to rounding
    # (1e-12 relative in float64, 1e-5 in float32, of each quantity's largest magnitude)
    import condlab
    from condlab.training._models import Architecture, BatchedNet, augment, init_weights

    cfg = condlab.ModelConfig(width=16, depth=1, activations=[act], d_out=d_out, output_bias=output_bias)
    arch = Architecture.from_config(cfg, d=3)
    gen = torch.Generator().manual_seed(5)
    x = torch.rand(n, 3, generator=gen, dtype=torch.float64).to(dtype) * 4 - 2
    y = torch.sin(x).sum(1, keepdim=True).repeat(1, d_out)
    nets = [BatchedNet(arch, 4, dtype, torch.device("cpu")) for _ in range(2)]
    for net in nets:
        for r in range(4):
            net.load(r, init_weights(arch, r, 0.5))
    xb, yb = augment(x).expand(4, -1, -1).contiguous(), y.expand(4, -1, -1).contiguous()
    fast = nets[0].loss_and_grad(xb, yb)
    assert nets[0]._step[2] is not None                  # the numpy step ran
    slow = nets[1]
    slow._step = (xb, yb, None)                          # the architecture's pass
    reference = slow.loss_and_grad(xb, yb)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(fast, reference, rtol=0, atol=tol * reference.abs().max().item())
    scale = slow.grad.abs().max().item()
    torch.testing.assert_close(nets[0].grad, slow.grad, rtol=0, atol=tol * scale)


def test_numpy_step_is_not_used_where_it_does_not_apply():
    import condlab
    from condlab.training._models import Architecture, BatchedNet, augment

    deep = Architecture.from_config(condlab.ModelConfig(width=8, depth=2), d=3)
    wide = Architecture.from_config(condlab.ModelConfig(width=20_000, depth=1), d=3)
    for arch, n in ((deep, 10), (wide, 40)):
        net = BatchedNet(arch, 2, torch.float64, torch.device("cpu"))
        xb = augment(torch.zeros(n, 3, dtype=torch.float64)).expand(2, -1, -1).contiguous()
        net.loss_and_grad(xb, torch.zeros(2, n, 1, dtype=torch.float64))
        assert net._step[2] is None


def test_numpy_one_layer_step_split_over_threads_changes_no_bit(monkeypatch):
    import condlab
    from condlab.training._models import Architecture, BatchedNet, augment, init_weights

    arch = Architecture.from_config(condlab.ModelConfig(width=16, depth=1), d=3)
    x = torch.linspace(-2, 2, 60, dtype=torch.float64).reshape(20, 3)
    xb, yb = augment(x).expand(4, -1, -1).contiguous(), torch.sin(x[:, :1]).expand(4, -1, -1).contiguous()
    grads = []
    from condlab._accel import _cpu_step

    for threads, parallel_min in ((1, _cpu_step.STEP_PARALLEL_MIN), (3, 1)):
        monkeypatch.setattr(_cpu_step, "STEP_PARALLEL_MIN", parallel_min)   # the whole step, by runs
        net = BatchedNet(arch, 4, torch.float64, torch.device("cpu"))
        for r in range(4):
            net.load(r, init_weights(arch, r, 0.5))
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            net.loss_and_grad(xb, yb)
        finally:
            torch.set_num_threads(before)
        assert net._step[2] is not None
        grads.append(net.grad.clone())
    assert torch.equal(grads[0], grads[1])
