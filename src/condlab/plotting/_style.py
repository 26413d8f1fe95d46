"""Shared style, figure construction and atomic saving for condlab's paper figures.

Figures are built as bare `matplotlib.figure.Figure` objects: no pyplot, no global
figure manager and no backend switch, so nothing leaks between calls and the
package can be imported in any process. Rendering uses Agg/SVG at save time.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure, SubFigure

from ._colors import BAD_GREY, cosine_colors

P = ParamSpec("P")
R = TypeVar("R")

#: rcParams applied while a figure is built: paper-sized fonts, no top/right spines.
STYLE: dict[str, Any] = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.linewidth": 0.8,
    "lines.linewidth": 1.4,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
}

#: Diverging map for D(u, v) in [-1, 1] (its anchors: _colors.py); NaN (zero-weight neurons) is grey.
COSINE_CMAP = ListedColormap(cosine_colors(np.linspace(-1.0, 1.0, 256)), name="condlab_cosine").with_extremes(
    bad=tuple(c / 255.0 for c in BAD_GREY))

PNG_DPI = 150
_KNOWN_SUFFIXES = {".png", ".svg", ".pdf", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff"}


def styled(func: Callable[P, R]) -> Callable[P, R]:
    """Build the figure under `STYLE` (the rcParams are restored afterwards)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with mpl.rc_context(STYLE):
            return func(*args, **kwargs)

    return wrapper


def new_figure(width: float, height: float) -> Figure:
    """A fresh, unmanaged Figure (inches) with constrained layout."""
    return Figure(figsize=(width, height), layout="constrained")


def figure_and_axes(ax: Axes | None, width: float, height: float) -> tuple[Figure, Axes, bool]:
    """A new single-panel figure, or the figure of a given panel; the flag says which."""
    if ax is None:
        fig = new_figure(width, height)
        return fig, fig.add_subplot(), True
    return root_figure(ax), ax, False


def panel_row(count: int, width: float, height: float) -> tuple[Figure, list[Axes]]:
    """A figure with `count` panels side by side, for the paper's (a), (b), (c) layouts."""
    fig = new_figure(width * count, height)
    return fig, list(np.atleast_1d(fig.subplots(1, count)))


def root_figure(ax: Axes) -> Figure:
    """The top-level Figure holding `ax`, also when `ax` sits in a SubFigure."""
    fig = ax.figure
    while isinstance(fig, SubFigure):
        fig = fig.figure
    assert isinstance(fig, Figure)
    return fig


def _base_path(path: str | os.PathLike[str]) -> Path:
    """Path without an image suffix ("fig3.png" -> "fig3"; "run.v2/fig" is kept)."""
    p = Path(path)
    return p.with_suffix("") if p.suffix.lower() in _KNOWN_SUFFIXES else p


def save_figure(
    fig: Figure, path: str | os.PathLike[str], formats: Iterable[str] = ("png", "svg")
) -> list[Path]:
    """Write `fig` as path.<fmt> for each format (PNG at 150 dpi), each atomically; return the paths."""
    base = _base_path(path)
    base.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        fmt = fmt.lower().lstrip(".")
        target = base.parent / f"{base.name}.{fmt}"
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh, mpl.rc_context({"svg.hashsalt": "condlab"}):
                # No creation date in the metadata: the same figure gives the same bytes.
                meta = {"Date": None} if fmt in ("svg", "pdf") else None
                fig.savefig(fh, format=fmt, dpi=PNG_DPI, metadata=meta)
            os.chmod(tmp, 0o644)  # mkstemp makes 0600 files; figures are meant to be shared
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        written.append(target)
    return written
