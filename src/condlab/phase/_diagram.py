"""``condlab phase-diagram``: what a diagram trains (its spec), planned into runs and swept through the
sweep engine, for two layers (DiagramSpec) or three (DiagramSpec3).

A spec's grid is the (gamma, gamma') plane (for three layers at one gamma2) x widths x seeds, plus the
named schemes; every run is hashed like a sweep run, so a killed diagram resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..sweeps import HASH_CHARS, HASH_VERSION, Batch, Plan, PlannedRun, canonical_json
from ._depth import DEPTHS, Depth
from ._param import SCHEMES, SCHEMES3
from ._task import TASK
from ._train import AUTHORS_X, AUTHORS_Y

MAX_ELEMENTS = 4_000_000  # array elements per batch (Depth.elements): bounds its memory (~32 MB an array)
# A second, harder target (our choice): 4 points whose signs alternate, so the fit needs several
# kinks; condensed runs at small widths can reach the step budget (then classified by RD there).
HARDER_X = (-0.75, -0.25, 0.25, 0.75)
HARDER_Y = (0.6, -0.4, 0.8, -0.2)
HARDER_MAX_STEPS = 5_000
TARGETS = {"authors": (AUTHORS_X, AUTHORS_Y), "harder": (HARDER_X, HARDER_Y)}


def _grid(lo: float, hi: float, k: int) -> list[float]:
    return [round(float(v), 6) for v in np.linspace(lo, hi, k)]


@dataclass
class DiagramSpec:
    """What a two-layer diagram trains: the grid, widths, seeds, named schemes and the training setting."""

    layers = 2  # not a field: a two-layer spec has no `layers:` key
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

    @property
    def depth(self) -> Depth:
        return DEPTHS[self.layers]

    def training(self, m: int) -> dict[str, Any]:
        """The settings shared by every run of width m (one batch's config); checks target,
        activation and schemes."""
        from ..training import ConfigError

        depth = self.depth
        if self.target not in TARGETS:
            raise ConfigError(f"target '{self.target}' is not accepted: choose one of {', '.join(TARGETS)}")
        # a depth whose batches carry no activation trains ReLU only (three layers)
        if "activation" not in depth.shared and self.activation != "relu":
            raise ConfigError(f"activation '{self.activation}' is not accepted for --depth {depth.layers}: "
                              "only relu (the step's Hessian bound omits sigma'' terms)")
        unknown = [s for s in self.schemes if s not in depth.schemes]
        if unknown:
            raise ConfigError(f"scheme '{unknown[0]}' is not accepted: choose from "
                              f"{', '.join(depth.schemes)}")
        x, y = TARGETS[self.target]
        every = {"width": m, "activation": self.activation, "asi": self.asi, "x": list(x), "y": list(y),
                 "tol": self.tol, "max_steps": self.max_steps, "c": self.c}
        return {"task": depth.task, **{k: every[k] for k in depth.shared}}


@dataclass
class DiagramSpec3(DiagramSpec):
    """What a three-layer diagram trains: the (gamma, gamma') grid at one gamma2, widths, seeds, ...
    (DiagramSpec's fields, with three-layer defaults)."""

    name: str = "phase3"
    widths: list[int] = field(default_factory=lambda: [64, 128, 256, 512])
    schemes: list[str] = field(default_factory=lambda: list(SCHEMES3))
    max_steps: int = HARDER_MAX_STEPS
    gamma2: float = 0.0     # the slice's middle-layer coordinate
    layers: int = 3         # a field (unlike DiagramSpec's): a spec file may say `layers: 3`


SPECS: dict[int, type[DiagramSpec]] = {2: DiagramSpec, 3: DiagramSpec3}
# the presets: grids and seeds, then each depth's widths (and schemes); 'quick' is each spec's default
PRESETS = {
    "smoke": {"gammas": [0.25, 0.75, 1.25, 1.75, 2.25], "gamma_primes": [-0.5, 0.0, 0.5, 1.0, 1.5],
              "seeds": [0]},
    "quick": {},
    "full": {"gammas": _grid(0.25, 2.25, 17), "gamma_primes": _grid(-0.5, 1.5, 17), "seeds": [0, 1, 2, 3]},
}
PRESET_RUNS = {
    2: {"smoke": {"widths": [100, 1000, 10_000]},
        "full": {"widths": [1000, 3000, 10_000, 30_000, 100_000, 300_000]}},
    3: {"smoke": {"widths": [64, 128, 256], "schemes": []},   # no schemes: CI seconds
        "full": {"widths": [64, 128, 256, 512, 1024, 2048]}},
}


def preset_spec(mode: str, target: str = "authors", layers: int = 2) -> DiagramSpec:
    """A preset diagram. Two layers: 'smoke' (5 x 5 grid off the boundary, widths 10^2..10^4, 1 seed:
    CI), 'quick' (9 x 9, widths 10^3..10^5, 2 seeds) or 'full' (17 x 17, widths 10^3..3 10^5, 4 seeds).
    Three layers: 'smoke' (5 x 5, widths 64..256, 1 seed, no schemes), 'quick' (9 x 9 + 5 schemes,
    widths 64..512, 2 seeds) or 'full' (17 x 17 + schemes, widths 64..2048, 4 seeds).

    The harder target's budget is 5,000 steps: its condensed runs stall on a plateau (a few
    condensed neurons cannot fit four alternating points) and RD does not move there.
    """
    if mode not in PRESETS:
        raise ValueError(f"mode '{mode}' is not accepted: choose smoke, quick or full")
    cls = SPECS[layers]
    chosen = {k: list(v) for k, v in {**PRESETS[mode], **PRESET_RUNS[layers].get(mode, {})}.items()}
    if target == "harder":
        chosen["max_steps"] = HARDER_MAX_STEPS
    return cls(name=f"{cls.name}-{mode}-{target}", target=target, **chosen)


def preset_spec3(mode: str, target: str = "authors") -> DiagramSpec3:
    """The three-layer presets (preset_spec)."""
    return preset_spec(mode, target, layers=3)


_NUMBERS = {"tol": float, "c": float, "max_steps": int, "gamma2": float}  # YAML may give 1e3 for 1000


def load_diagram_spec(path: str | Path, cls: type[DiagramSpec] = DiagramSpec) -> DiagramSpec:
    """A YAML mapping of `cls`'s fields (gammas, gamma_primes, widths, seeds, ...) -> a spec; a
    three-layer spec (DiagramSpec3) may give `layers: 3`."""
    from ..training import ConfigError

    raw = read_spec(path, cls, f"a {cls.layers}-layer spec")
    try:
        spec = cls(**raw)
        for name, kind in _NUMBERS.items():
            if name in raw:
                setattr(spec, name, kind(raw[name]))
        spec.widths = [int(m) for m in spec.widths]
    except (TypeError, ValueError) as err:
        raise ConfigError(f"diagram spec '{path}': {err}") from None
    if spec.layers != cls.layers:
        raise ConfigError(f"diagram spec '{path}': layers {spec.layers} is not accepted here: {cls.layers}")
    check_ranges(spec, f"diagram spec '{path}'")
    spec.training(1)  # checks target, activation, schemes
    return spec


def check_ranges(spec: DiagramSpec, where: str) -> None:
    """Refuse, with one line naming the value, what would fail (or train nothing) later."""
    from .._outputs import check_name
    from ..training import ConfigError

    def bad(key: str, value: Any, rule: str) -> ConfigError:
        return ConfigError(f"{where}: {key}={value!r} is not accepted: {rule}")

    check_name(spec.name, f"{where}: name")
    for key in ("gammas", "gamma_primes", "widths", "seeds"):
        values = getattr(spec, key)
        if not isinstance(values, list) or not values:
            raise bad(key, values, "give a non-empty list")
        if not all(type(v) in (int, float) and math.isfinite(v) for v in values):
            raise bad(key, values, "give finite numbers")
        if len(set(values)) != len(values):
            raise bad(key, values, "it has repeated values (each would be trained twice)")
    if not all(m >= 1 for m in spec.widths):
        raise bad("widths", spec.widths, "each width must be an integer >= 1")
    if not all(isinstance(s, int) and s >= 0 for s in spec.seeds):
        raise bad("seeds", spec.seeds, "seeds are integers >= 0")
    for key, value in (("tol", spec.tol), ("c", spec.c)):
        if not 0 < value < math.inf:
            raise bad(key, value, "it must be a finite number > 0")
    if spec.max_steps < 1:
        raise bad("max_steps", spec.max_steps, "it must be an integer >= 1")
    if not isinstance(spec.schemes, list):
        raise bad("schemes", spec.schemes, "give a list of scheme names (or [])")


def read_spec(path: str | Path, cls: type, what: str) -> dict[str, Any]:
    """The YAML mapping at `path`, its keys checked against the fields of the spec class `cls`."""
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
        raise ConfigError(f"diagram spec '{path}': unknown key '{unknown[0]}': {what} has keys "
                          f"{', '.join(names)}")
    return raw


def spec_dict(spec: DiagramSpec) -> dict[str, Any]:
    """The spec's fields, the grid and its slice (three layers: gamma2) first, as spec.yaml has them."""
    d = asdict(spec)
    return {**{k: d.pop(k) for k in ("name", "gammas", "gamma_primes", *spec.depth.coords[2:])}, **d}


def spec_yaml(spec: DiagramSpec) -> str:
    return yaml.safe_dump({"task": "phase-diagram", **spec_dict(spec)}, sort_keys=False)


def run_hash(config: dict[str, Any]) -> str:
    """A run's identity, as for sweep runs: SHA-256 of its canonical JSON settings (16 hex digits)."""
    text = canonical_json({"condlab_run": HASH_VERSION, "config": config})
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_CHARS]


def plan_diagram(spec: DiagramSpec, yes: bool = False) -> tuple[Plan, list[Batch]]:
    """Every run of the diagram (hashed like sweep runs) and the batches that train them: the runs of
    every point x seed at every width, in batches of at most MAX_ELEMENTS array elements (counted
    first: more than MAX_RUNS only with `yes`)."""
    from ..sweeps import check_run_count

    points = len(spec.gammas) * len(spec.gamma_primes) + len(spec.schemes)
    check_run_count(points * len(spec.seeds) * len(spec.widths), [points, len(spec.seeds), len(spec.widths)],
                    f"diagram {spec.name}", yes)
    depth = spec.depth
    fixed = {k: getattr(spec, k) for k in depth.coords[2:]}  # three layers: the gamma2 of the slice
    points = [{"gamma": g, "gamma_prime": gp, **fixed, "scheme": ""}
              for g in spec.gammas for gp in spec.gamma_primes]
    points += [{**{k: getattr(depth.schemes[s], k) for k in depth.coords}, "scheme": s} for s in spec.schemes]
    runs: list[PlannedRun] = []
    batches: list[Batch] = []
    for m in spec.widths:
        shared = spec.training(m)
        size = max(1, MAX_ELEMENTS // depth.elements(m, 2 if spec.asi else 1, len(shared["x"])))
        todo = [{**p, "seed": s} for p in points for s in spec.seeds]
        for start in range(0, len(todo), size):
            chunk = todo[start:start + size]
            hashes = [run_hash({**shared, **f}) for f in chunk]
            key = hashlib.sha256(canonical_json(hashes).encode()).hexdigest()[:HASH_CHARS]
            runs += [PlannedRun(h, key, {"width": m, **f}, {**shared, **f})
                     for h, f in zip(hashes, chunk, strict=True)]
            batches.append(Batch(key, shared, list(zip(hashes, chunk, strict=True)), 1000,
                                 depth.cost(m, len(chunk)), task=TASK))
    columns = ["width", *depth.coords, "scheme", "seed"]
    return Plan(spec.name, runs, columns, 0, {b.key: [h for h, _ in b.runs] for b in batches}), batches


def run_sweep(spec: DiagramSpec, *, out: Path, executor: str = "local", address: str | None = None,
              progress: bool = False, yes: bool = False):
    """Train what is not done yet in `out` through the sweep engine; write results.csv -> SweepResult."""
    from ..records import folder_lock
    from ..sweeps import SweepResult, execute_batches, finished_row, make_executor, write_inputs, write_table

    start = time.perf_counter()
    plan, batches = plan_diagram(spec, yes)
    runner = make_executor(executor, address)
    out = Path(out)
    runs_dir = out / "runs"
    with folder_lock(out, "phase diagram"):  # one process per --out (the pid of the other is named)
        damaged: dict[str, str] = {}
        done_rows = {r.hash: row for r in plan.runs
                     if (row := finished_row(runs_dir / r.hash, damaged)) is not None}
        todo = [b for b in (_without(b, done_rows) for b in batches) if b.runs]
        result = SweepResult(plan, out, skipped=len(done_rows), damaged=damaged)
        execute_batches(runner, todo, runs_dir, result, done_rows, progress,
                        inputs=lambda: write_inputs(out, spec_yaml(spec), plan))
    result.pending = len(plan.runs) - result.skipped - result.trained - result.failed
    rows = [{**r.settings, "run": r.hash, **done_rows.get(r.hash, {"status": "pending"})} for r in plan.runs]
    result.rows, result.columns = rows, plan.columns + spec.depth.result_columns()
    result.tables = write_table(rows, result.columns, out)
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
