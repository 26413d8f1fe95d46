"""A diagram's regimes: slope fits over widths, the pre-registered rule, the verdicts, for either depth.

Pre-registered (fixed before any diagram was looked at; the three-layer rules before any three-layer
run): a point's (for three layers: a layer's) measured regime is 'linear' when the slope of log RD
against log m < -SLOPE_MARGIN, 'condensed' when > +SLOPE_MARGIN, else 'critical'.

Two layers: compared with the JMLR theorems; points within BOUNDARY_MARGIN of the theory's boundary
are 'near boundary' and not counted; the diagram agrees with the theory when at least AGREEMENT
(95 %) of the other points have the theory's regime.
Three layers: compared with conjectures (the two-layer theorems' regime at the same (gamma, gamma');
our lazy-training heuristic): agreement is reported, not asserted as a result of the three-layer paper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._param import BOUNDARY_MARGIN, SCHEMES, SCHEMES3, boundary_distance, lazy_exponents, theory_regime

SLOPE_MARGIN = 0.05   # |slope| <= this: 'critical' (pre-registered)
AGREEMENT = 0.95      # share of points away from the boundary that must match the theory


def _line(lx: np.ndarray, ly: np.ndarray) -> tuple[float, float, float, float]:
    """Slope, intercept, the slope's standard error and the RMS residual of a least-squares line
    (nan when fewer than two distinct x)."""
    if len(set(lx.tolist())) < 2:
        return math.nan, math.nan, math.nan, math.nan
    slope, icpt = (float(v) for v in np.polyfit(lx, ly, 1))
    resid = ly - (slope * lx + icpt)
    dof, sxx = len(lx) - 2, float(np.sum((lx - lx.mean()) ** 2))
    se = float(np.sqrt(np.sum(resid**2) / dof / sxx)) if dof > 0 and sxx > 0 else math.nan
    return slope, icpt, se, float(np.sqrt(np.mean(resid**2)))


def regime_of(slope: float) -> str:
    """The pre-registered rule: linear below -SLOPE_MARGIN, condensed above +SLOPE_MARGIN."""
    if math.isnan(slope):
        return "unknown"
    return "linear" if slope < -SLOPE_MARGIN else "condensed" if slope > SLOPE_MARGIN else "critical"


def _groups(rows: list[dict[str, Any]], coords: tuple[str, ...]) -> dict[tuple, list[dict[str, Any]]]:
    """Finished runs grouped by point: (coordinates..., scheme)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("status") == "complete":
            groups.setdefault((*(r[k] for k in coords), r["scheme"] or ""), []).append(r)
    return groups


def _layer_line(runs: list[dict[str, Any]], layer: str) -> tuple[list[dict[str, Any]], tuple]:
    """The runs with a positive RD of `layer`, and the line through (log m, log RD) of them."""
    ok = [r for r in runs if r.get(f"rd_{layer}") and r[f"rd_{layer}"] > 0]
    return ok, _line(np.log([float(r["width"]) for r in ok]), np.log([r[f"rd_{layer}"] for r in ok]))


def _widths(runs: list[dict[str, Any]]) -> list[int]:
    return sorted({int(r["width"]) for r in runs})


# --- two layers: the JMLR theorems -----------------------------------------------------------------

@dataclass
class PointFit:
    """The regime of one (gamma, gamma') point (or named scheme) from its runs over widths."""

    layer: ClassVar[str] = "w"  # the input weights (with bias): the two-layer diagram's one layer
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
    fits = []
    for (g, gp, scheme), runs in _groups(rows, ("gamma", "gamma_prime")).items():
        ok, (slope, icpt, se, resid) = _layer_line(runs, "w")
        if not ok:
            continue
        measured = regime_of(slope)
        theory = SCHEMES[scheme].regime if scheme else theory_regime(g, gp)
        dist = boundary_distance(g, gp)
        near = dist <= BOUNDARY_MARGIN
        fits.append(PointFit(g, gp, scheme, slope, icpt, resid, se, _widths(ok), len(ok),
                             sum(1 for r in ok if not r.get("converged")), measured, theory, dist, near,
                             None if near and not scheme else measured == theory))
    return fits


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


def judge2(fits: list[PointFit]) -> dict[str, Any]:
    """The theory's verdicts: the agreement, and each scheme's regime against the talk's table."""
    schemes = {f.scheme: {"gamma": f.gamma, "gamma_prime": f.gamma_prime, "slope": f.slope,
                          "measured": f.measured, "talk": f.theory, "holds": f.agrees}
               for f in fits if f.scheme}
    return {"agreement": agreement(fits), "schemes": schemes}


def claims2(fits: list[PointFit], judged: dict[str, Any]) -> dict[str, Any]:
    """claims.json's rules, agreement, schemes and verdicts."""
    agree, schemes = judged["agreement"], judged["schemes"]
    verdicts = [{"claim": f"at least {AGREEMENT:.0%} of grid points farther than {BOUNDARY_MARGIN} from "
                          "the boundary have the theory's regime",
                 "measured": f"{agree['agree']}/{agree['counted']}", "holds": agree["holds"]}]
    for name, s in schemes.items():
        verdicts.append({"claim": f"{name} initialization is in the {s['talk']} regime (talk's table)",
                         "measured": f"{s['measured']} (slope {s['slope']:.3f})", "holds": s["holds"]})
    return {"rules": {
                "slope": f"slope of log RD(theta_w) on log m; linear if < -{SLOPE_MARGIN}, condensed if "
                         f"> {SLOPE_MARGIN}, else critical",
                "near_boundary": f"distance to the boundary <= {BOUNDARY_MARGIN}: not counted",
                "at_cap": "runs at the step budget are classified by RD at the budget"},
            "agreement": agree, "schemes": schemes, "verdicts": verdicts}


def account2(res) -> list[str]:
    """The terminal's account of a two-layer diagram (DiagramResult)."""
    a = res.agreement
    lines = [f"agreement with the theory away from the boundary: {a['agree']}/{a['counted']} "
             f"({a['share']:.1%}; need {AGREEMENT:.0%}) -> {'holds' if a['holds'] else 'FAILS'}; "
             f"{a['near_boundary']} points near the boundary not counted"]
    for g, gp, measured, theory, slope in a["disagree"]:
        lines.append(f"  disagrees: gamma={g}, gamma'={gp}: measured {measured} (slope {slope}), "
                     f"theory {theory}")
    for name, s in res.schemes.items():
        lines.append(f"  {name:<11} ({s['gamma']:g}, {s['gamma_prime']:g}): slope {s['slope']:+.3f} -> "
                     f"{s['measured']} (talk: {s['talk']}) {'ok' if s['holds'] else 'DIFFERS'}")
    return lines


# --- three layers: conjectures, per layer ----------------------------------------------------------

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


LAYERS3 = ("w1", "w2", "a")


def fit_layers(rows: list[dict[str, Any]]) -> list[LayerFit]:
    """Group finished runs by point; per layer fit log RD = slope log m + c by least squares."""
    groups = _groups(rows, ("gamma", "gamma_prime", "gamma2"))
    return [_fit3(key, runs, layer) for key, runs in groups.items() for layer in LAYERS3]


def _fit3(key: tuple, runs: list[dict[str, Any]], layer: str) -> LayerFit:
    g, gp, g2, scheme = key
    ok, (slope, _, se, resid) = _layer_line(runs, layer)
    measured = regime_of(slope)
    # the two-layer theorems are about input weights: no conjecture for the output layer a
    two = "" if layer == "a" else SCHEMES3[scheme].regime if scheme else theory_regime(g, gp)
    dist = boundary_distance(g, gp)
    near = (dist <= BOUNDARY_MARGIN and not scheme) or not two
    lazy = lazy_exponents(g, gp, g2)
    at_cap = sum(1 for r in ok if not r.get("converged"))
    return LayerFit(g, gp, g2, scheme, layer, float(slope), float(se), float(resid), _widths(ok), len(ok),
                    at_cap, measured, two, dist, near, None if near else measured == two, lazy[layer],
                    max(lazy["w1"], lazy["w2"]))


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


def judge3(fits: list[LayerFit]) -> dict[str, Any]:
    return {"comparison": compare(fits)}


def claims3(fits: list[LayerFit], judged: dict[str, Any]) -> dict[str, Any]:
    """claims.json's rules, comparison, the schemes' W1 regimes and the verdicts."""
    comp = judged["comparison"]
    verdicts = []
    for layer in ("w1", "w2"):
        t, lz = comp[layer]["two_layer"], comp[layer]["lazy"]
        verdicts.append({"claim": f"CONJECTURE (ours, not the paper's): {layer}'s regime is the two-layer "
                                  "theorems' regime at the same (gamma, gamma')",
                         "measured": f"{t['agree']}/{t['counted']} points away from the boundary agree",
                         "holds": bool(t["counted"]) and t["agree"] >= 0.95 * t["counted"]})
        verdicts.append({"claim": f"HEURISTIC (ours): where {layer}'s and both hidden layers' exponents < "
                                  f"-{BOUNDARY_MARGIN}, {layer} is linear; where {layer}'s > "
                                  f"+{BOUNDARY_MARGIN}, it is not",
                         "measured": f"linear {lz['measured_linear']}/{lz['linear_predicted']}, not linear "
                                     f"{lz['measured_not_linear']}/{lz['not_linear_predicted']}",
                         "holds": (lz["measured_linear"] + lz["measured_not_linear"])
                         >= 0.95 * (lz["linear_predicted"] + lz["not_linear_predicted"])})
    d = comp["hidden_layers_differ"]
    verdicts.append({"claim": "the two hidden layers can be in different regimes (the paper's abstract)",
                     "measured": f"{d['differ']}/{d['points']} grid points", "holds": d["differ"] > 0})
    schemes = {f.scheme: {"layer": f.layer, "slope": f.slope, "measured": f.measured,
                          "two_layer_talk": f.two_layer}
               for f in fits if f.scheme and f.layer == "w1"}
    return {"rules": {
                "slope": f"per layer, slope of log RD(theta_l) on log m; linear if < -{SLOPE_MARGIN}, "
                         f"condensed if > {SLOPE_MARGIN}, else critical (as the two-layer diagram)",
                "two_layer": f"conjecture: JMLR Theorems 6/8 at (gamma, gamma'); points within "
                             f"{BOUNDARY_MARGIN} of that boundary not counted",
                "lazy": "heuristic: lazy_exponents() (docs); not a result of any paper",
                "at_cap": "runs at the step budget are classified by RD at the budget"},
            "comparison": comp, "schemes_w1": schemes, "verdicts": verdicts}


def account3(res) -> list[str]:
    """The terminal's account of a three-layer diagram (DiagramResult)."""
    c, lines = res.comparison, []
    for layer in LAYERS3:
        t, lz, reg = c[layer]["two_layer"], c[layer]["lazy"], c[layer]["regimes"]
        two = f"two-layer conjecture agrees at {t['agree']}/{t['counted']}; " if layer != "a" else ""
        lines.append(f"  {layer:<2}: linear {reg['linear']}, critical {reg['critical']}, "
                     f"condensed {reg['condensed']}; {two}lazy heuristic: linear "
                     f"{lz['measured_linear']}/{lz['linear_predicted']}, not linear "
                     f"{lz['measured_not_linear']}/{lz['not_linear_predicted']}")
    d = c["hidden_layers_differ"]
    lines.append(f"  hidden layers in different regimes at {d['differ']}/{d['points']} grid points")
    lines += [f"  {f.scheme:<11} W1 slope {f.slope:+.3f} -> {f.measured} (two-layer talk: {f.two_layer})"
              for f in res.fits if f.scheme and f.layer == "w1"]
    return lines
