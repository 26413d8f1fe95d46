"""Write a diagram's regimes table, claims.json (verdicts) and figures; plotting only reads results."""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from .._io import atomic_write_json, atomic_write_text, provenance
from .._sweep_table import _csv
from ._diagram import (
    AGREEMENT,
    SLOPE_MARGIN,
    DiagramResult,
    DiagramSpec,
    PointFit,
    agreement,
    fit_points,
)
from ._param import BOUNDARY_MARGIN

REGIME_COLUMNS = ["gamma", "gamma_prime", "scheme", "slope", "slope_se", "residual", "widths", "runs",
                  "at_cap", "measured", "theory", "distance", "near_boundary", "agrees"]


def report(spec: DiagramSpec, sweep, out: Path, seconds: float) -> DiagramResult:
    """Fit every point, judge against the theory, write regimes.csv, claims.json and the figures."""
    fits = fit_points(sweep.rows)
    agree = agreement(fits)
    schemes = {f.scheme: {"gamma": f.gamma, "gamma_prime": f.gamma_prime, "slope": f.slope,
                          "measured": f.measured, "talk": f.theory, "holds": f.agrees}
               for f in fits if f.scheme}
    rows = [_row(f) for f in sorted(fits, key=lambda f: (f.scheme, f.gamma, f.gamma_prime))]
    atomic_write_text(out / "regimes.csv", _csv(rows, REGIME_COLUMNS))
    files = [out / "regimes.csv"]
    claims = _claims(spec, sweep, agree, schemes, seconds)
    atomic_write_json(out / "claims.json", claims)
    files.append(out / "claims.json")
    if fits:
        from ._plot import diagram_figure, rescaled_time_figure

        files += diagram_figure(fits, sweep.rows, out / "runs", out / "phase_diagram")
        files += rescaled_time_figure(sweep.rows, out / "runs", out / "rescaled_time")
    return DiagramResult(sweep, fits, agree, schemes, files, seconds)


def _row(f: PointFit) -> dict[str, Any]:
    row = asdict(f)
    row["widths"] = " ".join(str(w) for w in f.widths)
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}


def _claims(spec: DiagramSpec, sweep, agree: dict[str, Any], schemes: dict[str, Any],
            seconds: float) -> dict[str, Any]:
    verdicts = [{"claim": f"at least {AGREEMENT:.0%} of grid points farther than {BOUNDARY_MARGIN} from "
                          "the boundary have the theory's regime",
                 "measured": f"{agree['agree']}/{agree['counted']}", "holds": agree["holds"]}]
    for name, s in schemes.items():
        verdicts.append({"claim": f"{name} initialization is in the {s['talk']} regime (talk's table)",
                         "measured": f"{s['measured']} (slope {s['slope']:.3f})", "holds": s["holds"]})
    return {"spec": asdict(spec), "rules": {
                "slope": f"slope of log RD(theta_w) on log m; linear if < -{SLOPE_MARGIN}, condensed if "
                         f"> {SLOPE_MARGIN}, else critical",
                "near_boundary": f"distance to the boundary <= {BOUNDARY_MARGIN}: not counted",
                "at_cap": "runs at the step budget are classified by RD at the budget"},
            "agreement": agree, "schemes": schemes, "verdicts": verdicts,
            "sweep": {"trained": sweep.trained, "skipped": sweep.skipped, "failed": sweep.failed,
                      "pending": sweep.pending, "seconds": round(seconds, 2),
                      "train_seconds": round(sweep.train_seconds, 2),
                      "outside_training_share": round(1 - sweep.train_seconds / seconds, 3)
                      if seconds > 0 else None},
            "provenance": provenance()}


def load_neurons(runs_dir: Path, run: str) -> dict[str, np.ndarray]:
    with np.load(runs_dir / run / "neurons.npz") as z:
        return {k: z[k] for k in z.files}


def load_curve(runs_dir: Path, run: str) -> dict[str, np.ndarray]:
    with np.load(runs_dir / run / "curve.npz") as z:
        return {k: z[k] for k in z.files}
