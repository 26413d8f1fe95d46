"""Scientific claims on trained networks: each test states its claim and tolerance first.

Written before any of them was run, and not tuned after: every test trains a pre-registered
seed set (init seeds 0-9 on data seed 0 unless it says otherwise), decides each seed by the
stated claim and tolerance, and passes when at least PASS of the 10 seeds do. Line counts
are decided as `condlab reproduce` decides them (reproduce._claims: `bound_outcome` for
"at most p lines", `count_outcome` for "exactly p lines"; an inconclusive seed does not
pass). Angles use one tolerance, ON_LINE_DEG = 10°: neurons "lie on" a predicted line
within 10°, the tolerance `condlab reproduce fig6` fixed for the paper's Fig. 6. Where our
measurement disagrees with the paper, the test is a strict xfail that says what we measured.
"""

import functools

import numpy as np
import pytest

import condlab
from condlab.analysis import analyze_layer, analyze_run, default_epoch
from condlab.reproduce._claims import bound_outcome, count_outcome

# Each test trains 10 seeds (minutes on 2 cores): `make test-slow` runs them, and so does CI.
pytestmark = pytest.mark.slow

SEEDS = list(range(10))   # init seeds, pre-registered
PASS = 8                  # seeds of 10 on which the claim must hold
ON_LINE_DEG = 10.0        # a line "lies on" a predicted line within this angle
FIG5_LINES = {"fig5": 1, "fig5-xtanh": 2, "fig5-x2tanh": 3}


@functools.cache
def _train(preset: str, *overrides: str):
    cfg = condlab.preset(preset).with_overrides(["train.snapshots=every:10",
                                                 f"train.seeds={SEEDS}", *overrides])
    return tuple(condlab.train(cfg, progress=False))


def _assert_share(passed: list[bool], details: list) -> None:
    assert sum(passed) >= PASS, f"holds on {sum(passed)} of {len(passed)} seeds: {details}"


def _majority(o) -> bool:
    """Most neurons condensed: the lines hold more than half of the layer (the paper's 'condense')."""
    return sum(c.share for c in o.lines) > 0.5


# Under the cap counter (stop 16) fig5 tanh was "one arc 23-41 deg wide" and under the first
# mixture counter fig5-xtanh split sub-degree lines: both were strict xfails; both hold now.
@pytest.mark.parametrize("preset", ["fig5", "fig5-xtanh", "fig5-x2tanh"])
def test_fig5_setting_condenses_on_at_most_p_lines_where_the_replay_does(preset):
    # Claim (Proposition 1; Fig. 6 at epoch 200): the neurons condense -- a majority on lines --
    # on at most p lines, each within ON_LINE_DEG of a line of the leading-order replay.
    p = FIG5_LINES[preset]
    passed, details = [], []
    for run in _train(preset, "train.epochs=200"):
        report = analyze_layer(run, 0, 200)
        o = report.orientations
        bound, why = bound_outcome(o, p)
        angles = report.angles.get("replay", [])
        passed.append(bool(bound) and _majority(o) and bool(angles) and max(angles) <= ON_LINE_DEG)
        details.append((run.spec.seed, o.n_lines, o.n_arcs, why, [round(a, 1) for a in angles]))
    _assert_share(passed, details)


@pytest.mark.xfail(strict=True, reason=(
    "disagrees with Fig. 3 (one tanh line at epoch 100): the initial stage does not end within "
    "100 epochs (the loss stays above 70 %), and at epoch 100 (data seed 0) the counter reports 1 "
    "line on 5 of 10 seeds and 2-3 on the others, none within 10 deg of the replay (the nearest "
    "13-29 deg; gradient flow at initialization 21-31 deg)"))
def test_fig3_tanh_under_adam_condenses_where_the_replay_says_not_where_gradient_flow_does():
    # Claim: at the initial-stage epoch, Fig. 3's tanh layer trained with Adam condenses on one
    # line (majority) within ON_LINE_DEG of the replay of its own optimizer, while both
    # closed forms at initialization (gradient flow, sign flow) miss it by more than ON_LINE_DEG:
    # Adam is not gradient flow.
    passed, details = [], []
    for run in _train("fig3", "train.epochs=100"):
        report = analyze_layer(run, 0, default_epoch(run))
        o, a = report.orientations, report.angles
        one = count_outcome(o, 1)[0] is True and _majority(o)
        near = one and a.get("replay", [99])[0] <= ON_LINE_DEG
        far = one and min(a["gradient@init"][0], a["sign@init"][0]) > ON_LINE_DEG
        passed.append(near and far)
        details.append((run.spec.seed, report.epoch, o.n_lines, {k: [round(x, 1) for x in v]
                                                                  for k, v in a.items()}))
    _assert_share(passed, details)


def _gd_tanh():
    return _train("fig3", "train.optimizer=gd", "train.lr=0.02", "train.epochs=100", "train.dtype=float64")


def test_fig3_tanh_under_gradient_descent_follows_sum_e_x_at_initialization():
    # Claim (Sec. 5, Case 1, p = 1): under GD, inside the initial stage, the neurons condense on
    # one line within ON_LINE_DEG of ±Σ eᵢxᵢ with the residual at initialization.
    passed, details = [], []
    for run in _gd_tanh():
        inside = analyze_layer(run, 0, default_epoch(run), replay=False)
        angle = inside.angles.get("gradient@init", [99.0])[0]
        passed.append(count_outcome(inside.orientations, 1)[0] is True and angle <= ON_LINE_DEG)
        details.append((run.spec.seed, inside.epoch, inside.orientations.n_lines, round(angle, 1)))
    _assert_share(passed, details)


@pytest.mark.xfail(strict=True, reason=(
    "the residual does rotate (at epoch 100 Σ eᵢxᵢ at the snapshot is 45-63 deg from the line, "
    "at initialization 7-9 deg, on 10 of 10 seeds), but the loss is still above 70 % of its start "
    "at epoch 100: the rotation happens inside the initial stage as the 70 % rule defines it"))
def test_fig3_tanh_under_gradient_descent_the_residual_rotates_after_the_initial_stage():
    # Claim: after the initial stage (epoch 100: the loss has fallen below 70 %), the residual
    # has rotated: Σ eᵢxᵢ at the snapshot misses the line by more than ON_LINE_DEG, and the line
    # stays nearer the initial prediction than the snapshot's (the weights keep their history).
    passed, details = [], []
    for run in _gd_tanh():
        late = analyze_layer(run, 0, 100, replay=False).angles
        rotated = bool(late) and late["gradient@snapshot"][0] > ON_LINE_DEG and \
            late["gradient@init"][0] < late["gradient@snapshot"][0]
        ended = bool(np.any(np.asarray(run.loss) <= 0.7 * run.loss[0]))
        passed.append(rotated and ended)
        details.append((run.spec.seed, ended, {k: round(v[0], 1) for k, v in late.items()}))
    _assert_share(passed, details)




@pytest.mark.parametrize("activation", ["tanh", "sigmoid"])
def test_gd_inside_the_initial_stage_stays_within_the_bound(activation):
    # Claim (Proposition 1, where its assumptions hold: GD, small lr, initial stage): at most
    # p = 1 line. A counterexample would refute the theorem, so no pair may fail; and the bound
    # must hold (not merely be undecided) on at least PASS of the 10 pre-registered pairs,
    # data seeds 0-1 x init seeds 0-4.
    outcomes, details = [], []
    for data_seed in (0, 1):
        for run in _train("fig3", f"model.activations={activation}", "train.optimizer=gd",
                          "train.lr=0.02", "train.epochs=100", f"data.seed={data_seed}")[:5]:
            o = analyze_layer(run, 0, default_epoch(run), predict=False).orientations
            ok, why = bound_outcome(o, 1)
            outcomes.append(ok)
            details.append((data_seed, run.spec.seed, o.n_lines, o.n_arcs, why))
    assert False not in outcomes, details
    _assert_share([ok is True for ok in outcomes], details)


FIG5_NOT_POLYNOMIAL = {
    "fig5-xtanh": "disagrees with Fig. 5: at epoch 1000 degree 2 leaves 1 - R² = 0.055-0.15 "
                  "(degree 3: 0.0009-0.002) on 10 of 10 seeds",
    "fig5-x2tanh": "disagrees with Fig. 5 at our tolerance: at epoch 1000 degree 3 leaves "
                   "1 - R² = 0.008-0.017, within 0.01 on 4 of 10 seeds",
}


@pytest.mark.parametrize("preset", [pytest.param(k, marks=pytest.mark.xfail(
    strict=True, reason=FIG5_NOT_POLYNOMIAL[k])) if k in FIG5_NOT_POLYNOMIAL else k for k in FIG5_LINES])
def test_fig5_output_is_a_degree_p_polynomial_at_the_caption_epoch(preset):
    # Claim (Fig. 5, epoch 1000), with `condlab reproduce fig5`'s tolerance: the degree-p
    # least-squares fit leaves 1 - R² <= 0.01 on 200 test points and, for p > 1, degree p - 1
    # leaves at least 10x more unexplained.
    p = FIG5_LINES[preset]
    passed, details = [], []
    for run in _train(preset, "train.epochs=1000", "train.snapshots=every:500"):
        left = {f.degree: 1 - f.r2 for f in analyze_run(run, 1000, predict=False).polyfits}
        passed.append(left[p] <= 0.01 and (p == 1 or left[p - 1] >= 10 * left[p]))
        details.append((run.spec.seed, {d: f"{v:.2g}" for d, v in left.items()}))
    _assert_share(passed, details)


def test_analysis_of_a_relu_layer_reports_no_theory():
    run = condlab.train(condlab.preset("fig5").with_overrides(
        ["train.epochs=20", "train.snapshots=every:10", "model.activations=relu"]), progress=False)[0]
    report = analyze_layer(run, 0, 20)
    assert report.p is None and report.predictions == {} and "undefined" in report.note


FIG4 = [("x2tanh", 3, 1000), ("xtanh", 2, 900), ("sigmoid", 1, 900), ("tanh", 1, 1400),
        ("softplus", 1, 1400)]
FIG4_OVER_BOUND = {  # layer 1 holds under the mixture counter (issue 18): no xfail
    4: "layer 5 (softplus, p = 1) has 2 lines at every count of the band on 10 of 10 seeds",
}
FIG4_NOT_CAPTION = {
    0: "layer 1 (x2tanh) has 3 lines on 3 of 10 seeds and 2 (fewer than the figure) on 7",
    4: "layer 5 (softplus) has 2 lines on 10 of 10 seeds where the figure shows 1",
}


def _fig4_layers(disagree: dict[int, str]) -> list:
    marks = {k: pytest.mark.xfail(strict=True, reason=f"disagrees with Fig. 4: {why}")
             for k, why in disagree.items()}
    return [pytest.param(k, marks=marks[k]) if k in marks else k for k in range(5)]


def _fig4_share(layer: int, outcome) -> None:
    """Decide each seed's layer at its caption epoch with `outcome` (bound or count); PASS of 10."""
    _, p, epoch = FIG4[layer]
    passed, details = [], []
    for run in _train("fig4", "train.snapshots=every:100"):
        o = analyze_layer(run, layer, epoch, predict=False).orientations
        ok, why = outcome(o, p)
        passed.append(ok is True)
        details.append((run.spec.seed, o.n_lines, o.n_arcs, why))
    _assert_share(passed, details)


@pytest.mark.slow
@pytest.mark.parametrize("layer", _fig4_layers(FIG4_OVER_BOUND))
def test_fig4_each_layer_within_the_bound_at_its_caption_epoch(layer):
    # Claim (Proposition 1 on every hidden layer of Fig. 4's residual network): layer k
    # condenses on at most p_k lines at its caption epoch.
    _fig4_share(layer, bound_outcome)


@pytest.mark.slow
@pytest.mark.parametrize("layer", _fig4_layers(FIG4_NOT_CAPTION))
def test_fig4_each_layer_has_the_caption_count(layer):
    # Claim (Fig. 4's caption): layers 1-5 condense on exactly 3, 2, 1, 1, 1 lines at epochs
    # 1000, 900, 900, 1400, 1400.
    _fig4_share(layer, count_outcome)
