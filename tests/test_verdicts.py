"""Pair outcomes of line-count claims and the one-factor diagnostic variants of `reproduce`.

Outcomes are decided on constructed Orientations (no counter runs here), so each branch of
the rule in docs/analysis.md ("Verdicts and diagnostic variants") is pinned whatever counter
produced the numbers.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import condlab
from condlab.analysis import Cluster, Orientations
from condlab.reproduce import Context, Experiment, ExperimentResult, write_summary
from condlab.reproduce._claims import bound_outcome, count_outcome, line_outcome
from condlab.reproduce._diagnose import VARIANTS, diagnose_result

M = 50  # neurons per constructed layer


def _cluster(members: range, width: float = 0.0) -> Cluster:
    return Cluster(np.array(members), np.eye(3)[0], len(members) / M, 0.99, width)


def layer(lines: int, band: list[int] | None = None, arcs: int = 0, active: int = M,
          stable: bool | None = None) -> Orientations:
    """A layer of M neurons: `lines` lines of 5 neurons, `arcs` arcs of 8, the rest scattered or
    negligible (M - active); `band` = the line counts over the sensitivity band."""
    band = [lines] * 3 if band is None else band
    found = [_cluster(range(5 * i, 5 * i + 5)) for i in range(lines)]
    start = 5 * lines
    bands = [_cluster(range(start + 8 * i, start + 8 * i + 8), 25.0) for i in range(arcs)]
    taken = 5 * lines + 8 * arcs
    values = {"n_lines": lines, "n_directions": lines, "lines": tuple(found), "directions": tuple(found),
              "arcs": tuple(bands), "scattered": np.arange(taken, max(active, taken)),
              "negligible": np.arange(max(active, taken), M),
              "counts_by_threshold": dict(zip((0.93, 0.95, 0.97), band, strict=True)),
              "stable": len(set(band)) == 1 if stable is None else stable, "params": {}}
    # only the fields this Orientations has (the counter may grow or drop the others)
    names = {f.name for f in dataclasses.fields(Orientations)}
    return Orientations(**{k: v for k, v in values.items() if k in names})


# (layer, p) -> (outcome, a word the reason must hold); one case per branch of the rule
BOUND_CASES = [
    (layer(1, active=8), 3, None, "active"),                   # too few active neurons
    (layer(5, [5, 6, 4]), 3, False, "every setting"),           # > p at every count of the band
    (layer(5, [5, 2, 6], arcs=1), 3, False, "arc"),             # > p lines beside an arc
    (layer(6, [6, 6, 6], arcs=1), 3, False, "every setting"),   # an arc does not rescue it
    (layer(0), 3, None, "nothing condensed"),                   # nothing to hold against the bound
    (layer(2, arcs=1), 3, None, "arc"),                         # an arc beside <= p lines
    (layer(2, [1, 2, 3]), 3, True, ""),                         # <= p at every count: holds
    (layer(3, [3, 3, 3], stable=False), 3, True, ""),           # the bound does not need equal counts
    (layer(3, [2, 3, 4]), 3, None, "both sides"),               # the band straddles p
]


@pytest.mark.parametrize("o,p,expected,word", BOUND_CASES)
def test_bound_outcome_follows_the_rule(o, p, expected, word):
    outcome, reason = bound_outcome(o, p)
    assert outcome is expected
    assert word in reason and (reason == "") == (outcome is True)


COUNT_CASES = [
    (layer(1, active=9), 1, None, "active"),
    (layer(4, [4, 3, 5]), 2, False, "every setting"),
    (layer(3, [3, 1, 2], arcs=1), 2, False, "arc"),
    (layer(0), 2, False, "nothing condensed"),                  # fewer at every count, 0 lines
    (layer(1, [1, 0, 1]), 2, False, "every setting"),           # fewer at every count
    (layer(1, arcs=1), 2, None, "missing"),                     # the arc may be the missing line
    (layer(2), 2, True, ""),
    (layer(2, [2, 2, 2], stable=False), 2, None, "calls the count not stable"),  # it moved elsewhere
    (layer(2, [1, 2, 3]), 2, None, "not stable"),
]


@pytest.mark.parametrize("o,p,expected,word", COUNT_CASES)
def test_count_outcome_follows_the_rule(o, p, expected, word):
    outcome, reason = count_outcome(o, p)
    assert outcome is expected
    assert word in reason and (reason == "") == (outcome is True)


def test_other_claims_are_inconclusive_on_an_arc_or_a_moving_count():
    assert line_outcome(layer(2), True, "why") == (True, "")
    assert line_outcome(layer(2), False, "why") == (False, "why")
    assert line_outcome(layer(2, arcs=1), True, "why")[0] is None
    assert line_outcome(layer(2, [1, 2, 2]), True, "why")[0] is None
    assert line_outcome(layer(1, active=7), True, "why")[0] is None


def test_every_variant_states_one_factor_and_data_draws_explains_nothing():
    names = [v.name for v in VARIANTS]
    assert len(set(names)) == len(names)
    assert all(isinstance(v.factor, str) and v.factor for v in VARIANTS)
    assert len({v.factor for v in VARIANTS}) == len(VARIANTS)  # no two variants change the same thing
    assert [v.name for v in VARIANTS if not v.explains] == ["data-draws"]


def _toy(ctx: Context, holds_when: str, *, optimizer: str = "adam", dtype: str = "float32",
         stage_ends: bool = True) -> ExperimentResult:
    """A stand-in experiment: 'trains' fig3 with ctx's overrides; the claim holds when one is set."""
    ctx.trained.append(condlab.preset("fig3").with_overrides(
        [f"train.optimizer={optimizer}", f"train.dtype={dtype}", *ctx.overrides]))
    ctx.stages.append((stage_ends, 0.5 if stage_ends else 0.9))
    res = ExperimentResult("toy", "src", ctx.seeds)
    claim = res.claim("toy/x", "x", lines=1)
    ok = holds_when in ctx.overrides or holds_when == ctx.epoch_policy or \
        (holds_when == "draws" and ctx.data_seeds != [0, 1, 2])
    for d in ctx.data_seeds:
        claim.record(ok, pair=(d, 0), reason="2 lines (expected 1)", lines=1 if ok else 2)
    return res


def _diagnosed(tmp_path, holds_when: str, **kw) -> ExperimentResult:
    experiment = Experiment("toy", "src", "toy", lambda ctx: _toy(ctx, holds_when, **kw))
    ctx = Context([0], out=tmp_path, data_seeds=[0, 1, 2])
    result = experiment.run(ctx)
    diagnose_result(experiment, ctx, result)
    return result


def test_a_failing_claim_is_explained_by_the_one_factor_variant_that_restores_it(tmp_path):
    (claim,) = _diagnosed(tmp_path, "train.dtype=float64").claims
    assert claim.verdict == "fails" and claim.explained_by == "float64"
    verdicts = {v["variant"]: v["verdict"] for v in claim.variants}
    # no eps warning: adam-eps changes nothing; the others ran and only float64 restores the claim
    assert verdicts == {"adam-eps": "not applicable", "gd": "fails", "initial-stage": "fails",
                        "float64": "holds", "data-draws": "fails"}
    assert all(v["factor"] for v in claim.variants)
    table = write_summary([ExperimentResult("toy", "src", [0], claims=[claim])], tmp_path)
    assert table.splitlines()[-1].endswith("| float64 | same on data seeds 3-5 |")


def test_variants_that_change_nothing_are_not_run_and_say_why(tmp_path):
    (claim,) = _diagnosed(tmp_path, "never", optimizer="gd", dtype="float64", stage_ends=False).claims
    by_name = {v["variant"]: v for v in claim.variants}
    assert by_name["gd"]["verdict"] == "not applicable" and "plain GD" in by_name["gd"]["reason"]
    assert by_name["float64"]["verdict"] == "not applicable" and "float64" in by_name["float64"]["reason"]
    assert by_name["initial-stage"]["verdict"] == "not applicable"
    assert "does not end" in by_name["initial-stage"]["reason"]
    assert by_name["adam-eps"]["verdict"] == "not applicable"
    assert claim.explained_by is None


def test_holding_on_other_draws_is_a_label_not_an_explanation(tmp_path):
    (claim,) = _diagnosed(tmp_path, "draws").claims
    assert claim.explained_by is None
    assert claim.draws["verdict"] == "holds"
    assert claim.draw_dependence == "depends on the draw: holds on data seeds 3-5"
    assert claim.to_dict()["draw_dependence"] == claim.draw_dependence


def test_a_variant_whose_training_diverges_says_so_instead_of_an_error(tmp_path):
    # claim: when a variant's runs diverge before the measurement epoch (e.g. GD's step size on
    # a network Adam trains), the variant's verdict is "diverged" with the runs named, never
    # "error", and it explains nothing
    def toy(ctx: Context) -> ExperimentResult:
        if "train.optimizer=gd" in ctx.overrides:
            ctx.diverged.append("toy data 0 seed 0 at epoch 800")
            raise ValueError("epoch 1000 was not recorded: snapshots exist at 0, 100")
        return _toy(ctx, "never")

    experiment = Experiment("toy", "src", "toy", toy)
    ctx = Context([0], out=tmp_path, data_seeds=[0, 1, 2])
    result = experiment.run(ctx)
    diagnose_result(experiment, ctx, result)
    (claim,) = result.claims
    gd = {v["variant"]: v for v in claim.variants}["gd"]
    assert gd["verdict"] == "diverged" and "seed 0 at epoch 800" in gd["reason"]
    assert claim.explained_by is None


def test_a_diverged_run_of_a_context_is_named_by_its_seed_and_epoch(tmp_path):
    # claim: Context.train names each diverged run (tag, data draw, init seed, epoch) in
    # ctx.diverged, so that a variant's "diverged" verdict can say which runs (it read a field
    # that Run does not have, and the variant came out as an AttributeError "error")
    from condlab.training import preset

    cfg = preset("fig5").with_overrides(["model.width=8", "train.optimizer=gd", "train.lr=1e6",
                                         "train.epochs=30", "train.snapshots=every:10"])
    ctx = Context([0, 1], out=tmp_path, data_seeds=[0], progress=False)
    runs = ctx.train(cfg, "blowup")  # (its warnings go to ctx.warnings)
    assert all(r.diverged_epoch is not None for r in runs)
    assert ctx.diverged == [f"blowup data 0 seed {r.spec.seed} at epoch {r.diverged_epoch}" for r in runs]
