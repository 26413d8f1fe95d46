"""What differs between the two- and the three-layer phase diagram, in one object per depth.

Everything else (planning, the sweep, the training loop, fits, claims, the CLI) is one
implementation that asks a Depth: the network and its coordinates, the named schemes, which layers'
RD a run records, how runs are batched, and how the fits are judged (the JMLR theorems for two
layers; conjectures for three) and drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._net2 import TwoLayer
from ._net3 import ThreeLayer
from ._param import SCHEMES, SCHEMES3, rescaled_time, scales, scales3
from ._plot import figures2, figures3
from ._regimes import account2, account3, claims2, claims3, fit_layers, fit_points, judge2, judge3
from ._runs import PhaseRun, Runs
from ._train import converge


@dataclass(frozen=True)
class Depth:
    """One depth of the diagram: what its runs train and record, and how its fits are judged."""

    layers: int                         # 2 or 3
    task: str                           # a batch config's "task": part of every run's hash
    net: type[Runs]                     # the network (its .LAYERS: the layers whose RD a run records)
    coords: tuple[str, ...]             # a point's coordinates, as a run's fields name them
    schemes: dict[str, Any]             # the named initializations
    grid_scales: Callable[[dict[str, Any], int], Any]   # a grid point's scales at width m
    shared: tuple[str, ...]             # the settings in a batch's config (one value per batch)
    elements: Callable[[int, int, int], int]    # one run's array elements (m, copies, points)
    cost: Callable[[int, int], float]   # a batch's weight on the progress bar (m, runs)
    # seconds of one core per unit of cost: a dry run's rough time estimate, from the step times
    # and typical steps to convergence of docs/phase_diagram.md ("Cost"; measured at load ~8.5)
    seconds_per_cost: float
    rescaled: Callable[[float, Any], float] | None  # t_bar of a run (time, scales); two layers only
    fit: Callable[[list[dict[str, Any]]], list]     # finished rows -> fits (per point, or per layer)
    judge: Callable[[list], dict[str, Any]]         # fits -> the result's verdict fields
    claims: Callable[[list, dict[str, Any]], dict[str, Any]]   # -> claims.json's rules and verdicts
    account: Callable[[Any], list[str]]             # a DiagramResult -> the terminal's lines
    figures: Callable[..., list]                    # (depth, fits, rows, runs dir, out) -> files
    regime_columns: tuple[str, ...]                 # regimes.csv

    def run_scales(self, fields: dict[str, Any], m: int) -> Any:
        """A run's scales: the named scheme's at width m (d = 1), else the grid point's."""
        if fields.get("scheme"):
            return self.schemes[fields["scheme"]].scales(m, 1)
        return self.grid_scales(fields, m)

    def settings(self, config: dict[str, Any]) -> dict[str, Any]:
        """The trainer's keywords from a batch's config."""
        return {"x": tuple(config["x"]), "y": tuple(config["y"]),
                "activation": config.get("activation", "relu"), "asi": bool(config["asi"]),
                "tol": float(config["tol"]), "max_steps": int(config["max_steps"]), "c": float(config["c"])}

    def train(self, m: int, scales: list[Any], seeds: list[int], **settings: Any):
        return converge(self.net, m, scales, seeds, **settings)

    def summary(self, run: PhaseRun, s: Any) -> dict[str, Any]:
        """The table row of one run."""
        row = {**{f"rd_{layer}": run.rd[layer] for layer in self.net.LAYERS}, "final_loss": run.loss,
               "steps": run.steps, "converged": run.converged, "time": run.time}
        if self.rescaled is not None:
            row["rescaled_time"] = self.rescaled(run.time, s)
        return row

    def result_columns(self) -> list[str]:
        """results.csv's columns after the plan's (width, coordinates, scheme, seed)."""
        return ["run", "status", *(f"rd_{layer}" for layer in self.net.LAYERS), "final_loss", "steps",
                "converged", "time", *(["rescaled_time"] if self.rescaled else []), "error"]

    def draw(self, fits: list, rows: list[dict[str, Any]], runs_dir, out) -> list:
        return self.figures(self, fits, rows, runs_dir, out)


TWO = Depth(
    layers=2, task="phase", net=TwoLayer, coords=("gamma", "gamma_prime"), schemes=SCHEMES,
    grid_scales=lambda f, m: scales(f["gamma"], f["gamma_prime"], m),
    shared=("width", "activation", "asi", "x", "y", "tol", "max_steps", "c"),
    elements=lambda m, copies, n: m * copies * n,         # the (runs, points, neurons) arrays
    cost=lambda m, runs: 1000.0 * runs * (m + 200),
    seconds_per_cost=5e-9,   # ~450 steps of 1.15 ms per 10^5 neurons (the compiled step)
    rescaled=rescaled_time, fit=fit_points, judge=judge2, claims=claims2, account=account2,
    figures=figures2,
    regime_columns=("gamma", "gamma_prime", "scheme", "slope", "slope_se", "residual", "widths", "runs",
                    "at_cap", "measured", "theory", "distance", "near_boundary", "agrees"))

THREE = Depth(
    layers=3, task="phase3", net=ThreeLayer, coords=("gamma", "gamma_prime", "gamma2"), schemes=SCHEMES3,
    grid_scales=lambda f, m: scales3(f["gamma"], f["gamma_prime"], m, f.get("gamma2", 0.0)),
    shared=("width", "asi", "x", "y", "tol", "max_steps", "c"),  # ReLU only: no activation (nor in the hash)
    elements=lambda m, copies, n: m * m * copies,          # the W2-sized arrays
    cost=lambda m, runs: 300.0 * runs * (m * m + 3000),
    seconds_per_cost=1.7e-8,  # ~250 steps of 21 ms at m = 1024, growing as m^2
    rescaled=None, fit=fit_layers, judge=judge3, claims=claims3, account=account3, figures=figures3,
    regime_columns=("gamma", "gamma_prime", "gamma2", "scheme", "layer", "slope", "slope_se", "residual",
                    "widths", "runs", "at_cap", "measured", "two_layer", "distance", "near_boundary",
                    "agrees_two_layer", "lazy_exponent", "lazy_hidden"))

DEPTHS = {depth.layers: depth for depth in (TWO, THREE)}
