"""The phase trainer's compiled ReLU step (condlab._accel._relu_fused) against the torch reference loop.

Claim (stated before looking): on tiny float64 runs the compiled step takes exactly the reference's
steps, stops for the same reason, and gives RD(theta_w), RD(theta_a), t, the loss curve and the final
neurons equal to relative 1e-8 (the two sum in different orders, so only rounding may differ, and
it grows at most a few orders over a few thousand steps). Pre-registered runs: the points and seeds
below, fixed before the first comparison.
"""

from __future__ import annotations

import numpy as np
import pytest

from condlab.phase import _train, scales, train_to_convergence
from condlab.phase._diagram import HARDER_X, HARDER_Y

pytest.importorskip("numba")

REL = 1e-8
POINTS = [(0.5, 0.5), (0.25, 1.5), (0.75, -0.5), (1.75, 0.0), (2.25, 0.5), (2.0, -0.5)]


def _both(m: int, pts, seeds, **kw):
    fast = train_to_convergence(m, [scales(g, gp, m) for g, gp in pts], seeds, **kw)
    fused, _train._fused = _train._fused, lambda: None
    try:
        ref = train_to_convergence(m, [scales(g, gp, m) for g, gp in pts], seeds, **kw)
    finally:
        _train._fused = fused
    return fast.runs, ref.runs


def _assert_same(fast, ref) -> None:
    assert len(fast) == len(ref)
    for a, b in zip(fast, ref, strict=True):
        assert (a.steps, a.converged, a.status) == (b.steps, b.converged, b.status)
        assert a.rd_w == pytest.approx(b.rd_w, rel=REL) and a.rd_a == pytest.approx(b.rd_a, rel=REL)
        assert a.time == pytest.approx(b.time, rel=REL) and a.loss == pytest.approx(b.loss, rel=REL)
        np.testing.assert_allclose(a.curve["loss"], b.curve["loss"], rtol=REL)
        np.testing.assert_allclose(a.curve["time"], b.curve["time"], rtol=REL)
        for key in ("a", "w", "b"):  # a weight that cancels to ~0 has only an absolute error
            scale = np.abs(b.neurons[key]).max()
            np.testing.assert_allclose(a.neurons[key], b.neurons[key], rtol=REL, atol=REL * scale)


def test_compiled_step_is_used_for_relu():
    assert _train._fused() is not None


@pytest.mark.parametrize("m", [40, 300])
def test_compiled_step_equals_reference_on_the_authors_target(m):
    fast, ref = _both(m, POINTS, [0, 1, 2, 0, 1, 2])
    assert sum(r.converged for r in ref) >= 4  # the comparison covers converged runs
    _assert_same(fast, ref)


def test_compiled_step_equals_reference_on_the_harder_target_at_the_budget():
    # 4 points (another generated kernel); most runs stop at the budget, some halve c on the way
    fast, ref = _both(60, POINTS[:4], [3, 4, 5, 6], x=HARDER_X, y=HARDER_Y, max_steps=1500)
    assert any(not r.converged for r in ref)
    _assert_same(fast, ref)


def test_compiled_step_equals_reference_without_asi_and_with_a_large_c():
    # c = 8 overshoots: the loss rises and c is halved several times
    fast, ref = _both(80, POINTS[:3], [0, 1, 2], asi=False, c=8.0, max_steps=3000)
    assert any((np.diff(r.curve["loss"]) > 0).any() for r in ref)
    _assert_same(fast, ref)


def test_more_points_than_the_kernel_takes_fall_back_to_the_reference():
    from condlab._accel import _relu_fused

    with pytest.raises(ValueError, match="1 to 6"):
        _relu_fused.kernels(_relu_fused.MAX_POINTS + 1)
    x = tuple(np.linspace(-0.8, 0.8, 7))
    run = train_to_convergence(20, [scales(0.5, 0.5, 20)], [0], x=x, y=tuple(v * v for v in x),
                               max_steps=3).runs[0]
    assert run.steps == 3 and np.isfinite(run.rd_w)


def test_progress_counts_the_slowest_runs_steps():
    class Count:
        total = 0

        def update(self, k: int = 1) -> None:
            self.total += k

    count = Count()
    batch = train_to_convergence(50, [scales(g, gp, 50) for g, gp in POINTS[:3]], [0, 1, 2],
                                 progress=count)
    assert count.total == max(r.steps for r in batch.runs)


def test_ctrl_c_stops_the_compiled_runs_and_marks_the_batch_interrupted():
    import _thread
    import threading
    import time

    m = 2000  # never reaches tol = 0 within the budget: only Ctrl-C can end it early
    points = [scales(g, gp, m) for g, gp in POINTS[:2]]
    # compile first (seconds on a loaded machine), so that the interrupt lands in the training loop
    train_to_convergence(m, points, [0, 1], tol=0.0, max_steps=2)
    timer = threading.Timer(1.0, _thread.interrupt_main)
    start = time.perf_counter()
    timer.start()
    try:
        batch = train_to_convergence(m, points, [0, 1], tol=0.0, max_steps=1_000_000)
    finally:
        timer.cancel()
    assert batch.interrupted and time.perf_counter() - start < 30
    assert all(r.status == "interrupted" for r in batch.runs)
