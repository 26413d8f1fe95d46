"""Run a diagram of either depth, then write its regimes table, claims.json (verdicts) and figures;
``condlab phase-diagram``'s command."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._display import ShownAsPage
from .._outputs import folder_for
from ..records import atomic_write_json, atomic_write_text, provenance
from ..sweeps import csv_text
from ._diagram import (
    SPECS,
    DiagramSpec,
    load_diagram_spec,
    preset_spec,
    run_sweep,
    spec_dict,
    spec_yaml,
    sweep_counts,
)


@dataclass
class DiagramResult(ShownAsPage):
    """What ``phase_diagram`` did: the sweep's account, the fits, the verdicts, files written.

    Two layers: `agreement` with the theory and the `schemes`' regimes; three layers: the per-layer
    `comparison` with the conjectures."""

    sweep: Any
    fits: list[Any]
    files: list[Path]
    seconds: float
    agreement: dict[str, Any] = field(default_factory=dict)
    schemes: dict[str, Any] = field(default_factory=dict)
    comparison: dict[str, Any] = field(default_factory=dict)


def phase_diagram(spec: DiagramSpec, *, out: str | Path, executor: str = "local", address: str | None = None,
                  progress: bool = False, overwrite: bool = False, yes: bool = False) -> DiagramResult:
    """Train what is not done yet in `out` (through the sweep engine), fit, judge, draw, write.

    `spec`: a DiagramSpec (two layers, JMLR 2021) or a DiagramSpec3 (three layers, per layer).
    Writes OUT/results.csv (one row per run), regimes.csv, claims.json, phase_diagram.png/.svg (and,
    for two layers, rescaled_time.png/.svg); see docs/phase_diagram.md. An `out` holding another
    kind of result is refused, one holding a diagram of another spec unless `overwrite`.
    """
    from .._outputs import check_result_folder

    earlier = Path(out) / "spec.yaml"
    same = earlier.is_file() and earlier.read_text() == spec_yaml(spec)
    check_result_folder(Path(out), "phase diagram", same, overwrite)
    start = time.perf_counter()
    sweep = run_sweep(spec, out=Path(out), executor=executor, address=address, progress=progress, yes=yes)
    return report(spec, sweep, Path(out), time.perf_counter() - start)


def report(spec: DiagramSpec, sweep, out: Path, seconds: float) -> DiagramResult:
    """Fit every point (and layer), judge, write regimes.csv, claims.json and the figures."""
    depth = spec.depth
    fits = depth.fit(sweep.rows)
    judged = depth.judge(fits)
    rows = [_row(f) for f in sorted(fits, key=lambda f: (f.scheme, f.gamma, f.gamma_prime, f.layer))]
    atomic_write_text(out / "regimes.csv", csv_text(rows, list(depth.regime_columns)))
    claims = {"spec": spec_dict(spec), **depth.claims(fits, judged), "sweep": sweep_counts(sweep, seconds),
              "provenance": provenance()}
    atomic_write_json(out / "claims.json", claims)
    files = [out / "regimes.csv", out / "claims.json"]
    if fits:
        files += depth.draw(fits, sweep.rows, out / "runs", out)
    return DiagramResult(sweep, fits, files, seconds, **judged)


def _row(f: Any) -> dict[str, Any]:
    row = asdict(f)
    row["widths"] = " ".join(str(w) for w in f.widths)
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}


def phase_diagram_cli(args) -> int:
    """``condlab phase-diagram``: run, judge, print a short account; exit 3 when a batch failed."""
    import sys

    spec = _cli_spec(args)
    out = Path(args.out) if args.out else folder_for("runs", spec.name, "diagram name")
    if args.dry_run:
        return _dry_run(spec, out, args)
    res = phase_diagram(spec, out=out, executor=args.executor, address=args.address,
                        progress=not args.no_progress and sys.stderr.isatty(), overwrite=args.overwrite,
                        yes=args.yes)
    for line in res.sweep.damage_lines():
        print(f"condlab: warning: {line}", file=sys.stderr)
    for error in res.sweep.errors:
        print(f"condlab: error: {error}", file=sys.stderr)
    if args.json:
        print((out / "claims.json").read_text())
    else:
        print(res.sweep.summary().replace(f"table: {res.sweep.tables[-1]}", f"runs: {out / 'results.csv'}"))
        for line in spec.depth.account(res):
            print(line)
        print(f"written: {out / 'phase_diagram.png'}, regimes.csv, claims.json ({res.seconds:.1f} s)")
    if res.sweep.interrupted:
        print(f"condlab: interrupted; finished runs are kept in {out}; run again to resume", file=sys.stderr)
        return 130
    return 3 if res.sweep.failed else 0


def _dry_run(spec: DiagramSpec, out: Path, args) -> int:
    """``phase-diagram --dry-run``: count the runs and those done in `out`; write nothing."""
    from .._guards import duration
    from .._outputs import check_result_folder
    from ..sweeps import finished_row, make_executor
    from ._diagram import plan_diagram

    make_executor(args.executor, address=args.address)  # a name or option the run would refuse
    earlier = out / "spec.yaml"
    same = earlier.is_file() and earlier.read_text() == spec_yaml(spec)
    check_result_folder(out, "phase diagram", same, args.overwrite)
    plan, batches = plan_diagram(spec, args.yes)
    finished = {r.hash for r in plan.runs if finished_row(out / "runs" / r.hash) is not None}
    done = len(finished)
    cost = sum(b.cost * sum(h not in finished for h, _ in b.runs) / len(b.runs) for b in batches)
    seconds = cost * spec.depth.seconds_per_cost
    if args.json:
        print(json.dumps({"diagram": spec.name, "runs": len(plan.runs), "batches": len(batches),
                          "done": done, "to_train": len(plan.runs) - done, "estimated_seconds": seconds,
                          "dry_run": True}, indent=2))
        return 0
    print(f"diagram {spec.name}: {len(plan.runs)} runs in {len(batches)} batches; {done} already done, "
          f"{len(plan.runs) - done} to train, about {duration(seconds)} on one CPU core (a rough estimate "
          "from measured step times and typical steps to convergence, not a measurement; dry run: "
          "nothing written)")
    return 0


def _cli_spec(args) -> DiagramSpec:
    """The spec the command line asks for: --spec FILE or a preset, of --depth (else the spec's)."""
    from ..training import ConfigError

    layers = args.layers if getattr(args, "layers", None) is not None else \
        _spec_layers(args.spec) if args.spec else 2  # not given: the spec's `layers:`, else 2
    if layers not in SPECS:
        raise ConfigError(f"--depth {layers} is not accepted: choose 2 (JMLR 2021) or 3 (empirical)")
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    spec = load_diagram_spec(args.spec, SPECS[layers]) if args.spec else \
        preset_spec(mode, args.target, layers)
    gamma2 = getattr(args, "gamma2", None)
    if gamma2 is not None and "gamma2" not in spec.depth.coords:
        raise ConfigError(f"--gamma2 {gamma2} is not accepted with --depth {layers}: only with 3")
    if gamma2 is not None and gamma2 != spec.gamma2:
        spec.gamma2 = float(gamma2)
        spec.name += f"-gamma2{spec.gamma2:+g}"
    return spec


def _spec_layers(path: str) -> int:
    """The `layers:` of a diagram spec file (2 when absent or unreadable: the loader reports why)."""
    import yaml

    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return 2
    return int(raw.get("layers", 2)) if isinstance(raw, dict) and isinstance(raw.get("layers", 2), int) else 2


Diagram3Result = DiagramResult  # the three-layer names of the shared steps
phase_diagram3 = phase_diagram
