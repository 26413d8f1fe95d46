"""All figures of one analysed run, drawn from its record and its analysis (reads, never trains)."""

from __future__ import annotations

from pathlib import Path

from ._curves import loss_plot, polyfit_plot
from ._dynamics import direction_field_plot, trajectories_plot
from ._heatmaps import cosine_heatmap, cosine_panels
from ._style import save_figure


def analysis_figures(run, analysis, out: str | Path) -> list[Path]:
    """Write the cosine heat maps, loss curve and (1-D input) Figs. 5-6 pictures; return the paths."""
    out, arrays, epoch = Path(out), analysis.arrays, analysis.epoch
    written: list[Path] = []
    panels = []
    for report in analysis.layers:
        W = run.layer(report.layer, epoch)
        order = arrays.get(f"order_{report.layer}")
        title = (f"{report.layer}, {report.activation} (p={report.p or '-'}): "
                 f"{report.orientations.n_lines} lines, epoch {epoch}")
        written += save_figure(cosine_heatmap(W, order, title=title), out / f"cosine_{report.layer}")
        panels.append((f"{report.layer}: {report.activation}", W, order))
    if len(panels) > 1:
        written += save_figure(cosine_panels(panels, suptitle=f"epoch {epoch}"), out / "cosine_layers")
    written += save_figure(loss_plot(run.loss, initial_stage_epoch=run.initial_stage_epoch,
                                     snapshot_epoch=epoch, title="training loss"), out / "loss")
    if "test_x" in arrays:
        fits = [(f.degree, f.coefficients, f.r2) for f in analysis.polyfits]
        fig = polyfit_plot(arrays["test_x"], arrays["test_y"], fits, x_train=run.x[:, 0],
                           y_train=run.y.sum(1), title=f"output at epoch {epoch}")
        written += save_figure(fig, out / "polyfit")
        fig = direction_field_plot(arrays["field_w"], arrays["field_b"], arrays["field_dw"],
                                   arrays["field_db"], weights=arrays["weights"],
                                   velocities=arrays["velocities"], stable_lines=analysis.stable_lines,
                                   title=f"direction field, epoch {epoch}")
        written += save_figure(fig, out / "direction_field")
        fig = trajectories_plot(arrays["traj_epochs"], arrays["traj_theta"], arrays["traj_amplitude"],
                                title="orientation of each neuron")
        written += save_figure(fig, out / "trajectories")
    return written
