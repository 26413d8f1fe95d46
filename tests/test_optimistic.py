"""reproduce optimistic: each claim's judge fails on planted numbers that break the claim and holds
on planted numbers that satisfy it (no training: the judges and the claim recording only)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from condlab.reproduce import _optimistic as c
from condlab.reproduce._claims import ExperimentResult
from condlab.reproduce._optimistic_exp import Sweep, _rank_claims, _sample_claims, coarsest_reduction
from condlab.reproduce._optimistic_runs import BOX, D, Fit

NS = [4, 6, 8, 12, 16, 24, 40, 80, 160, 320]
O_F, P, SEEDS = 6, 300, [0, 1, 2]


def _sweep(first_ok: int, train: float = 1e-6) -> Sweep:
    """Every seed recovers (test error 1e-3) from n = first_ok on, 0.5 below; training error `train`."""
    return Sweep({n: [Fit(None, 1e-3 if n >= first_ok else 0.5, train, s) for s in SEEDS] for n in NS})


def _verdicts(small: int, large: int, wide: int, large_train: float = 1e-6) -> dict[str, str]:
    res = ExperimentResult("optimistic", "test", SEEDS)
    arms = {"small": _sweep(small), "large": _sweep(large, large_train), "wide": _sweep(wide)}
    _sample_claims(res, 1, NS, arms, O_F, P, SEEDS)
    return {cl.id.split("/")[-1]: cl.verdict for cl in res.claims}


def test_sample_claims_hold_on_planted_numbers_that_satisfy_them():
    v = _verdicts(small=12, large=80, wide=12)
    assert v == {"small-near-O": "holds", "small-not-below-O": "holds", "small-far-below-P": "holds",
                 "large-needs-more": "holds", "wider-not-worse": "holds"}


def test_sample_claims_fail_on_planted_numbers_that_break_them():
    v = _verdicts(small=4, large=8, wide=40)          # below O_f*; large as good; wide worse
    assert v["small-not-below-O"] == v["large-needs-more"] == v["wider-not-worse"] == "fails"
    v = _verdicts(small=80, large=320, wide=80)       # n* = 80 > 4 O_F = 24 and > P/5 = 60
    assert v["small-near-O"] == v["small-far-below-P"] == "fails"


def test_an_unfitted_large_init_is_inconclusive_not_a_holding_claim():
    assert _verdicts(small=12, large=320, wide=12, large_train=0.05)["large-needs-more"] == "inconclusive"


def test_judges_state_their_thresholds():
    assert c.judge_near_o(4 * O_F, O_F)[0] and not c.judge_near_o(4 * O_F + 1, O_F)[0]
    assert c.judge_width(16, 16)[0] and c.judge_width(16, 24)[0] is False
    assert c.judge_width(math.inf, math.inf)[0] is None
    ok, why = c.judge_effective_rank(6, 0.996, O_F)  # the case: rank fine, output 99.6 % off
    assert ok is False and "does not reproduce" in why
    assert c.judge_effective_rank(12, 1e-3, O_F) == (True, "")
    assert not c.judge_effective_rank(13, 1e-3, O_F)[0]


def _student(rows: np.ndarray, a: np.ndarray) -> torch.nn.Module:
    from condlab import get_activation
    from condlab.training import FCNet, FullyConnected

    m = 50  # the other neurons small (1e-6), as a trained student's leftovers
    rng = np.random.default_rng(1)
    w, out = rng.normal(0, 1e-6, (m, D + 1)), rng.normal(0, 1e-6, (1, m))
    w[: len(rows)], out[0, : len(a)] = rows, a
    arch = FullyConnected(D, m, 1, 1, (get_activation("tanh"),), False)
    return FCNet(arch, [torch.as_tensor(w), torch.as_tensor(out)])


def _effective(net):
    res = ExperimentResult("optimistic", "test", [0])
    x = np.random.default_rng(0).uniform(-BOX, BOX, (300, D))
    _rank_claims(res, 1, O_F, [Fit(net, 1e-3, 1e-3, 0)], x, 24)
    return res.claims[1]


def test_effective_rank_holds_on_a_planted_one_neuron_student():
    u = np.array([0.8, -0.6, 0.5, 0.3, 0.0])
    net = _student(np.array([u, u]), np.array([0.6, 0.4]))  # two copies of the teacher
    claim = _effective(net)
    assert claim.verdict == "holds" and claim.measured["reduced_rank"][0] <= 2 * O_F  # line + the small ones


@pytest.mark.parametrize("spread", [np.linspace(0.3, 4.0, 40)])
def test_effective_rank_fails_on_a_planted_student_no_narrow_network_reproduces(spread):
    """40 neurons on one line with amplitudes 0.3 .. 4 (tanh's nonlinear range): merging a line, or
    wide amplitude bands, changes the function; the bands that reproduce it are many neurons."""
    u = np.array([0.8, -0.6, 0.5, 0.3, 0.1])
    u /= np.linalg.norm(u)
    rows = spread[:, None] * u
    a = np.where(np.arange(40) % 2 == 0, 1.0, -0.7) * 0.1
    net = _student(rows, a)
    tol, red = coarsest_reduction(net, np.random.default_rng(0).uniform(-BOX, BOX, (300, D)))
    assert tol is not None  # merging the whole line does not reproduce it
    assert _effective(net).verdict == "fails"
