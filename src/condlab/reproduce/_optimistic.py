"""The optimistic sample size (talk: "Optimistic sample size reflects practice").

Statement implemented. Model rank r_θ = rank DF(θ); optimistic sample size
O_f* = min over the target set F⁻¹(f*) of r_θ (Zhang, Zhang, Zhang, Bai, Luo, Xu, "Optimistic
Estimate Uncovers the Potential of Nonlinear Models", arXiv:2307.08921; the talk's Theorem 5,
after "Local Linear Recovery Guarantee of Deep Neural Networks at Overparameterization",
arXiv:2406.18035). For a two-layer tanh network without biases, f = Σ_i a_i tanh(w_i·x), and
a target of exactly k neurons the optimistic sample size is k(d + 1) (the talk's slide is cut
before the formula; the value is the working reading, see ``NOTE``). condlab's networks carry a
bias in every hidden neuron, so the student here is Σ_i a_i tanh(w_i·x + b_i); condlab computes
O_f* for it as the model rank at the teacher embedded in the student (extra neurons zero),
which is an upper bound of the minimum and counts k(d + 2). The talk also says "wider network
is sample efficient ... increasing width doesn't harm generalization".

Experiment: a k-neuron tanh teacher without bias, students of width 50 (and 200 for the width
claim), inputs uniform in [−√3, √3]^d, full-batch GD in float64; small init (every parameter
std 1e-3, lr 0.5) against large init with LeCun's 1/√fan-in scaling (``_optimistic_runs``),
n from below O_f* to above the parameter count. This module holds the claims: the pre-registered
thresholds and the ``judge_*`` functions that give one init seed's outcome from the measured
numbers (pure, tested on planted numbers); ``_optimistic_exp`` runs the experiment.
"""

from __future__ import annotations

import math

import numpy as np

from ._claims import Outcome
from ._optimistic_runs import TEACHERS, D, teacher  # noqa: F401  (teacher: part of this module's API)

# ---- Pre-registered claims and thresholds (issue 25). Every value below was set, and committed
# on its own, BEFORE the default run of this version judged it; none is tuned on its results. ----
THRESHOLD = 1e-2        # recovery: relative test error <= 1e-2 on 2000 fresh points, at n and every larger n
FACTOR_NEAR_O = 4       # small init recovers from n <= 4 O_f*. Set by the previous generation after a
#                         pilot (at 3x, k = 2 held on 3/5 seeds); kept, re-registered here, and judged
#                         on a fresh data draw (DATA_SEED) that neither the pilot nor that run used
FACTOR_FAR_BELOW_P = 5  # ... and from n <= P / 5 (P: the student's parameter count)
FACTOR_LARGE = 4        # large (LeCun) init does not recover below 4x small init's n*, and where it
TRAINED = 5e-3          # ... does not, it fitted its training set (relative training error <= 5e-3);
#                         a large-init run that did not fit is untrained: that pair is inconclusive
RANK_FACTOR = 2         # rank claims: rank <= 2 O_f* at the end of a recovering small-init run
REDUCED_ERROR = 1e-2    # effective rank counts only where the reduced network reproduces the student:
#                         ‖f_reduced − f‖ / ‖f‖ <= 1e-2 on the rank inputs; otherwise the pair FAILS
AMPLITUDE_TOLS = (None, 1.0, 0.3, 0.1)  # effective rank: the model rank of the COARSEST of these
#                         reductions (condlab.reduce's amplitude bands: None = a whole line is one neuron)
#                         that reproduces the student; no band reproduces it -> the pair fails
WIDTHS = (50, 200)      # width claim: the width-200 student recovers from n* <= the width-50 one's n*
DATA_SEED = 1           # fresh data draw (the pilot and the previous generation used data.seed 0)
SMALL, LARGE = {"init_std": 1e-3, "lr": 0.5}, {"scaling": "lecun", "lr": 0.2}
# LARGE's lr 0.2: the largest of 0.5, 0.2, 0.1, 0.05 under which no LeCun run diverged in a
# 2,000-step probe at n = 160 (only divergence was looked at; 0.5 diverged)
TEST_POINTS, RANK_POINTS = 2000, 500
MODES = {  # teachers, n grid, epochs
    "full": ([1, 2], [4, 6, 8, 12, 16, 24, 40, 80, 160, 320], 20000),
    "quick": ([1], [4, 6, 12, 24, 48, 160], 10000),
    "smoke": ([1], [4, 24, 80], 5000),
}
NOTE = ("O_f* = k(d+1) for the bias-free two-layer tanh model is the talk's Theorem 5 as read from "
        "the optimistic-estimate papers (arXiv:2307.08921, arXiv:2406.18035); the exact statement "
        "could not be confirmed from stored copies (only their abstracts were available). "
        "condlab's student has hidden biases: O_f* is computed as the model rank at the teacher "
        "embedded in the student, k(d+2).")
WIDTH = WIDTHS[0]


def thresholds() -> dict:
    """The pre-registered constants above, as recorded in claims.json (settings.thresholds)."""
    return {"recovery_rel_test_error": THRESHOLD, "near_O_factor": FACTOR_NEAR_O,
            "far_below_P_factor": FACTOR_FAR_BELOW_P, "large_factor": FACTOR_LARGE,
            "large_trained_rel_train_error": TRAINED, "rank_factor": RANK_FACTOR,
            "reduced_rel_output_error": REDUCED_ERROR, "reduction_amplitude_tols": list(AMPLITUDE_TOLS),
            "widths": list(WIDTHS), "data_seed": DATA_SEED}


def optimistic_size(k: int, x: np.ndarray) -> int:
    """Model rank of the student at the teacher point (k teacher neurons, the rest zero) on x."""
    import torch

    from .. import get_activation
    from ..analysis import model_rank
    from ..training import FCNet, FullyConnected

    rows, out = np.zeros((WIDTH, D + 1)), np.zeros((1, WIDTH))
    for i, (a, w) in enumerate(TEACHERS[k]):
        rows[i, :D], out[0, i] = w, a
    arch = FullyConnected(D, WIDTH, 1, 1, (get_activation("tanh"),), False)
    return model_rank(FCNet(arch, [torch.as_tensor(rows), torch.as_tensor(out)]), x).rank


def recovery_n(ns: list[int], errors: np.ndarray) -> float:
    """Smallest n of the grid from which every larger n recovers (errors (len(ns),)); inf if none."""
    ok = np.asarray(errors) <= THRESHOLD
    for i in range(len(ns)):
        if ok[i:].all():
            return float(ns[i])
    return math.inf


# ---- judges: one pair's outcome from the measured numbers (tests plant these numbers) ----

def judge_near_o(n_small: float, o: int) -> Outcome:
    """Small init recovers from n* <= FACTOR_NEAR_O · O_f*."""
    if n_small <= FACTOR_NEAR_O * o:
        return True, ""
    return False, f"n* = {n_small} > {FACTOR_NEAR_O} O_f* = {FACTOR_NEAR_O * o}"


def judge_not_below_o(ns: list[int], errors: np.ndarray, o: int) -> Outcome:
    """No n < O_f* of the grid has a test error <= THRESHOLD."""
    early = [n for n, e in zip(ns, errors, strict=True) if n < o and e <= THRESHOLD]
    return (False, f"recovered below O_f* = {o} at n = {early}") if early else (True, "")


def judge_far_below_p(n_small: float, n_params: int) -> Outcome:
    """Small init recovers from n* <= P / FACTOR_FAR_BELOW_P."""
    if n_small <= n_params / FACTOR_FAR_BELOW_P:
        return True, ""
    return False, f"n* = {n_small} > P/{FACTOR_FAR_BELOW_P} = {n_params / FACTOR_FAR_BELOW_P:g}"


def judge_large(ns: list[int], test: np.ndarray, train: np.ndarray, n_small: float) -> Outcome:
    """Large init does not recover below FACTOR_LARGE · n*_small although it fits its training set.

    Inconclusive when small init never recovers (nothing to compare) or when large init did
    not fit its training set (relative training error > TRAINED) at an n of [n*, F n*): an
    untrained network's test error says nothing about samples.
    """
    if not math.isfinite(n_small):
        return None, "small init never recovers on the grid: nothing to compare"
    n_large, bound = recovery_n(ns, test), FACTOR_LARGE * n_small
    if n_large < bound:
        return False, f"large init recovers from n = {n_large:g} < {FACTOR_LARGE} x {n_small:g}"
    unfit = [n for n, e in zip(ns, train, strict=True) if n_small <= n < bound and not e <= TRAINED]
    if unfit:
        return None, f"large init did not fit its training set at n = {unfit} (relative error > {TRAINED})"
    return True, ""


def judge_raw_rank(rank: int, o: int) -> Outcome:
    """The raw model rank (numpy rule) is at most RANK_FACTOR · O_f*."""
    if rank <= RANK_FACTOR * o:
        return True, ""
    return False, f"rank {rank} > {RANK_FACTOR} O_f* = {RANK_FACTOR * o}"


def judge_effective_rank(reduced_rank: int, reduced_error: float, o: int) -> Outcome:
    """The reduced network reproduces the student (error <= REDUCED_ERROR) and has rank <= 2 O_f*."""
    if not reduced_error <= REDUCED_ERROR:
        return False, (f"the reduced network does not reproduce the output (relative error "
                       f"{reduced_error:.3g} > {REDUCED_ERROR})")
    if reduced_rank <= RANK_FACTOR * o:
        return True, ""
    return False, f"reduced rank {reduced_rank} > {RANK_FACTOR} O_f* = {RANK_FACTOR * o}"


def judge_width(n_narrow: float, n_wide: float) -> Outcome:
    """The wider student recovers from no more samples than the narrower one (n*_wide <= n*_narrow)."""
    if not math.isfinite(n_narrow) and not math.isfinite(n_wide):
        return None, "neither width recovers on the grid"
    if n_wide <= n_narrow:
        return True, ""
    return False, f"width {WIDTHS[1]} needs n* = {n_wide:g} > {n_narrow:g} (width {WIDTHS[0]})"

