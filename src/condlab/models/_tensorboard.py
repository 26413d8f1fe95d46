"""TensorBoard output: per-layer condensation numbers as scalars, ordered heat maps as images.

Tags (one TensorBoard section per quantity, one line per layer):

    lines/LAYER               number of condensed lines
    condensed_share/LAYER     share of the layer's rows on condensed lines
    effective_neurons/LAYER   exp(entropy) of the line and scattered-row shares (condlab.models._inspect)
    cosine/LAYER              the eq. 5 heat map |D(u, v)| of the layer's rows, ordered by
                              ``cosine_order`` (condensed lines as blocks), colour range [-1, 1]
                              as condlab's figures; above 512 rows the sampled rows of
                              ``_inspect.heatmap_matrix``

The image is the colour-mapped cosine matrix itself (one pixel per pair of rows), made without a
matplotlib figure so that a Tracker can write one per layer at every measurement cheaply.
Used by ``Tracker(tensorboard=...)``, ``condlab inspect --tensorboard`` and ``condlab analyze
--tensorboard``. Needs the optional ``tensorboard`` package (``torch.utils.tensorboard``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

SCALARS = ("lines", "condensed_share", "effective_neurons")


def open_writer(target: Any) -> tuple[Any, bool]:
    """(SummaryWriter, whether condlab opened it and so closes it) for a folder or a writer."""
    if hasattr(target, "add_scalar") and hasattr(target, "add_image"):
        return target, False
    if not isinstance(target, str | Path):
        raise ValueError(f"tensorboard={target!r} is not accepted: give a folder or a "
                         "torch.utils.tensorboard.SummaryWriter")
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ValueError("TensorBoard output needs the `tensorboard` package: "
                         "pip install tensorboard") from None
    return SummaryWriter(log_dir=str(target)), True


def write_scalars(writer: Any, rows: Iterable[Mapping[str, Any]], step: int) -> None:
    """One scalar per row and quantity in SCALARS, at `step` (rows: condlab.inspect's columns)."""
    for row in rows:
        for key in SCALARS:
            writer.add_scalar(f"{key}/{row['layer']}", float(row[key]), step)


def heatmap_image(W: Any, orientations: Any) -> np.ndarray:
    """(n, n, 3) uint8: the colour-mapped eq. 5 matrix of W's rows in cosine_order (n <= 512)."""
    from ..analysis import cosine_matrix
    from ..plotting import COSINE_CMAP
    from ._inspect import heatmap_matrix

    _, shown = heatmap_matrix(W, orientations)
    D = cosine_matrix(shown)
    rgba = COSINE_CMAP(np.ma.masked_invalid((D + 1.0) / 2.0))  # NaN (zero rows) in the 'bad' grey
    return (rgba[..., :3] * 255).round().astype(np.uint8)


def write_heatmap(writer: Any, layer: str, W: Any, orientations: Any, step: int) -> None:
    writer.add_image(f"cosine/{layer}", heatmap_image(W, orientations), step, dataformats="HWC")


def write_inspect(report: Any, target: Any) -> None:
    """``condlab inspect --tensorboard``: the table's scalars and every whole layer's heat map, step 0."""
    writer, owned = open_writer(target)
    write_scalars(writer, report.table.to_dict(orient="records"), 0)
    for lay in report.layers:
        if lay.head is None:  # a head's map is a block of its whole matrix's map
            write_heatmap(writer, lay.name, lay.weight, report.orientations[lay.name], 0)
    _done(writer, owned)


def write_analysis(run: Any, analysis: Any, target: Any) -> None:
    """``condlab analyze --tensorboard``: a Tracker run's recorded steps (condensation.csv) as
    scalars, or the analysed epoch's counts of a condlab run; heat maps at the analysed epoch."""
    writer, owned = open_writer(target)
    table = Path(run.path or ".") / "condensation.csv"
    if run.meta.get("architecture") == "external" and table.is_file():
        import pandas as pd

        history = pd.read_csv(table, keep_default_na=False, na_values=[""])
        for step, rows in history.groupby("step", sort=True):
            write_scalars(writer, rows.to_dict(orient="records"), int(step))
    else:
        from ._inspect import effective_neurons

        write_scalars(writer, [{"layer": r.layer, "lines": r.orientations.n_lines,
                                "condensed_share": sum(c.share for c in r.orientations.lines),
                                "effective_neurons": effective_neurons(r.orientations)}
                               for r in analysis.layers], int(analysis.epoch))
    epoch = int(analysis.epoch)
    for r in analysis.layers:
        write_heatmap(writer, r.layer, run.layer(r.layer, epoch), r.orientations, epoch)
    _done(writer, owned)


def _done(writer: Any, owned: bool) -> None:
    if owned:
        writer.close()
    else:
        writer.flush()
