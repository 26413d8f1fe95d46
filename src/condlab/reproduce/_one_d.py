"""Figs. 5-6 and the evolution snapshots (A.6): 1-D input, where everything can be drawn."""

from __future__ import annotations

import numpy as np

from ..analysis import analyze_run, cosine_order, count_orientations, line_angles
from ..training import preset
from ._claims import ExperimentResult, count_outcome
from ._context import Context

FIG5 = [("tanh", 1), ("xtanh", 2), ("x2tanh", 3)]
SETTINGS = {"n": 40, "d": 1, "m": 100, "init_std": 0.005, "lr": 5e-4, "x": "U[-1, 1.5]",
            "target": "sin(3x) + sin(6x)/2", "optimizer": "adam"}


def _preset(act: str) -> str:
    return "fig5" if act == "tanh" else f"fig5-{act}"


def fig5(ctx: Context) -> ExperimentResult:
    """Fig. 5: at epoch 1000 the output is close to a polynomial of degree p."""
    from ..plotting import panel_row, polyfit_plot
    res = ExperimentResult("fig5", "NeurIPS 2022, Fig. 5", ctx.seeds)
    res.settings = {**SETTINGS, "epoch": 1000, "test_points": 200}
    res.choices.append("'close to a degree-p polynomial' is measured as 1 - R^2 <= 0.01 for the "
                       "degree-p least-squares fit on 200 test points, and, for p > 1, degree p - 1 "
                       "leaving at least 10x more variance unexplained")
    fig, axes = panel_row(len(FIG5), 3.4, 3.6)
    for ax, letter, (act, p) in zip(axes, "abc", FIG5, strict=True):
        runs = ctx.train(preset(_preset(act)), act, "train.snapshots=every:50")
        claim = res.claim(f"fig5/{act}/output", f"{act}: the output at epoch 1000 is close to a "
                          f"polynomial of degree {p}", degree=p, max_unexplained=0.01)
        for run in runs:
            analysis = analyze_run(run, ctx.epoch(run, 1000), predict=False)
            r2 = {f.degree: f.r2 for f in analysis.polyfits}
            ok = 1 - r2[p] <= 0.01 and (p == 1 or 1 - r2[p - 1] >= 10 * (1 - r2[p]))
            why = (f"1 - R² of degree {p} = {1 - r2[p]:.3g} > 0.01" if 1 - r2[p] > 0.01 else
                   f"degree {p - 1} leaves {1 - r2.get(p - 1, 1):.3g} unexplained (< 10x {1 - r2[p]:.3g})")
            claim.record(ok, run=run, reason=why, r2_by_degree={d: round(v, 6) for d, v in r2.items()})
            if run is runs[0]:
                fits = [(f.degree, f.coefficients, f.r2) for f in analysis.polyfits if f.degree == p]
                polyfit_plot(analysis.arrays["test_x"], analysis.arrays["test_y"], fits,
                             x_train=run.x[:, 0], y_train=run.y[:, 0], ax=ax,
                             title=f"({letter}) {act}, epoch 1000")
    ctx.save(res, fig, "fig5")
    return res


def fig6(ctx: Context) -> ExperimentResult:
    """Fig. 6: the direction field at epoch 200 has p stable lines, and the neurons lie on them."""
    from ..plotting import direction_field_plot, panel_row
    res = ExperimentResult("fig6", "NeurIPS 2022, Fig. 6", ctx.seeds)
    res.settings = {**SETTINGS, "epoch": 200}
    res.choices.append("a stable line attracts neurons of either sign of the output weight (Fig. 6 "
                       "draws the field for w'/a); neurons 'lie on' a line within 10 degrees")
    fig, axes = panel_row(len(FIG5), 3.6, 4.0)
    for ax, letter, (act, p) in zip(axes, "abc", FIG5, strict=True):
        runs = ctx.train(preset(_preset(act)), act, "train.epochs=200", "train.snapshots=every:10")
        field = res.claim(f"fig6/{act}/field", f"{act}: the field has {p} stable line(s) around the "
                          "origin at epoch 200", stable_lines=p)
        neurons = res.claim(f"fig6/{act}/neurons", f"{act}: neurons condense on {p} line(s) that "
                            "lie on the field's stable lines", lines=p, max_angle_deg=10)
        for run in runs:
            analysis = analyze_run(run, ctx.epoch(run, 200), predict=False)
            stable = analysis.stable_lines if analysis.stable_lines is not None else np.zeros((0, 2))
            o = analysis.layers[0].orientations
            measured = np.array([c.mean for c in o.lines]).reshape(-1, 2)
            angles = line_angles(measured, stable).tolist() if len(measured) and len(stable) else []
            field.record(len(stable) == p, run=run, reason=f"{len(stable)} stable lines (expected {p})",
                         stable_lines=len(stable))
            far = [a for a in angles if a > 10]
            outcome, reason = count_outcome(o, p)
            if outcome and not angles:  # p lines, but the field has no stable line to hold them to
                outcome, reason = False, "the field has no stable line to compare the lines with"
            elif outcome and far:  # p lines, but not on the field's stable lines
                outcome, reason = False, ("line(s) at " + ", ".join(f"{a:.1f}°" for a in far) +
                                          " from the field's stable lines (max 10°)")
            neurons.record(outcome, run=run, reason=reason, lines=o.n_lines, arcs=o.n_arcs,
                           angles_deg=[round(a, 1) for a in angles])
            if run is runs[0]:
                a = analysis.arrays
                direction_field_plot(a["field_w"], a["field_b"], a["field_dw"], a["field_db"],
                                     weights=a["weights"], velocities=a["velocities"],
                                     stable_lines=stable, title=f"({letter}) {act}, epoch 200", ax=ax)
    ctx.save(res, fig, "fig6")
    return res


EVOLUTION = [("fig3", "fig3", [0, 10, 20, 30, 50, 100]), ("fig3-xtanh", "fig3", [0, 10, 20, 30, 50, 100]),
             ("fig5-x2tanh", "fig6", [0, 25, 50, 100, 150, 200])]


def evolution(ctx: Context) -> ExperimentResult:
    """A.6: snapshots through the initial stage; condensation forms from random orientations."""
    from ..plotting import cosine_panels
    res = ExperimentResult("evolution", "NeurIPS 2022, A.6 (not included; designed from the main text)",
                           ctx.seeds)
    res.choices.append("A.6 is not included: heat maps at six epochs up to each figure's epoch; the "
                       "claim is that the share of neurons on the p largest lines reaches at least "
                       "0.8 at some snapshot and gains at least 0.3 over initialization (the p "
                       "largest, because in 2-D random orientations already fill small 'lines')")
    for name, figure, epochs in EVOLUTION:
        runs = ctx.train(preset(name), name, f"train.epochs={epochs[-1]}", f"train.snapshots={epochs}")
        p = runs[0].architecture.activations[0].multiplicity
        claim = res.claim(f"evolution/{name}", f"{name}: condensation onto {p} line(s) forms during "
                          "the initial stage", peak_share_at_least=0.8, gain_at_least=0.3)
        for run in runs:
            shares = [round(sum(c.share for c in count_orientations(run.layer("layer1", e)).lines[:p]), 3)
                      for e in epochs]
            peak = max(shares[1:])
            claim.record(peak >= 0.8 and peak - shares[0] >= 0.3, run=run,
                         reason=f"peak share {peak:.2f} (need 0.8), gain {peak - shares[0]:.2f} (need 0.3)",
                         share_on_p_largest_lines=shares, epochs=epochs)
        panels = [(f"epoch {e}", runs[0].layer("layer1", e), cosine_order(runs[0].layer("layer1", e)))
                  for e in epochs]
        ctx.save(res, cosine_panels(panels, ncols=len(epochs), suptitle=f"{name} ({figure}) "
                                    "through the initial stage"), f"evolution_{name}")
    return res
