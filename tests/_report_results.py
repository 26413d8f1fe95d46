"""Small results of every kind `condlab report` reads, built in seconds (tiny trains, few epochs).

Shared by tests/test_report.py and tests/test_report_browser.py through the session fixture
`report_results` (tests/conftest.py): `Built` makes each result the first time a test asks for
it, once per test session. Each builder writes into the folder it is given.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

import condlab

TINY = ["model.width=12", "data.n=16", "train.epochs=30", "train.snapshots=every:5"]


def batch(out: Path) -> Path:
    """A `condlab train` batch of 3 fig3-like runs; the first holds a stored analysis."""
    from condlab.analysis import analyze_run

    cfg = condlab.preset("fig3").with_overrides([*TINY, "train.seeds=[0,1,2]"])
    result = condlab.train(cfg, out=out / "batch", progress=False)
    run = result[0]
    analysis = analyze_run(run, epoch=10, replay=False)
    analysis.write(run.path / "analysis" / analysis.name)
    return out / "batch"


def sweep(out: Path, seeds: int = 2, epochs: int = 10) -> tuple[Path, object]:
    """A sweep over two widths x `seeds` init seeds (SweepResult too)."""
    spec = {"name": "tiny", "base": "fig3",
            "set": {"train.epochs": epochs, "train.snapshots": f"every:{epochs}", "data.n": 16},
            "grid": {"model.width": [6, 12]}, "seeds": seeds}
    result = condlab.sweep(spec, out=out / "sweep", progress=False)
    return out / "sweep", result


def sweep256(out: Path) -> Path:
    """256 runs of the Fig. 3 network in one batch, 5 epochs each."""
    spec = {"name": "s256", "base": "fig3", "set": {"train.epochs": 5, "train.snapshots": "every:5"},
            "seeds": 256}
    condlab.sweep(spec, out=out / "sweep256", progress=False)
    return out / "sweep256"


def experiment(out: Path) -> tuple[Path, object]:
    """`condlab reproduce fig3 --quick` on one data draw (5 activations, 1 init seed); the result too."""
    from condlab.reproduce import reproduce

    result = reproduce("fig3", quick=True, seeds=[0], data_seeds=[0], out=out / "reproduce")
    return out / "reproduce" / "fig3", result


def collection(out: Path) -> Path:
    """A `reproduce all`-like folder: fig3 (quick, one draw) and fig2, NOT RUN (no CIFAR-10 here)."""
    from condlab.reproduce import reproduce, write_summary

    folder = out / "reproduce-all"
    results = [reproduce("fig3", quick=True, seeds=[0], data_seeds=[0], out=folder),
               reproduce("fig2", quick=True, out=folder, data_dir=out)]
    write_summary(results, folder)
    return folder


def phase(out: Path) -> Path:
    """A 2 x 2 phase diagram at widths 10 and 100 with one named scheme."""
    from condlab.phase import DiagramSpec, phase_diagram

    spec = DiagramSpec("phase-tiny", [0.25, 1.75], [0.0, 1.0], [10, 100], [0], ["lecun"], max_steps=3000)
    phase_diagram(spec, out=out / "phase")
    return out / "phase"


def inspected(out: Path) -> Path:
    """`condlab inspect --out` of a small MLP (state_dict)."""
    from condlab._inspect import inspect_model, write_report

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 24), nn.Tanh(), nn.Linear(24, 8), nn.Tanh(), nn.Linear(8, 1))
    write_report(inspect_model(model.state_dict()), out / "inspect", source="tiny.pt")
    return out / "inspect"


def tracked(out: Path) -> Path:
    """A Tracker record with snapshots of a small MLP trained 20 steps."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(32, 3)
    y = x.sin().sum(1, keepdim=True)
    with condlab.Tracker(model, every=5, out=out / "tracker", snapshots=True) as tracker:
        for epoch in range(20):
            loss = (model(x) - y).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            tracker.step(epoch, loss)
    return out / "tracker"


class Built:
    """kind -> folder of that result, built on first use: run, batch, experiment, collection, sweep,
    phase, inspect, tracker; and experiment_result / sweep_result, the objects the API returned."""

    def __init__(self, out: Path):
        self.out, self.made = out, {}

    def __getitem__(self, kind: str):
        if kind not in self.made:
            self.made.update(self._build(kind))
        return self.made[kind]

    def _build(self, kind: str) -> dict:
        if kind in ("run", "batch"):
            folder = batch(self.out)
            return {"batch": folder, "run": folder / "seed0"}
        if kind in ("experiment", "experiment_result"):
            folder, result = experiment(self.out)
            return {"experiment": folder, "experiment_result": result}
        if kind in ("sweep", "sweep_result"):
            folder, result = sweep(self.out)
            return {"sweep": folder, "sweep_result": result}
        builders = {"collection": collection, "phase": phase, "inspect": inspected, "tracker": tracked}
        return {kind: builders[kind](self.out)}
