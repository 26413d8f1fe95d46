"""What every experiment gets: seeds, quick mode, output folder, device, data directory."""

from __future__ import annotations

import signal
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..records import Run
from ..training import Config, train
from ._claims import ExperimentResult


@dataclass
class Context:
    """Settings of one ``condlab reproduce`` call, shared by the experiments it runs."""

    seeds: list[int]
    quick: bool = False
    out: Path = Path("runs/reproduce")
    device: str = "cpu"
    data_dir: Path | None = None
    progress: bool = False
    warnings: list[str] = field(default_factory=list)
    smoke: bool = False   # `reproduce all --quick`: the CI-sized version where an experiment has one
    data_seeds: list[int] = field(default_factory=lambda: [0])  # [0] where the data are fixed
    overrides: list[str] = field(default_factory=list)  # diagnostic variants (e.g. float64)
    epoch_policy: str = "caption"  # or "initial-stage": the last snapshot with loss > 70 %
    analyze_replay: bool = True  # diagnostic variants skip the (slow) replay
    # what ran, for the diagnostic variants to tell whether they would change anything:
    trained: list[Config] = field(default_factory=list)   # every batch config trained
    # per epoch() call: (the initial stage ended within the run, last / first loss)
    stages: list[tuple[bool, float]] = field(default_factory=list)
    diverged: list[str] = field(default_factory=list)  # "TAG data D seed S at epoch E", per diverged run
    executor: str = "local"  # experiments built on condlab.sweep (facilitators): local or ray
    address: str | None = None  # the Ray head for executor "ray" (None: a local Ray cluster)

    @property
    def replay(self) -> bool:
        """Whether experiments compute the leading-order replay (not with --quick)."""
        return self.analyze_replay and not self.quick

    def epoch(self, run: Run, caption: int) -> int:
        """The epoch at which a claim is measured: the caption's, or the initial-stage one.

        The initial-stage epoch only where the stage ends within the run (the loss falls to
        70 % of its start); elsewhere it would be just the last snapshot, so the caption's is kept.
        """
        from ..analysis import INITIAL_STAGE_SHARE, default_epoch

        loss = np.asarray(run.loss, dtype=np.float64)
        ended = bool(len(loss)) and bool(np.any(loss <= INITIAL_STAGE_SHARE * loss[0]))
        self.stages.append((ended, float(loss[-1] / loss[0]) if len(loss) and loss[0] else float("nan")))
        if self.epoch_policy == "caption" or not ended:
            return caption
        return default_epoch(run)

    def train(self, cfg: Config, tag: str, *extra: str) -> list[Run]:
        """Train `cfg` for every init seed as one batch per data seed; records go to OUT/runs/TAG[/dataD].

        Data and initialization come from separate seeds (data.seed, train.seeds).
        """
        runs: list[Run] = []
        for d in self.data_seeds:
            folder = self.out / "runs" / tag / (f"data{d}" if len(self.data_seeds) > 1 else "")
            batch = cfg.with_overrides([f"train.seeds={self.seeds}", f"train.device={self.device}",
                                        *extra, f"data.seed={d}", *self.overrides])
            self.trained.append(batch)
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    new = list(train(batch, out=folder, progress=self.progress))
            except KeyboardInterrupt:   # a signal as the batch ended: complete, but stop here
                raise stopped(self, f"{tag} data {d}") from None
            if any(r.status == "interrupted" for r in new) or RECEIVED:
                raise stopped(self, f"{tag} data {d}")
            runs += new
            self.warnings += [f"{tag} data {d}: {w.message}" for w in caught]
            self.diverged += [f"{tag} data {d} seed {r.spec.seed} at epoch {r.diverged_epoch}"
                              for r in new if r.diverged_epoch is not None]
        return runs

    def save(self, result: ExperimentResult, fig, name: str) -> None:
        """Write a figure as PNG and SVG next to claims.json and list it in the result."""
        # plotting (matplotlib, ~0.5 s) is imported when a figure is drawn: not by a process
        # that only imports the experiments (a sweep's, `reproduce --help`'s)
        from ..plotting import save_figure

        result.figures += [str(p) for p in save_figure(fig, self.out / name)]


RECEIVED: list[int] = []   # SIGINT/SIGTERM this reproduce received (runner.signals_stop records them)


def stop_if_signalled(where: str) -> None:
    """Raise the stop again if a signal came and its KeyboardInterrupt was lost.

    CPython drops an exception raised inside a finalizer or a weakref callback ("Exception ignored
    in ... KeyboardInterrupt"): a Ctrl-C that lands in one (an import's module-lock callback, in
    about 1 of 10 tries during the facilitators sweep's start) would be ignored, and the
    experiment would run to its end. The runner records every signal; the experiments call this
    between their batches.
    """
    if RECEIVED:
        raise KeyboardInterrupt(f"stopped by {signal.Signals(RECEIVED[0]).name} ({where})")


def stopped(ctx: Context, where: str) -> KeyboardInterrupt:
    """The stop of a whole ``reproduce``: a SIGINT/SIGTERM ended a training batch cleanly.

    condlab's trainer turns the signal into a clean stop of the batch (its records are
    written, marked interrupted); an experiment that went on would train its next batch
    and judge half-trained runs, so the stop is raised again, for the whole command.
    """
    return KeyboardInterrupt(f"stopped while training {where}; the records trained so far are kept "
                             f"in {ctx.out} (no claims.json: nothing was judged)")


@dataclass(frozen=True)
class Experiment:
    """A reproducible experiment of the source documents."""

    name: str
    source: str
    shows: str
    run: Callable[[Context], ExperimentResult]
    dataset: str | None = None   # "mnist" / "cifar10" when real data are needed (fixed data)
    data_grid: bool = True       # False: the experiment draws its own data; init seeds only
