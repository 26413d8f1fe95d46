"""``condlab phase-diagram``: sweep (gamma, gamma') x widths x seeds through the sweep engine, fit the
slope of log RD(theta_w) against log m at each point, compare the regime with the JMLR theorems.

Pre-registered (fixed before any diagram was looked at): a point's measured regime is 'linear' when
the fitted slope < -SLOPE_MARGIN, 'condensed' when > +SLOPE_MARGIN, else 'critical'; points within
BOUNDARY_MARGIN of the theory's boundary are 'near boundary' and not counted; the diagram agrees
with the theory when at least AGREEMENT (95 %) of the other points have the theory's regime.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..sweeps import HASH_CHARS, HASH_VERSION, Batch, Plan, PlannedRun, canonical_json
from ._param import BOUNDARY_MARGIN, SCHEMES, boundary_distance, theory_regime
from ._task import PER_RUN, SHARED, TASK
from ._train import AUTHORS_X, AUTHORS_Y

SLOPE_MARGIN = 0.05   # |slope| <= this: 'critical' (pre-registered)
AGREEMENT = 0.95      # share of points away from the boundary that must match the theory
MAX_ELEMENTS = 4_000_000  # runs x neurons x points per batch: bounds a batch's memory (~32 MB a tensor)
# A second, harder target (our choice): 4 points whose signs alternate, so the fit needs several
# kinks; condensed runs at small widths can reach the step budget (then classified by RD there).
HARDER_X = (-0.75, -0.25, 0.25, 0.75)
HARDER_Y = (0.6, -0.4, 0.8, -0.2)
HARDER_MAX_STEPS = 5_000
TARGETS = {"authors": (AUTHORS_X, AUTHORS_Y), "harder": (HARDER_X, HARDER_Y)}


@dataclass
class DiagramSpec:
    """What a diagram trains: the grid, widths, seeds, named schemes and the training setting."""

    name: str = "phase"
    gammas: list[float] = field(default_factory=lambda: _grid(0.25, 2.25, 9))
    gamma_primes: list[float] = field(default_factory=lambda: _grid(-0.5, 1.5, 9))
    widths: list[int] = field(default_factory=lambda: [1000, 10_000, 100_000])
    seeds: list[int] = field(default_factory=lambda: [0, 1])
    schemes: list[str] = field(default_factory=lambda: list(SCHEMES))
    target: str = "authors"
    activation: str = "relu"
    asi: bool = True
    tol: float = 1e-6
    max_steps: int = 20_000
    c: float = 1.0

    def training(self, m: int) -> dict[str, Any]:
        """The settings shared by every run of width m (one batch's config)."""
        if self.target not in TARGETS:
            raise ValueError(f"target '{self.target}' is not accepted: choose one of {', '.join(TARGETS)}")
        x, y = TARGETS[self.target]
        return {"task": "phase", "width": m, "activation": self.activation, "asi": self.asi,
                "x": list(x), "y": list(y), "tol": self.tol, "max_steps": self.max_steps, "c": self.c}


def _grid(lo: float, hi: float, k: int) -> list[float]:
    return [round(float(v), 6) for v in np.linspace(lo, hi, k)]


def run_hash(config: dict[str, Any]) -> str:
    """A run's identity, as for sweep runs: SHA-256 of its canonical JSON settings (16 hex digits)."""
    text = canonical_json({"condlab_run": HASH_VERSION, "config": config})
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_CHARS]


def preset_spec(mode: str, target: str = "authors") -> DiagramSpec:
    """'smoke' (5 x 5 grid off the boundary, widths 10^2..10^4, 1 seed: CI), 'quick' (9 x 9, widths
    10^3..10^5, 2 seeds) or 'full' (17 x 17, widths 10^3..3 10^5, 4 seeds).

    The harder target's budget is 5,000 steps: its condensed runs stall on a plateau (a few
    condensed neurons cannot fit four alternating points) and RD does not move there.
    """
    steps = HARDER_MAX_STEPS if target == "harder" else 20_000
    if mode == "smoke":
        return DiagramSpec(f"phase-smoke-{target}", [0.25, 0.75, 1.25, 1.75, 2.25],
                           [-0.5, 0.0, 0.5, 1.0, 1.5], [100, 1000, 10_000], [0], target=target,
                           max_steps=steps)
    if mode == "quick":
        return DiagramSpec(f"phase-quick-{target}", target=target, max_steps=steps)
    if mode == "full":
        return DiagramSpec(f"phase-full-{target}", _grid(0.25, 2.25, 17), _grid(-0.5, 1.5, 17),
                           [1000, 3000, 10_000, 30_000, 100_000, 300_000], [0, 1, 2, 3], target=target,
                           max_steps=steps)
    raise ValueError(f"mode '{mode}' is not accepted: choose smoke, quick or full")


def load_diagram_spec(path: str | Path) -> DiagramSpec:
    """A YAML mapping of DiagramSpec fields (gammas, gamma_primes, widths, seeds, ...) -> DiagramSpec."""
    from ..training import ConfigError

    raw = read_spec(path, DiagramSpec, "a spec")
    try:
        spec = DiagramSpec(**raw)
        spec.tol, spec.c, spec.max_steps = float(spec.tol), float(spec.c), int(spec.max_steps)
        spec.widths = [int(m) for m in spec.widths]
    except (TypeError, ValueError) as err:
        raise ConfigError(f"diagram spec '{path}': {err}") from None
    spec.training(1)  # checks the target
    return spec


def read_spec(path: str | Path, cls: type, what: str) -> dict[str, Any]:
    """The YAML mapping at `path`, its keys checked against the fields of the spec class `cls`."""
    from dataclasses import fields

    from ..training import ConfigError

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"diagram spec '{path}' does not exist")
    raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"diagram spec '{path}' is not a mapping of keys to values")
    raw.pop("task", None)  # written by spec_yaml
    names = [f.name for f in fields(cls)]
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise ConfigError(f"unknown diagram spec key '{unknown[0]}': {what} has keys {', '.join(names)}")
    return raw


def plan_diagram(spec: DiagramSpec) -> tuple[Plan, list[Batch]]:
    """Every run of the diagram (hashed like sweep runs) and the batches that train them."""
    points = [{"gamma": g, "gamma_prime": gp, "scheme": ""} for g in spec.gammas for gp in spec.gamma_primes]
    points += [{"gamma": SCHEMES[s].gamma, "gamma_prime": SCHEMES[s].gamma_prime, "scheme": s}
               for s in spec.schemes]
    copies = 2 if spec.asi else 1
    plan, batches = plan_points(
        spec, points, lambda m, shared: MAX_ELEMENTS // (m * copies * len(shared["x"])),
        lambda m, runs: 1000.0 * runs * (m + 200), TASK, PER_RUN)
    assert set(SHARED) <= set(plan.runs[0].config)
    return plan, batches


def plan_points(spec: Any, points: list[dict[str, Any]], per_batch: Callable[[int, dict], int],
                cost: Callable[[int, int], float], task: str, per_run: list[str]) -> tuple[Plan, list[Batch]]:
    """Runs of every point x seed at every width of `spec`, hashed like sweep runs, in batches of
    at most per_batch(m, shared settings) runs (cost(m, runs): the progress bar's weight)."""
    runs: list[PlannedRun] = []
    batches: list[Batch] = []
    for m in spec.widths:
        shared = spec.training(m)
        size = max(1, per_batch(m, shared))
        fields = [{**p, "seed": s} for p in points for s in spec.seeds]
        for start in range(0, len(fields), size):
            chunk = fields[start:start + size]
            hashes = [run_hash({**shared, **f}) for f in chunk]
            key = hashlib.sha256(canonical_json(hashes).encode()).hexdigest()[:HASH_CHARS]
            runs += [PlannedRun(h, key, {"width": m, **f}, {**shared, **f})
                     for h, f in zip(hashes, chunk, strict=True)]
            batches.append(Batch(key, shared, list(zip(hashes, chunk, strict=True)), 1000,
                                 cost(m, len(chunk)), task=task))
    plan = Plan(spec.name, runs, ["width", *per_run], 0, {b.key: [h for h, _ in b.runs] for b in batches})
    return plan, batches


@dataclass
class PointFit:
    """The regime of one (gamma, gamma') point (or named scheme) from its runs over widths."""

    gamma: float
    gamma_prime: float
    scheme: str
    slope: float
    intercept: float
    residual: float          # RMS of the fit's residuals in log RD
    slope_se: float          # standard error of the slope (nan with 2 points)
    widths: list[int]
    runs: int
    at_cap: int              # runs that stopped at the step budget (classified by RD there)
    measured: str
    theory: str
    distance: float          # to the theory's boundary
    near_boundary: bool
    agrees: bool | None      # None when near the boundary


def fit_points(rows: list[dict[str, Any]]) -> list[PointFit]:
    """Group finished runs by point; fit log RD(theta_w) = slope log m + c by least squares."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("status") == "complete" and r.get("rd_w") and r["rd_w"] > 0:
            groups.setdefault((r["gamma"], r["gamma_prime"], r["scheme"] or ""), []).append(r)
    return [_fit(key, runs) for key, runs in groups.items()]


def _fit(key: tuple, runs: list[dict[str, Any]]) -> PointFit:
    g, gp, scheme = key
    lx = np.log([r["width"] for r in runs])
    ly = np.log([r["rd_w"] for r in runs])
    widths = sorted({int(r["width"]) for r in runs})
    if len(widths) < 2:
        slope = intercept = residual = se = math.nan
    else:
        slope, intercept = (float(v) for v in np.polyfit(lx, ly, 1))
        resid = ly - (slope * lx + intercept)
        residual = float(np.sqrt(np.mean(resid**2)))
        dof = len(lx) - 2
        sxx = float(np.sum((lx - lx.mean()) ** 2))
        se = float(np.sqrt(np.sum(resid**2) / dof / sxx)) if dof > 0 and sxx > 0 else math.nan
    measured = ("unknown" if math.isnan(slope) else "linear" if slope < -SLOPE_MARGIN
                else "condensed" if slope > SLOPE_MARGIN else "critical")
    theory = SCHEMES[scheme].regime if scheme else theory_regime(g, gp)
    dist = boundary_distance(g, gp)
    near = dist <= BOUNDARY_MARGIN
    return PointFit(g, gp, scheme, float(slope), float(intercept), float(residual), float(se), widths,
                    len(runs), sum(1 for r in runs if not r.get("converged")), measured, theory, dist,
                    near, None if near and not scheme else measured == theory)


def agreement(fits: list[PointFit]) -> dict[str, Any]:
    """Agreement with the theory on grid points away from the boundary (schemes not counted)."""
    counted = [f for f in fits if not f.scheme and f.agrees is not None]
    ok = sum(1 for f in counted if f.agrees)
    share = ok / len(counted) if counted else math.nan
    return {"points": len([f for f in fits if not f.scheme]), "counted": len(counted), "agree": ok,
            "share": share, "required": AGREEMENT, "holds": bool(counted) and share >= AGREEMENT,
            "near_boundary": sum(1 for f in fits if not f.scheme and f.agrees is None),
            "disagree": [(f.gamma, f.gamma_prime, f.measured, f.theory, round(f.slope, 4))
                         for f in counted if not f.agrees]}


def spec_yaml(spec: DiagramSpec) -> str:
    return yaml.safe_dump({"task": "phase-diagram", **asdict(spec)}, sort_keys=False)


def run_sweep(spec: DiagramSpec, *, out: Path, executor: str = "local", address: str | None = None,
              progress: bool = False):
    """Train what is not done yet in `out` through the sweep engine; write results.csv -> SweepResult."""
    from ..records import folder_lock
    from ..sweeps import SweepResult, execute_batches, finished_row, make_executor, write_inputs, write_table

    start = time.perf_counter()
    plan, batches = plan_diagram(spec)
    runner = make_executor(executor, address)
    out = Path(out)
    runs_dir = out / "runs"
    done_rows = {r.hash: row for r in plan.runs if (row := finished_row(runs_dir / r.hash)) is not None}
    todo = [_without(b, done_rows) for b in batches]
    todo = [b for b in todo if b.runs]
    result = SweepResult(plan, out, skipped=len(done_rows))
    with folder_lock(out, "phase diagram"):  # one process per --out (the pid of the other is named)
        write_inputs(out, spec_yaml(spec), plan)
        execute_batches(runner, todo, runs_dir, result, done_rows, progress)
    result.pending = len(plan.runs) - result.skipped - result.trained - result.failed
    rows = [{**r.settings, "run": r.hash, **done_rows.get(r.hash, {"status": "pending"})} for r in plan.runs]
    columns = plan.columns + ["run", "status", "rd_w", "rd_a", "final_loss", "steps", "converged", "time",
                              "rescaled_time", "error"]
    result.rows, result.columns = rows, columns
    result.tables = write_table(rows, columns, out)
    result.seconds = time.perf_counter() - start
    return result




def _without(batch: Batch, done: dict[str, Any]) -> Batch:
    runs = [(h, f) for h, f in batch.runs if h not in done]
    return Batch(batch.key, batch.config, runs, batch.epochs, batch.cost * len(runs) / len(batch.runs),
                 task=batch.task)


def sweep_counts(sweep, seconds: float) -> dict[str, Any]:
    """What the diagram's sweep did, for claims.json: runs trained/skipped/failed/pending, times."""
    return {"trained": sweep.trained, "skipped": sweep.skipped, "failed": sweep.failed,
            "pending": sweep.pending, "seconds": round(seconds, 2),
            "train_seconds": round(sweep.train_seconds, 2),
            "outside_training_share": round(1 - sweep.train_seconds / seconds, 3) if seconds > 0 else None}
