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


TINY_FIG3 = [("tanh", 1), ("xtanh", 2)]


def _tiny_fig3(folder: Path):
    """A Fig. 3-like experiment folder, as `condlab reproduce fig3` writes it, at a fraction of the
    size: two activations, two init seeds, 12 neurons, 30 epochs (not a whole experiment, which
    the default suite may not train: tests/conftest.py). Returns the ExperimentResult."""
    from condlab.analysis import cosine_order, count_orientations
    from condlab.plotting import cosine_panels, save_figure
    from condlab.reproduce import ExperimentResult
    from condlab.reproduce._claims import bound_outcome, count_outcome

    res = ExperimentResult("fig3", "NeurIPS 2022, Fig. 3 (tiny)", [0, 1], data_seeds=[0], provisional=True)
    res.settings = {"m": 12, "epochs": 30, "activations": [a for a, _ in TINY_FIG3]}
    panels = []
    for act, lines in TINY_FIG3:
        cfg = condlab.preset("fig3" if act == "tanh" else f"fig3-{act}").with_overrides(
            [*TINY, "train.seeds=[0,1]"])
        runs = condlab.train(cfg, out=folder / "runs" / act, progress=False)
        claim = res.claim(f"fig3/{act}/layer1", f"{act}: {lines} line(s) at epoch 30", lines=lines)
        bound = res.claim(f"fig3/{act}/bound", f"{act}: at most p = {lines} line(s)", max_lines=lines)
        for run in runs:
            o = count_orientations(run.layer("layer1", 30))
            for made, outcome in ((claim, count_outcome), (bound, bound_outcome)):
                ok, reason = outcome(o, lines)
                made.record(ok, run=run, reason=reason, lines=o.n_lines, directions=o.n_directions)
        W = runs[0].layer("layer1", 30)
        panels.append((act, W, cosine_order(W)))
    res.figures += [str(p) for p in save_figure(cosine_panels(panels), folder / "fig3")]
    res.write(folder)
    return res


def experiment(out: Path) -> tuple[Path, object]:
    """A reproduce experiment folder (Fig. 3-like, tiny) and its ExperimentResult."""
    result = _tiny_fig3(out / "reproduce" / "fig3")
    return out / "reproduce" / "fig3", result


def collection(out: Path) -> Path:
    """A `reproduce all`-like folder: the tiny fig3 and fig2, NOT RUN (no CIFAR-10)."""
    from condlab.reproduce import ExperimentResult, write_summary

    folder = out / "reproduce-all"
    fig2 = ExperimentResult("fig2", "NeurIPS 2022, Fig. 2", [0], status="not run",
                            notes=["NOT RUN: CIFAR-10 not found (a test: no data here)"])
    fig2.write(folder / "fig2")
    write_summary([_tiny_fig3(folder / "fig3"), fig2], folder)
    return folder


def phase(out: Path) -> Path:
    """A 2 x 2 phase diagram at widths 10 and 100 with one named scheme."""
    from condlab.phase import DiagramSpec, phase_diagram

    spec = DiagramSpec("phase-tiny", [0.25, 1.75], [0.0, 1.0], [10, 100], [0], ["lecun"], max_steps=3000)
    phase_diagram(spec, out=out / "phase")
    return out / "phase"


def inspected(out: Path) -> Path:
    """`condlab inspect --out` of a small MLP (state_dict)."""
    from condlab.models._inspect import inspect_model, write_report

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
