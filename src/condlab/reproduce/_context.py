"""What every experiment gets: seeds, quick mode, output folder, device, data directory."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..plotting import save_figure
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
    epochs_factor: int = 1  # diagnostic variants that need longer training (GD at small init)
    executor: str = "local"  # experiments built on condlab.sweep (facilitators): local or ray
    address: str | None = None  # the Ray head for executor "ray" (None: a local Ray cluster)

    @property
    def replay(self) -> bool:
        """Whether experiments compute the leading-order replay (not with --quick)."""
        return self.analyze_replay and not self.quick

    def epoch(self, run: Run, caption: int) -> int:
        """The epoch at which a claim is measured: the caption's, or the initial-stage one."""
        if self.epoch_policy == "caption":
            return caption
        from ..analysis import default_epoch

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
            if self.epochs_factor != 1:
                batch = batch.with_overrides([f"train.epochs={batch.train.epochs * self.epochs_factor}"])
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                runs += list(train(batch, out=folder, progress=self.progress))
            self.warnings += [f"{tag} data {d}: {w.message}" for w in caught]
        return runs

    def save(self, result: ExperimentResult, fig, name: str) -> None:
        """Write a figure as PNG and SVG next to claims.json and list it in the result."""
        result.figures += [str(p) for p in save_figure(fig, self.out / name)]


@dataclass(frozen=True)
class Experiment:
    """A reproducible experiment of the source documents."""

    name: str
    source: str
    shows: str
    run: Callable[[Context], ExperimentResult]
    dataset: str | None = None   # "mnist" / "cifar10" when real data are needed (fixed data)
    data_grid: bool = True       # False: the experiment draws its own data; init seeds only
