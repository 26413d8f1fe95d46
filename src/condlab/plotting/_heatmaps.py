"""Cosine-similarity heat maps of hidden neurons' input weights (the paper's Figs. 2-4).

A map of m neurons is m x m; above MAX_NEURONS (2000) neurons the map shows a stated,
reproducible sample: MAX_NEURONS neurons evenly spaced along the drawn order (so every
condensed group keeps its share of the picture); the title says "[sample: 2,000 of m neurons]"
and the axes count positions in the sample.
"""

from __future__ import annotations

import math
import string
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.ticker import MaxNLocator

from condlab.analysis import as_matrix, cosine_matrix

from ._style import COSINE_CMAP, new_figure, root_figure, styled

CBAR_LABEL = r"$D(\mathbf{u}, \mathbf{v})$"
CBAR_TICKS = (-1.0, -0.5, 0.0, 0.5, 1.0)
MAX_NEURONS = 2000


def _permutation(order: Any, m: int) -> np.ndarray:
    """`order` as an index array that is a permutation of range(m); None -> identity."""
    if order is None:
        return np.arange(m)
    idx = np.asarray(order)
    if idx.shape != (m,) or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"order must be an integer array of shape ({m},), got {idx.dtype} {idx.shape}")
    if not np.array_equal(np.sort(idx), np.arange(m)):
        raise ValueError(f"order must be a permutation of range({m})")
    return idx


def heatmap_rows(m: int, order: Any = None, max_neurons: int = MAX_NEURONS) -> tuple[np.ndarray, str]:
    """Rows drawn, in drawing order, for a map of m neurons, and the note that states a sample."""
    idx = _permutation(order, m)
    if max_neurons < 2:
        raise ValueError(f"max_neurons must be >= 2, got {max_neurons}")
    if m <= max_neurons:
        return idx, ""
    pick = idx[np.linspace(0, m - 1, max_neurons).round().astype(np.int64)]
    return pick, f"[sample: {max_neurons:,} of {m:,} neurons]"


def _draw_cosine(ax: Axes, W: Any, order: Any, title: str, *, xlabel: bool, ylabel: bool,
                 max_neurons: int = MAX_NEURONS) -> AxesImage:
    """Draw the eq. 5 matrix of W's rows, permuted by `order` (sampled above max_neurons), into `ax`."""
    W = np.asarray(W) if not hasattr(W, "detach") else W
    idx, note = heatmap_rows(W.shape[0], order, max_neurons)
    title = f"{title}\n{note}" if note and title else (title or note)
    im = ax.imshow(
        cosine_matrix(as_matrix(W[idx])), cmap=COSINE_CMAP, vmin=-1.0, vmax=1.0,
        interpolation="nearest", origin="upper", aspect="equal",
    )
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(MaxNLocator(nbins=5, integer=True))
    ax.tick_params(length=2.5)
    for spine in ax.spines.values():  # an image is framed on all four sides
        spine.set_visible(True)
        spine.set_linewidth(0.6)
    label = "sampled neuron" if note else "neuron index"
    if xlabel:
        ax.set_xlabel(label)
    if ylabel:
        ax.set_ylabel(label)
    if title:
        ax.set_title(title)
    return im


def _colorbar(fig: Figure, im: AxesImage, ax: Axes | list[Axes]) -> None:
    cbar = fig.colorbar(im, ax=ax, ticks=CBAR_TICKS, shrink=0.9, aspect=25, pad=0.02)
    cbar.set_label(CBAR_LABEL)
    cbar.outline.set_linewidth(0.5)
    cbar.ax.tick_params(length=2.5)


@styled
def cosine_heatmap(
    W: np.ndarray, order: np.ndarray | None = None, *, ax: Axes | None = None, title: str = "",
    max_neurons: int = MAX_NEURONS,
) -> Figure:
    """Heat map of the cosine similarity D(u, v) of W's rows, as in the paper's Figs. 2-4.

    Above `max_neurons` rows it draws a sample of them, evenly spaced along `order` (see module).
    """
    if ax is None:
        fig = new_figure(3.6, 3.0)
        ax = fig.add_subplot()
    else:
        fig = root_figure(ax)
    im = _draw_cosine(ax, W, order, title, xlabel=True, ylabel=True, max_neurons=max_neurons)
    _colorbar(ax.figure, im, ax)  # type: ignore[arg-type]
    return fig


def _subcaption(i: int, title: str) -> str:
    letters = string.ascii_lowercase
    tag = letters[i] if i < len(letters) else letters[i // 26 - 1] + letters[i % 26]
    return f"({tag}) {title}".rstrip()


@styled
def cosine_panels(
    panels: list[tuple[str, np.ndarray, np.ndarray | None]], *, ncols: int | None = None, suptitle: str = "",
    max_neurons: int = MAX_NEURONS,
) -> Figure:
    """A row of (a), (b), ... cosine heat maps with one shared colour bar, like the paper's Figs. 2-4."""
    if not panels:
        raise ValueError("cosine_panels needs at least one (title, W, order) panel")
    n = len(panels)
    ncols = min(n, 5) if ncols is None else ncols
    if ncols < 1:
        raise ValueError(f"ncols must be >= 1, got {ncols}")
    nrows = math.ceil(n / ncols)
    fig = new_figure(2.3 * ncols + 0.7, 2.45 * nrows + (0.3 if suptitle else 0.0))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    im = None
    for i, (title, W, order) in enumerate(panels):
        r, c = divmod(i, ncols)
        last_in_col = i + ncols >= n
        im = _draw_cosine(axes[r, c], W, order, _subcaption(i, title), xlabel=last_in_col, ylabel=c == 0,
                          max_neurons=max_neurons)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    assert im is not None
    _colorbar(fig, im, list(axes.flat[:n]))
    if suptitle:
        fig.suptitle(suptitle)
    return fig
