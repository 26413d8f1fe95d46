"""What makes a network condense (the talk: "smaller initialization, dropout, larger weight decay,
large learning rate"), on the Fig. 5 setting: 1-D input, n = 40 points in [-1, 1.5], target
sin(3x) + sin(6x)/2, 100 tanh neurons, Adam.

One sweep per factor around a base setting that condenses only partly (init std 0.1, lr 5e-4,
no weight decay, no dropout), several init seeds each, on the fig5 preset's data draw. Measured on
the hidden layer's input weights (w, b) (m, 2) at the end of the initial stage (first epoch with
loss <= 70 % of its initial value; the last epoch when a run never gets there): the share of
neurons on the largest line (tanh: p = 1) among the neurons of non-negligible amplitude (weight
decay silences neurons; a silenced neuron is neither condensed nor not): those within
|cos| >= 0.95 of the most crowded neuron's line (``largest_line_share``), and the number of
condensed lines (``condlab.analysis.count_orientations``, default thresholds: its null model can
call a loose group no line at all).

Each factor is one sweep spec (``sweep_spec``: the fig5 preset with the base setting, a grid over
the factor, init seeds) trained through the sweep engine (``condlab.sweep``: batched, resumable
after a kill, ``--executor ray``) with condlab's trainer in float64: Adam and GD with PyTorch
semantics, weight decay as L2 on every weight and bias (torch.optim.Adam's weight_decay), dropout
as nn.Dropout on the hidden layer in training, the loss that decides the initial stage without
dropout. The sweep task ``_facilitators_task`` records each run's exact stage-end snapshot and
measures there; the sweeps and their run records are kept under OUT/facilitators/sweeps/<factor>.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ._claims import ExperimentResult
from ._context import Context
from ._facilitators_task import TASK, largest_line_share

BASE = {"init_std": 0.1, "lr": 5e-4, "weight_decay": 0.0, "dropout": 0.0}
# factor -> (values, optimizer, when measured); the talk: condensation grows toward the last value.
# Learning rate: full-batch GD (Adam normalizes the step, so its lr is not the step size the claim is
# about). Dropout: at the end of the budget (it acts over training; the initial stage is short).
SWEEPS = {
    "init_std": ([1.0, 0.3, 0.1, 0.03, 0.01], "adam", "stage"),
    "weight_decay": ([0.0, 1e-3, 1e-2, 3e-2], "adam", "stage"),
    "dropout": ([0.0, 0.1, 0.3, 0.5], "adam", "end"),
    "lr": ([0.05, 0.2, 0.8, 2.0], "gd", "stage"),
}
CLAIMS = {"init_std": "smaller initialization", "weight_decay": "larger weight decay",
          "dropout": "dropout (a larger rate)", "lr": "a larger learning rate"}
M, N, EPOCHS, QUICK_EPOCHS = 100, 40, 3000, 2000
KEYS = {"init_std": "model.init_std", "weight_decay": "train.weight_decay", "dropout": "model.dropout",
        "lr": "train.lr"}  # factor -> the config key its sweep varies (all per run: one batch)
GRID = "every:100"  # the snapshot grid of the run records; each run's stage end is added to it

__all__ = ["facilitators", "largest_line_share", "sweep_spec"]


class SweepFailed(ValueError):
    """A batch of a facilitators sweep raised; the message is one line (the CLI exits 2)."""


def sweep_spec(factor: str, seeds: list[int], epochs: int) -> dict[str, Any]:
    """The sweep of one factor: the fig5 preset at the base setting, a grid over the factor's values
    (``SWEEPS``), init seeds; float64, trained by the facilitators' task (docs/sweeps.md format)."""
    values, optimizer, _ = SWEEPS[factor]
    base = {key: BASE[name] for name, key in KEYS.items() if name != factor}
    return {"name": f"facilitators-{factor}", "base": "fig5",
            "set": {**base, "model.width": M, "data.n": N, "train.optimizer": optimizer,
                    "train.dtype": "float64", "train.epochs": epochs, "train.snapshots": GRID},
            "grid": {KEYS[factor]: list(values)}, "seeds": {"init": list(seeds)}, "task": TASK}


def run_factor(ctx: Context, factor: str, epochs: int) -> list[dict[str, Any]]:
    """Train (or resume) one factor's sweep under OUT/sweeps/<factor> -> its table rows."""
    from ..sweeps import sweep

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = sweep(sweep_spec(factor, ctx.seeds, epochs), out=ctx.out / "sweeps" / factor,
                       executor=ctx.executor, address=ctx.address, progress=ctx.progress)
    ctx.warnings += list(dict.fromkeys(f"{factor}: {w.message}" for w in caught))
    if result.interrupted:
        raise KeyboardInterrupt(f"facilitators: the {factor} sweep was interrupted; run again to resume")
    if result.failed:  # e.g. condlab not importable on a Ray node: say so in one line, keep the rest
        raise SweepFailed(f"facilitators: {result.failed} runs of the {factor} sweep failed "
                          f"({result.errors[0]}); the finished runs are kept in {result.out}: run "
                          "again with the same --out to continue")
    return result.rows


def _measures(rows: list[dict[str, Any]], factor: str, seeds: list[int],
              until: str) -> tuple[np.ndarray, np.ndarray]:
    """(shares, lines), each (seeds, values): NaN / -1 where a run diverged (no measure)."""
    values = SWEEPS[factor][0]
    shares = np.full((len(seeds), len(values)), np.nan)
    lines = np.full_like(shares, -1)
    for row in rows:
        i, j = seeds.index(row["seed"]), values.index(row[KEYS[factor]])
        share, count = row.get(f"share_{until}"), row.get(f"lines_{until}")
        shares[i, j] = np.nan if share is None else share
        lines[i, j] = -1 if count is None else count
    return shares, lines


def facilitators(ctx: Context) -> ExperimentResult:
    """Four sweeps, four panels, a verdict per factor: does condensation grow the talk's way?"""
    from ..plotting import new_figure
    res = ExperimentResult("facilitators", "the talk (condensation facilitators)", ctx.seeds)
    epochs = QUICK_EPOCHS if ctx.quick else EPOCHS
    res.settings = {"m": M, "n": N, "activation": "tanh", "base": BASE,
                    "sweeps": {k: {"values": v, "optimizer": o, "measured_at": u}
                               for k, (v, o, u) in SWEEPS.items()},
                    "epoch_budget": epochs, "target": "sin(3x) + sin(6x)/2",
                    "data": "the fig5 preset's draw (data.seed 0)",
                    "trainer": "condlab.train in float64 through condlab.sweep, one sweep per factor "
                               f"(spec: sweep_spec; task {TASK}); records in sweeps/<factor>",
                    "executor": ctx.executor}
    res.choices.append("the optimizer and the moment of measurement per factor (SWEEPS) were chosen after a "
                       "probe on seed 0: with Adam, neither the learning rate nor dropout changed the "
                       "share at the end of the initial stage")
    res.choices.append("'facilitates condensation' is read as: the share of neurons on the largest line "
                       "at the end of the initial stage is larger at the sweep's most favourable value "
                       "than at its least favourable one, by at least 0.1, per seed; a run that diverged "
                       "(non-finite loss) has no measure, and the most favourable value that trained "
                       "is used")
    fig = new_figure(14, 3.7)
    axes = fig.subplots(1, 4)
    for ax, (factor, (values, optimizer, until)) in zip(axes, SWEEPS.items(), strict=True):
        claim = res.claim(f"facilitators/{factor}", f"{CLAIMS[factor]} facilitates condensation",
                          factor=factor, values=values, optimizer=optimizer, measured_at=until,
                          min_share_gain=0.1)
        shares, lines = _measures(run_factor(ctx, factor, epochs), factor, list(ctx.seeds), until)
        for i, seed in enumerate(ctx.seeds):
            trained = np.flatnonzero(np.isfinite(shares[i]))  # a diverged run has no measure
            ok = len(trained) > 1 and shares[i, trained[-1]] - shares[i, trained[0]] >= 0.1
            claim.record(bool(ok), pair=(0, seed),  # (data: the fixed Fig. 5 draw, init seed)
                         shares=[None if np.isnan(v) else round(float(v), 3) for v in shares[i]],
                         lines=[None if v < 0 else int(v) for v in lines[i]])
        _panel(ax, factor, values, shares, lines)
        ax.set_title(f"{CLAIMS[factor]} ({optimizer}, {'initial stage' if until == 'stage' else 'end'})\n"
                     f"{claim.verdict} on {sum(claim.passed)}/{len(claim.outcomes)} seeds"
                     + (" (provisional)" if ctx.quick else ""), fontsize=9)
    ctx.save(res, fig, "facilitators")
    return res


def _panel(ax, factor: str, values: list[float], shares: np.ndarray, lines: np.ndarray) -> None:
    pos = np.arange(len(values))
    trained = np.isfinite(shares).any(axis=0)  # a value where every seed diverged is left out
    mean = np.array([np.nanmean(c) if ok else np.nan for c, ok in zip(shares.T, trained, strict=True)])
    std = np.array([np.nanstd(c) if ok else np.nan for c, ok in zip(shares.T, trained, strict=True)])
    ax.errorbar(pos, mean, yerr=std, marker="o", color="C0")
    ax.set_ylim(0, 1.05)
    ax.set_xticks(pos, [f"{v:g}" for v in values])
    ax.set_xlabel(f"{factor} (talk: more condensed →)", fontsize=8)
    ax.set_ylabel("share of neurons on the largest line")
    twin = ax.twinx()
    counted = np.where(lines >= 0, lines, np.nan)
    line_mean = np.array([np.nanmean(c) if ok else np.nan for c, ok in zip(counted.T, trained, strict=True)])
    twin.plot(pos, line_mean, "s--", color="C3", label="lines")
    twin.set_ylabel("number of lines", color="C3")
