"""Every disagreement looked at again: diagnostic variants that each change one factor.

When a claim does not hold, ``reproduce`` reruns the experiment under each variant of
VARIANTS, with the same (data, init) grid, epochs and measurement rule unless the variant's
one factor is one of them. A variant is an object (one class each, registered in VARIANTS)
that states, as data, the single factor it changes (`factor`), and says itself when it
would change nothing for an experiment (`not_applicable`): such a variant is not run and
is recorded as "not applicable" with its reason.

* ``adam-eps`` (factor: Adam's eps): 1e-8 -> 1e-16; applicable when the eps warning fired;
* ``gd`` (factor: the optimizer): plain gradient descent at lr 0.05 instead of the Adam
  family (the paper's theory is gradient flow; an Adam lr is not a GD lr, so the optimizer
  comes with its own step size), the same epochs, measured by the same rule;
* ``initial-stage`` (factor: the measurement epoch): claims measured at the last snapshot
  with loss above 70 % of its start instead of the caption's epoch, on runs whose initial
  stage ends within the run (elsewhere nothing changes); not applicable when it ends in none;
* ``float64`` (factor: the training dtype): float64 instead of float32.

A variant *explains* a claim when the claim holds under it; the first such variant (in the
order above) is the claim's ``explained_by``. ``data-draws`` (factor: the data draw, data
seeds 3-5) is kept apart: holding on other draws shows that the outcome depends on the draw,
which explains nothing, so its verdict goes to the claim's ``draws`` label, never to
``explained_by``. Every variant's entry is kept in ``variants``; a claim that no variant
restores is "unexplained".
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from ._claims import Claim, ExperimentResult
from ._context import Context, Experiment

GD_LR = 0.05
SMALL_EPS = 1e-16
OTHER_DATA_SEEDS = [3, 4, 5]


class Variant:
    """A diagnostic rerun that changes one factor of an experiment (subclasses set the class data)."""

    name: ClassVar[str]
    factor: ClassVar[str]     # the single factor the variant changes
    what: ClassVar[str]       # the change, in words
    explains: ClassVar[bool] = True  # False: a label of its own (draw-dependence), never an explanation

    def not_applicable(self, experiment: Experiment, ctx: Context, result: ExperimentResult) -> str | None:
        """Why this variant would change nothing for the experiment as run in `ctx`; None: it applies."""
        if not ctx.trained:
            return "the experiment trains outside the shared trainer: the variant's change does not reach it"
        return None

    def context(self, ctx: Context) -> Context:
        """The context of the rerun: `ctx` with this variant's one change."""
        return ctx


def _all(ctx: Context, test) -> bool:
    return bool(ctx.trained) and all(test(cfg.train) for cfg in ctx.trained)


class AdamEps(Variant):
    name, factor = "adam-eps", "Adam's eps"
    what = f"Adam's eps 1e-8 -> {SMALL_EPS:g}"

    def not_applicable(self, experiment, ctx, result):
        from ..analysis import flow_for_optimizer

        if _all(ctx, lambda t: flow_for_optimizer(t.optimizer) != "sign"):
            return "not trained with an Adam-family optimizer: eps is not used"
        if _all(ctx, lambda t: t.eps <= SMALL_EPS):
            return f"eps is already <= {SMALL_EPS:g}"
        if not any("below Adam eps" in note for note in ctx.warnings + result.notes):
            return "the eps warning did not fire: most first gradients are above eps"
        return super().not_applicable(experiment, ctx, result)

    def context(self, ctx):
        return replace(ctx, overrides=[*ctx.overrides, f"train.eps={SMALL_EPS:g}"])


class GradientDescent(Variant):
    name, factor = "gd", "optimizer"
    what = f"plain GD (lr {GD_LR}) instead of Adam; same epochs, same measurement epoch"

    def not_applicable(self, experiment, ctx, result):
        if _all(ctx, lambda t: t.optimizer == "gd"):
            return "already trained with plain GD"
        return super().not_applicable(experiment, ctx, result)

    def context(self, ctx):
        return replace(ctx, overrides=[*ctx.overrides, "train.optimizer=gd", f"train.lr={GD_LR}"])


class InitialStage(Variant):
    name, factor = "initial-stage", "measurement epoch"
    what = "measured at the last snapshot with loss > 70 % of its start (where the stage ends)"

    def not_applicable(self, experiment, ctx, result):
        if not ctx.stages:
            return "no claim is measured at a caption epoch"
        if not any(ended for ended, _ in ctx.stages):
            ratios = [r for _, r in ctx.stages]
            return (f"the initial stage does not end within the run: the loss stays above 70 % of its "
                    f"start (last/first {min(ratios):.2f}-{max(ratios):.2f})")
        return None

    def context(self, ctx):
        return replace(ctx, epoch_policy="initial-stage")


class Float64(Variant):
    name, factor = "float64", "training dtype"
    what = "training in float64 instead of float32"

    def not_applicable(self, experiment, ctx, result):
        if _all(ctx, lambda t: t.dtype == "float64"):
            return "already trained in float64"
        return super().not_applicable(experiment, ctx, result)

    def context(self, ctx):
        return replace(ctx, overrides=[*ctx.overrides, "train.dtype=float64"])


class DataDraws(Variant):
    name, factor, explains = "data-draws", "data draw", False
    what = f"other data draws (data seeds {OTHER_DATA_SEEDS})"

    def not_applicable(self, experiment, ctx, result):
        if experiment.dataset is not None or not experiment.data_grid:
            return "the data are fixed (real data, or drawn by the experiment itself)"
        return None

    def context(self, ctx):
        return replace(ctx, data_seeds=list(OTHER_DATA_SEEDS))


DIVERGED = "diverged"  # a variant whose training diverged: no verdict, and no error of condlab

# The order in which a variant becomes a claim's explanation; data-draws never does.
VARIANTS: list[Variant] = [AdamEps(), GradientDescent(), InitialStage(), Float64(), DataDraws()]


def _summary(claim: Claim) -> dict[str, Any]:
    pairs = f"{sum(claim.passed)}/{claim.conclusive}/{len(claim.outcomes)}"
    return {"verdict": claim.verdict, "pairs": pairs, "reason": claim.reason}


def _rerun(v: Variant, experiment: Experiment, ctx: Context) -> dict[str, Claim] | tuple[str, str]:
    """The variant's claims by id, or (verdict, reason) when it did not finish: "diverged" (its
    training diverged before the measurement) or "error"."""
    fresh = replace(ctx, out=ctx.out / "variants" / v.name, warnings=[], trained=[], stages=[],
                    diverged=[], analyze_replay=False)
    run = v.context(fresh)
    try:
        return {c.id: c for c in experiment.run(run).claims}
    except Exception as err:  # noqa: BLE001 - a variant that cannot run is a result, not a crash
        if run.diverged:  # e.g. GD's step size on a network Adam trains: say so, not the error it led to
            return DIVERGED, (f"{len(run.diverged)} run(s) diverged before the measurement "
                              f"({'; '.join(run.diverged[:3])}{'; ...' if len(run.diverged) > 3 else ''})")
        return "error", f"{type(err).__name__}: {err}"


def diagnose_result(experiment: Experiment, ctx: Context, result: ExperimentResult) -> None:
    """Rerun `experiment` under each applicable variant; fill the failing claims' variants,
    explained_by and draws."""
    failing = [c for c in result.claims if not c.holds]
    if not failing or result.status != "ran":
        return
    for v in VARIANTS:
        entry = {"variant": v.name, "factor": v.factor, "what": v.what}
        why_not = v.not_applicable(experiment, ctx, result)
        claims = ("not applicable", why_not) if why_not else _rerun(v, experiment, ctx)
        for c in failing:
            if isinstance(claims, tuple):
                c.variants.append({**entry, "verdict": claims[0], "pairs": "-", "reason": claims[1]})
                continue
            if c.id not in claims:
                continue
            c.variants.append({**entry, **_summary(claims[c.id])})
            if not v.explains:
                c.draws = {"data_seeds": list(OTHER_DATA_SEEDS), **_summary(claims[c.id])}
            elif claims[c.id].holds and c.explained_by is None:
                c.explained_by = v.name
