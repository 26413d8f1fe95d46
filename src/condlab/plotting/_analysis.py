"""All figures of one analysed run, drawn from its record and its analysis (reads, never trains).

Wide layers: heat maps sample MAX_NEURONS neurons (``_heatmaps``), the direction field draws
at most FIELD_NEURONS neurons (evenly spread over the rows), and trajectories follow the
neurons the analysis picked; each title says when it shows a sample.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ._curves import loss_plot, polyfit_plot
from ._dynamics import direction_field_plot, trajectories_plot
from ._heatmaps import cosine_heatmap, cosine_panels
from ._style import save_figure

FIELD_NEURONS = 2000


def analysis_figures(run, analysis, out: str | Path, formats: Iterable[str] = ("png",)) -> list[Path]:
    """Write the cosine heat maps, loss curve and (1-D input) Figs. 5-6 pictures; return the paths.

    `formats`: image formats of each figure (PNG by default; add "svg" for vector files).
    """
    out, arrays, epoch = Path(out), analysis.arrays, analysis.epoch
    formats = tuple(formats)

    def save(fig, name: str) -> list[Path]:
        return save_figure(fig, out / name, formats)

    written: list[Path] = []
    panels = []
    for report in analysis.layers:
        W = run.layer(report.layer, epoch)
        order = arrays.get(f"order_{report.layer}")
        title = (f"{report.layer}, {report.activation} (p={report.p or '-'}): "
                 f"{report.orientations.n_lines} lines, epoch {epoch}")
        written += save(cosine_heatmap(W, order, title=title), f"cosine_{report.layer}")
        panels.append((f"{report.layer}: {report.activation}", W, order))
    if len(panels) > 1:
        written += save(cosine_panels(panels, suptitle=f"epoch {epoch}"), "cosine_layers")
    written += save(loss_plot(run.loss, initial_stage_epoch=run.initial_stage_epoch,
                              snapshot_epoch=epoch, title="training loss"), "loss")
    if "traj_theta" in arrays:
        shown, m = arrays["traj_theta"].shape[1], run.config.model.width
        note = "" if shown == m else f" ({shown} of {m} neurons)"
        fig = trajectories_plot(arrays["traj_epochs"], arrays["traj_theta"], arrays["traj_amplitude"],
                                title="orientation of each neuron" + note)
        written += save(fig, "trajectories")
    if "test_x" in arrays:
        fits = [(f.degree, f.coefficients, f.r2) for f in analysis.polyfits]
        fig = polyfit_plot(arrays["test_x"], arrays["test_y"], fits, x_train=run.x[:, 0],
                           y_train=run.y.sum(1), title=f"output at epoch {epoch}")
        written += save(fig, "polyfit")
        m = len(arrays["weights"])
        pick = np.unique(np.linspace(0, m - 1, min(m, FIELD_NEURONS)).round().astype(np.int64))
        note = "" if len(pick) == m else f"\n({len(pick)} of {m} neurons, evenly spread)"
        fig = direction_field_plot(arrays["field_w"], arrays["field_b"], arrays["field_dw"],
                                   arrays["field_db"], weights=arrays["weights"][pick],
                                   velocities=arrays["velocities"][pick], stable_lines=analysis.stable_lines,
                                   title=f"direction field, epoch {epoch}{note}")
        written += save(fig, "direction_field")
    return written
