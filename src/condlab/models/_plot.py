"""``condlab.plot``: the one-line look at condensation, an ordered cosine heat map with its lines.

    condlab.plot(W)                  one layer's input weights (m, k): numpy or torch
    condlab.plot(model)              every layer of an nn.Module or state_dict (whole matrices)
    condlab.plot(run, epoch=120)     the snapshot layers of a run (Run or its folder), at an epoch

Each panel is the paper's eq. 5 map D(u, v) of the rows (Zhou et al. 2022, Figs. 2-4), rows
ordered by ``cosine_order`` (condensed lines as consecutive blocks, largest first), each line
framed on the diagonal and numbered, the title giving the count. Without the order a map of
a condensed layer looks like noise: the members of a line are spread over the row indices.
Returns a matplotlib Figure (nothing is shown or saved; ``condlab.plotting.save_figure``
writes it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

MAX_PANELS = 12


def _mark_lines(ax: Any, order: np.ndarray, o: Any, max_neurons: int) -> None:
    """Frame each condensed line's block on the diagonal (in drawn positions) and number it."""
    from matplotlib.patches import Rectangle

    from ..plotting import heatmap_rows

    m = len(order)
    drawn, _ = heatmap_rows(m, np.arange(m), max_neurons)  # positions in `order` that are drawn
    start = 0
    for i, line in enumerate(o.lines):
        stop = start + len(line.members)
        a, b = np.searchsorted(drawn, start), np.searchsorted(drawn, stop)
        if b > a:
            ax.add_patch(Rectangle((a - 0.5, a - 0.5), b - a, b - a, fill=False, ec="black", lw=0.9))
            ax.text(a, a, f"{i + 1}", ha="left", va="top", fontsize=7, color="black")
        start = stop


def _panels(source: Any, epoch: int | None, layers: Any, heads: int | None) -> tuple[list, str]:
    """[(name, W)] to draw and a suptitle, for a model, a state_dict or a run."""
    from torch import nn

    from ..records import Run
    from ._layers import extract_layers, is_state_dict

    if isinstance(source, str | Path) and (Path(source) / "meta.json").is_file():
        from ..records import load_run

        source = load_run(source)
    if isinstance(source, Run):
        epoch = int(source.epochs[-1]) if epoch is None else int(epoch)
        external = source.meta.get("architecture") == "external"
        names = [n for n in source.names if external or n != "output"]
        if layers is not None:
            import fnmatch

            pats = [layers] if isinstance(layers, str) else list(layers)
            names = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in pats)]
        return [(n, source.layer(n, epoch)) for n in names], f"step {epoch}" if external else f"epoch {epoch}"
    if epoch is not None:
        raise ValueError("epoch= is for a run (a Run or its folder); a model or matrix has one state")
    if isinstance(source, str | Path):
        from ..records import load_source

        source, config = load_source(source)
        found = extract_layers(source, layers=layers, heads=heads, config=config)
    elif isinstance(source, nn.Module) or is_state_dict(source):
        found = extract_layers(source, layers=layers, heads=heads)
    else:
        raise ValueError(f"condlab.plot takes a weight matrix (m, k), an nn.Module, a state_dict, a Run or "
                         f"a checkpoint/run path, got {type(source).__name__}")
    return [(lay.name, lay.weight) for lay in found.layers if lay.head is None], ""


def plot(source: Any, epoch: int | None = None, *, layers: str | list[str] | None = None,
         heads: int | None = None, max_neurons: int = 2000, **count_kwargs: Any):
    """Ordered cosine heat map(s) with the condensed lines framed (eq. 5; Figs. 2-4). -> Figure.

    `source`: a matrix W (m, k) (rows = neurons, bias last), an nn.Module / state_dict /
    checkpoint path (every whole layer, at most MAX_PANELS), or a run (``condlab.Run`` or its
    folder) at `epoch` (default: its last snapshot). `count_kwargs` go to ``count_orientations``.
    """
    from ..analysis import as_matrix, cosine_order, count_orientations
    from ..plotting import cosine_heatmap, cosine_panels

    is_matrix = (hasattr(source, "ndim") and not isinstance(source, Mapping) and source.ndim == 2)
    if is_matrix and epoch is not None:
        raise ValueError("epoch= is for a run (a Run or its folder); a matrix has one state")
    named, suptitle = ([("", source)], "") if is_matrix else _panels(source, epoch, layers, heads)
    if not named:
        raise ValueError("nothing to plot: no layer with input weights was found")
    extra = len(named) - MAX_PANELS
    named = named[:MAX_PANELS]
    counted = []
    for name, W in named:
        W = as_matrix(W)
        o = count_orientations(W, **count_kwargs)
        share = sum(c.share for c in o.lines)
        title = f"{name + ': ' if name else ''}{o.n_lines} lines ({share:.0%} of rows)"
        counted.append((title, W, cosine_order(W, o), o))
    if len(counted) == 1 and not suptitle:
        title, W, order, o = counted[0]
        fig = cosine_heatmap(W, order, title=title, max_neurons=max_neurons)
    else:
        if extra > 0:
            more = f"first {MAX_PANELS} layers ({extra} more: layers=)"
            suptitle = f"{suptitle}; {more}" if suptitle else more
        fig = cosine_panels([(t, W, order) for t, W, order, _ in counted], suptitle=suptitle,
                            max_neurons=max_neurons)
    for ax, (_, _, order, o) in zip(fig.axes, counted, strict=False):  # panels first, colour bar last
        _mark_lines(ax, order, o, max_neurons)
    return fig
