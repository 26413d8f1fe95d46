"""Diagnostic variants on a planted experiment: no training, only the decision to rerun or not."""

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from condlab.reproduce import EXPERIMENTS
from condlab.reproduce._claims import ExperimentResult
from condlab.reproduce._context import Context
from condlab.reproduce._diagnose import diagnose_result


def diagnose_planted(name: str, out: Path, trained: Callable[[Context], Any] | None = None
                     ) -> tuple[ExperimentResult, int]:
    """Experiment `name` with its run replaced by a planted one (one failing claim; `trained(ctx)`,
    if given, is the config it records as trained), then diagnosed: (the result, how many times
    the experiment ran: 1 when no variant reran it)."""
    calls = []

    def planted(ctx: Context) -> ExperimentResult:
        calls.append(ctx)
        if trained is not None:
            ctx.trained.append(trained(ctx))
        res = ExperimentResult(name, "src", ctx.seeds)
        res.claim(f"{name}/x", "planted").record(False, pair=(0, 0), reason="planted")
        return res

    experiment = replace(EXPERIMENTS[name], run=planted)
    ctx = Context([0], out=out)
    result = experiment.run(ctx)
    diagnose_result(experiment, ctx, result)
    return result, len(calls)
