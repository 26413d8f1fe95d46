"""The elementwise kernels chosen by measurement (condlab._accel._kernels): the rule, not the speed.

Claims: the reference (torch's) kernel is kept unless the alternative measures at least
FAST_BAR (1.3) times faster; a choice is made once per kernel and dtype in a process; `forced`
overrides it inside a block; the one-layer step computes tanh with whichever was chosen and
does not split a step over condlab's pool with torch's. The timings themselves are replaced by
stated numbers (no timed unit tests: speed lives in benchmarks/).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import condlab
from condlab._accel import _cpu_step, _kernels


@pytest.fixture
def fresh(monkeypatch):
    """No choice made yet in this process; the calibration answers `times` (ns per element)."""
    monkeypatch.delenv("CONDLAB_TANH", raising=False)
    monkeypatch.setattr(_kernels, "_chosen", {})
    monkeypatch.setattr(_kernels, "_measured", {})
    times = {"reference": 1.0, "fast": 1.0, "calls": 0}

    def calibrate(kernel, dtype):
        times["calls"] += 1
        return times["reference"], times["fast"]

    monkeypatch.setattr(_kernels, "_calibrate", calibrate)
    return times


@pytest.mark.parametrize("reference,fast,chosen", [(1.0, 1.0, "reference"), (1.29, 1.0, "reference"),
                                                   (1.3, 1.0, "fast"), (15.9, 3.7, "fast"),
                                                   (2.6, 3.7, "reference")])
def test_the_reference_kernel_wins_unless_the_fast_one_is_1_3_times_faster(fresh, reference, fast, chosen):
    fresh.update(reference=reference, fast=fast)
    a = np.zeros((2, 3))
    assert _kernels.choose(_kernels.TANH, a.dtype) == chosen
    assert _kernels.choices()["tanh float64"].startswith(chosen)


def test_a_choice_is_made_once_per_dtype_and_forced_overrides_it(fresh):
    fresh.update(reference=5.0, fast=1.0)
    a64, a32 = np.zeros(4), np.zeros(4, dtype=np.float32)
    assert _kernels.choose(_kernels.TANH, a64.dtype) == "fast"
    fresh.update(reference=1.0)   # a later, different measurement is not taken
    assert _kernels.choose(_kernels.TANH, a64.dtype) == "fast" and fresh["calls"] == 1
    assert _kernels.choose(_kernels.TANH, a32.dtype) == "reference" and fresh["calls"] == 2
    with _kernels.forced("tanh", "reference"):
        assert _kernels.choose(_kernels.TANH, a64.dtype) == "reference"
    assert _kernels.choose(_kernels.TANH, a64.dtype) == "fast"
    with pytest.raises(ValueError, match="kernel"):
        with _kernels.forced("tanh", "numpy"):
            pass


def test_both_tanh_kernels_leave_the_source_and_agree_within_rounding():
    source = np.linspace(-40, 40, 1001)
    ref, fast = np.empty_like(source), np.empty_like(source)
    _kernels.TANH.reference(source, ref)
    _kernels.TANH.fast(source, fast)
    assert source[0] == -40 and ref[-1] == fast[-1] == 1.0   # tanh(40) = 1: the step's row of ones
    np.testing.assert_allclose(ref, fast, rtol=4e-16, atol=0)


def _train_at_two_threads(which: str, monkeypatch) -> tuple[list, set, int]:
    """A small Fig. 3 batch (4 runs of 10 x 8) trained at 2 torch threads with the tanh kernel
    `which` counted: (the shapes it was called on, the torch thread counts it ran with, the
    caller's count after training)."""
    calls, torch_threads = [], set()

    def kernel(s, o):   # torch's own thread count where the kernel runs (its OpenMP team)
        calls.append(s.shape)
        torch_threads.add(torch.get_num_threads())
        return np.tanh(s, out=o)

    counted = {"reference": _kernels.TANH.reference, "fast": _kernels.TANH.fast, which: kernel}
    tanh = _kernels.Kernel("tanh", counted["reference"], counted["fast"], "numpy")
    monkeypatch.setattr(_kernels, "TANH", tanh)
    cfg = condlab.preset("fig3").with_overrides(["train.epochs=2", "train.seeds=[0,1,2,3]",
                                                  "model.width=8", "data.n=10"])
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        condlab.train(cfg, progress=False)
        return calls, torch_threads, torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("which", ["reference", "fast"])
def test_the_one_layer_step_uses_the_chosen_tanh_and_splits_with_either(fresh, which, monkeypatch,
                                                                       accelerated):
    # claim: split over the pool, each part (4 runs: 2 + 2) calls the chosen kernel with one torch
    # thread (an OpenMP team of its own would spin on the core the other part needs), and the
    # caller gets its thread count back
    fresh.update(reference=1.0 if which == "reference" else 9.0)
    monkeypatch.setattr(_cpu_step, "STEP_PARALLEL_MIN", 1)
    calls, torch_threads, after = _train_at_two_threads(which, monkeypatch)
    assert calls and {shape[0] for shape in calls} == {2}
    assert torch_threads == {1} and after == 2


def test_condlab_tanh_fixes_the_choice_in_every_process(fresh, monkeypatch):
    # a machine where the two measure near the bar may choose differently in two processes
    # (a run resumed elsewhere then differs in the last bits): the variable fixes it
    a = np.zeros(4)
    for value, which in (("torch", "reference"), ("numpy", "fast")):
        monkeypatch.setenv("CONDLAB_TANH", value)
        assert _kernels.choose(_kernels.TANH, a.dtype) == which
    assert fresh["calls"] == 0
    monkeypatch.setenv("CONDLAB_TANH", "fastest")
    with pytest.raises(ValueError, match="CONDLAB_TANH"):
        _kernels.choose(_kernels.TANH, a.dtype)


def test_the_calibration_times_one_torch_thread_on_a_fixed_probe_and_restores_the_count():
    # the same probe and one thread in every process: the choice depends on the machine only
    before = torch.get_num_threads()
    seen = []
    tanh = _kernels.Kernel("tanh", lambda s, o: seen.append((torch.get_num_threads(), s.dtype, s[0], s[-1]))
                           or np.tanh(s, out=o), _kernels.TANH.fast, "numpy")
    reference, fast = _kernels._calibrate(tanh, np.dtype(np.float32))
    assert set(seen) == {(1, np.dtype(np.float32), -4.0, 4.0)} and len(seen) == 1 + _kernels.ROUNDS
    assert torch.get_num_threads() == before and reference > 0 and fast > 0
