"""``condlab phase-diagram --layers 3``: sweep (gamma, gamma') x widths x seeds of three-layer networks
through the sweep engine; fit, per layer, the slope of log RD(theta_l) against log m.

Pre-registered, the same rules as the two-layer diagram (fixed before any three-layer run was
looked at): a layer's measured regime at a point is 'linear' when its slope < -SLOPE_MARGIN,
'condensed' when > +SLOPE_MARGIN, else 'critical'. What it is compared with are conjectures (the
two-layer theorems' regime at the same (gamma, gamma'); our lazy-training heuristic): agreement is
reported, not asserted as a result of the three-layer paper.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..sweeps import Batch, Plan
from ._diagram import SLOPE_MARGIN, TARGETS, _grid, _without, plan_points, read_spec
from ._param import BOUNDARY_MARGIN, boundary_distance
from ._task3 import PER_RUN3, SHARED3, TASK3
from ._three import LAYERS3, SCHEMES3, conjectured_regime, lazy_exponents

MAX_ELEMENTS3 = 4_000_000  # nets x m^2 per batch: bounds a batch's W2-sized arrays (~32 MB each)
MAX_STEPS3 = 5_000


@dataclass
class DiagramSpec3:
    """What a three-layer diagram trains: the (gamma, gamma') grid at one gamma2, widths, seeds."""

    name: str = "phase3"
    gammas: list[float] = field(default_factory=lambda: _grid(0.25, 2.25, 9))
    gamma_primes: list[float] = field(default_factory=lambda: _grid(-0.5, 1.5, 9))
    gamma2: float = 0.0
    widths: list[int] = field(default_factory=lambda: [64, 128, 256, 512])
    seeds: list[int] = field(default_factory=lambda: [0, 1])
    schemes: list[str] = field(default_factory=lambda: list(SCHEMES3))
    target: str = "authors"
    activation: str = "relu"
    asi: bool = True
    tol: float = 1e-6
    max_steps: int = MAX_STEPS3
    c: float = 1.0
    layers: int = 3

    def training(self, m: int) -> dict[str, Any]:
        """The settings shared by every run of width m (one batch's config)."""
        from ..training import ConfigError

        if self.target not in TARGETS:
            raise ConfigError(f"target '{self.target}' is not accepted: choose one of {', '.join(TARGETS)}")
        if self.activation != "relu":
            raise ConfigError(f"activation '{self.activation}' is not accepted for --layers 3: only relu "
                              "(the step's Hessian bound omits sigma'' terms)")
        unknown = [s for s in self.schemes if s not in SCHEMES3]
        if unknown:
            raise ConfigError(f"scheme '{unknown[0]}' is not accepted: choose from {', '.join(SCHEMES3)}")
        x, y = TARGETS[self.target]
        return {"task": "phase3", "width": m, "asi": self.asi, "x": list(x), "y": list(y),
                "tol": self.tol, "max_steps": self.max_steps, "c": self.c}


def preset_spec3(mode: str, target: str = "authors") -> DiagramSpec3:
    """'smoke' (5 x 5 grid, widths 64..256, 1 seed, no schemes: CI), 'quick' (9 x 9 + 5 schemes,
    widths 64..512, 2 seeds) or 'full' (17 x 17 + schemes, widths 64..2048, 4 seeds)."""
    if mode == "smoke":
        return DiagramSpec3(f"phase3-smoke-{target}", [0.25, 0.75, 1.25, 1.75, 2.25],
                            [-0.5, 0.0, 0.5, 1.0, 1.5], widths=[64, 128, 256], seeds=[0], schemes=[],
                            target=target)
    if mode == "quick":
        return DiagramSpec3(f"phase3-quick-{target}", target=target)
    if mode == "full":
        return DiagramSpec3(f"phase3-full-{target}", _grid(0.25, 2.25, 17), _grid(-0.5, 1.5, 17),
                            widths=[64, 128, 256, 512, 1024, 2048], seeds=[0, 1, 2, 3], target=target)
    raise ValueError(f"mode '{mode}' is not accepted: choose smoke, quick or full")


def load_diagram_spec3(path: str | Path) -> DiagramSpec3:
    """A YAML mapping of DiagramSpec3 fields -> DiagramSpec3 (`layers: 3` may be given)."""
    from ..training import ConfigError

    raw = read_spec(path, DiagramSpec3, "a three-layer spec")
    try:
        spec = DiagramSpec3(**raw)
        spec.tol, spec.c, spec.max_steps = float(spec.tol), float(spec.c), int(spec.max_steps)
        spec.gamma2 = float(spec.gamma2)
        spec.widths = [int(m) for m in spec.widths]
    except (TypeError, ValueError) as err:
        raise ConfigError(f"diagram spec '{path}': {err}") from None
    if spec.layers != 3:
        raise ConfigError(f"diagram spec '{path}': layers {spec.layers} is not accepted here: 3")
    spec.training(1)  # checks target, activation, schemes
    return spec


def plan_diagram3(spec: DiagramSpec3) -> tuple[Plan, list[Batch]]:
    """Every run of the diagram (hashed like sweep runs) and the batches that train them."""
    points = [{"gamma": g, "gamma_prime": gp, "gamma2": spec.gamma2, "scheme": ""}
              for g in spec.gammas for gp in spec.gamma_primes]
    points += [{"gamma": SCHEMES3[s].gamma, "gamma_prime": SCHEMES3[s].gamma_prime,
                "gamma2": SCHEMES3[s].gamma2, "scheme": s} for s in spec.schemes]
    copies = 2 if spec.asi else 1
    plan, batches = plan_points(spec, points, lambda m, shared: MAX_ELEMENTS3 // (m * m * copies),
                                lambda m, runs: 300.0 * runs * (m * m + 3000), TASK3, PER_RUN3)
    assert set(SHARED3) <= set(plan.runs[0].config)
    return plan, batches


@dataclass
class LayerFit:
    """The regime of one layer at one point (or named scheme) from its runs over widths."""

    gamma: float
    gamma_prime: float
    gamma2: float
    scheme: str
    layer: str               # w1, w2 or a
    slope: float
    slope_se: float
    residual: float          # RMS of the fit's residuals in log RD
    widths: list[int]
    runs: int
    at_cap: int
    measured: str
    two_layer: str           # the two-layer theorems' regime at (gamma, gamma'): a conjecture
    distance: float          # to the two-layer boundary
    near_boundary: bool
    agrees_two_layer: bool | None   # None near the boundary
    lazy_exponent: float     # our scaling heuristic's exponent for this layer (lazy_exponents)
    lazy_hidden: float       # the larger of the two hidden layers' (< 0: the lazy picture holds)


def fit_layers(rows: list[dict[str, Any]]) -> list[LayerFit]:
    """Group finished runs by point; per layer fit log RD = slope log m + c by least squares."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("status") == "complete":
            groups.setdefault((r["gamma"], r["gamma_prime"], r["gamma2"], r["scheme"] or ""), []).append(r)
    return [_fit(key, runs, layer) for key, runs in groups.items() for layer in LAYERS3]


def _line(lx: np.ndarray, ly: np.ndarray) -> tuple[float, float, float]:
    """Slope, its standard error and the RMS residual of a least-squares line (nan when undefined)."""
    if len(set(lx.tolist())) < 2:
        return math.nan, math.nan, math.nan
    slope, icpt = (float(v) for v in np.polyfit(lx, ly, 1))
    resid = ly - (slope * lx + icpt)
    dof, sxx = len(lx) - 2, float(np.sum((lx - lx.mean()) ** 2))
    se = float(np.sqrt(np.sum(resid**2) / dof / sxx)) if dof > 0 and sxx > 0 else math.nan
    return slope, se, float(np.sqrt(np.mean(resid**2)))


def regime_of(slope: float) -> str:
    """The pre-registered rule: linear below -SLOPE_MARGIN, condensed above +SLOPE_MARGIN."""
    if math.isnan(slope):
        return "unknown"
    return "linear" if slope < -SLOPE_MARGIN else "condensed" if slope > SLOPE_MARGIN else "critical"


def _fit(key: tuple, runs: list[dict[str, Any]], layer: str) -> LayerFit:
    g, gp, g2, scheme = key
    ok = [r for r in runs if r.get(f"rd_{layer}") and r[f"rd_{layer}"] > 0]
    slope, se, resid = _line(np.log([float(r["width"]) for r in ok]), np.log([r[f"rd_{layer}"] for r in ok]))
    measured = regime_of(slope)
    # the two-layer theorems are about input weights: no conjecture for the output layer a
    two = "" if layer == "a" else SCHEMES3[scheme].expected if scheme else conjectured_regime(g, gp)
    dist = boundary_distance(g, gp)
    near = (dist <= BOUNDARY_MARGIN and not scheme) or not two
    lazy = lazy_exponents(g, gp, g2)
    at_cap = sum(1 for r in ok if not r.get("converged"))
    return LayerFit(g, gp, g2, scheme, layer, float(slope), float(se), float(resid),
                    sorted({int(r["width"]) for r in ok}), len(ok), at_cap, measured, two, dist, near,
                    None if near else measured == two, lazy[layer], max(lazy["w1"], lazy["w2"]))


def compare(fits: list[LayerFit]) -> dict[str, Any]:
    """Per layer, on grid points: agreement with the two conjectures; points whose layers differ."""
    out: dict[str, Any] = {}
    grid = [f for f in fits if not f.scheme]
    for layer in LAYERS3:
        fl = [f for f in grid if f.layer == layer]
        counted = [f for f in fl if f.agrees_two_layer is not None]
        # the heuristic predicts: linear where this layer's and both hidden exponents < -margin;
        # growing RD (not linear) where this layer's exponent > +margin; nothing in between
        lazy_lin = [f for f in fl if max(f.lazy_exponent, f.lazy_hidden) < -BOUNDARY_MARGIN]
        lazy_not = [f for f in fl if f.lazy_exponent > BOUNDARY_MARGIN]
        out[layer] = {
            "two_layer": {"counted": len(counted), "agree": sum(1 for f in counted if f.agrees_two_layer),
                          "disagree": [(f.gamma, f.gamma_prime, f.measured, f.two_layer, round(f.slope, 3))
                                       for f in counted if not f.agrees_two_layer]},
            "lazy": {"linear_predicted": len(lazy_lin),
                     "measured_linear": sum(1 for f in lazy_lin if f.measured == "linear"),
                     "not_linear_predicted": len(lazy_not),
                     "measured_not_linear": sum(1 for f in lazy_not if f.measured != "linear")},
            "regimes": {r: sum(1 for f in fl if f.measured == r)
                        for r in ("linear", "critical", "condensed")},
        }
    by_point: dict[tuple, dict[str, str]] = {}
    for f in grid:
        by_point.setdefault((f.gamma, f.gamma_prime), {})[f.layer] = f.measured
    differ = [(g, gp, v["w1"], v["w2"]) for (g, gp), v in sorted(by_point.items())
              if "w1" in v and "w2" in v and v["w1"] != v["w2"]]
    out["hidden_layers_differ"] = {"points": len(by_point), "differ": len(differ), "where": differ}
    return out


def spec3_yaml(spec: DiagramSpec3) -> str:
    return yaml.safe_dump({"task": "phase-diagram", **asdict(spec)}, sort_keys=False)


RESULT_COLUMNS3 = ["run", "status", "rd_w1", "rd_w2", "rd_a", "final_loss", "steps", "converged", "time",
                   "error"]


def run_sweep3(spec: DiagramSpec3, *, out: Path, executor: str = "local", address: str | None = None,
               progress: bool = False):
    """Train what is not done yet in `out` through the sweep engine; write results.csv -> SweepResult."""
    import time

    from ..records import folder_lock
    from ..sweeps import SweepResult, execute_batches, finished_row, make_executor, write_inputs, write_table

    start = time.perf_counter()
    plan, batches = plan_diagram3(spec)
    runner = make_executor(executor, address)
    out = Path(out)
    runs_dir = out / "runs"
    with folder_lock(out, "phase diagram"):  # one process per --out (the pid of the other is named)
        done_rows = {r.hash: row for r in plan.runs if (row := finished_row(runs_dir / r.hash)) is not None}
        todo = [b for b in (_without(b, done_rows) for b in batches) if b.runs]
        result = SweepResult(plan, out, skipped=len(done_rows))
        write_inputs(out, spec3_yaml(spec), plan)
        execute_batches(runner, todo, runs_dir, result, done_rows, progress)
    result.pending = len(plan.runs) - result.skipped - result.trained - result.failed
    rows = [{**r.settings, "run": r.hash, **done_rows.get(r.hash, {"status": "pending"})} for r in plan.runs]
    result.rows, result.columns = rows, plan.columns + RESULT_COLUMNS3
    result.tables = write_table(rows, result.columns, out)
    result.seconds = time.perf_counter() - start
    return result
