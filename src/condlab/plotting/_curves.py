"""Output and loss curves: polynomial fits of the early output (the paper's Fig. 5) and the loss."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from numpy.polynomial import polynomial as P

from ._inputs import as_vector
from ._style import figure_and_axes, new_figure, styled

INITIAL_STAGE_FRACTION = 0.7
NET_COLOR = "tab:blue"
DATA_COLOR = "tab:green"
FIT_COLOR = "tab:red"
_FIT_DASHES = [(4, 2), (1.5, 1.5), (6, 2, 1.5, 2), (8, 3)]


def format_r2(r2: float) -> str:
    """R² with 4 decimals; a value below 1 that would round to 1 reads "> 0.9999"."""
    if not np.isfinite(r2):
        return "n/a"
    text = f"{r2:.4f}"
    return "> 0.9999" if r2 < 1.0 and text == "1.0000" else text


def fit_label(degree: int, r2: float) -> str:
    """Legend text of one polynomial fit."""
    r2_text = format_r2(r2)
    sep = " " if r2_text.startswith(">") else " = "
    return f"degree {degree}, R²{sep}{r2_text}"


def _fit_tuple(fit: Any) -> tuple[int, Any, float]:
    """(degree, coefficients, r2) from a tuple or from an object with those attributes (PolyFit)."""
    if hasattr(fit, "coefficients"):
        return fit.degree, fit.coefficients, fit.r2
    degree, coef, r2 = fit
    return degree, coef, r2


@styled
def polyfit_plot(
    x_test: np.ndarray,
    y_net: np.ndarray,
    fits: list[tuple[int, np.ndarray, float]],
    *,
    x_train: np.ndarray | None = None,
    y_train: np.ndarray | None = None,
    title: str = "",
    ax: Axes | None = None,
) -> Figure:
    """Network output (blue), training data (green) and polynomial fits (red dashed), as in Fig. 5.

    With `ax`, draws into that panel (legend inside it) and returns its figure.
    """
    x, y = as_vector(x_test, "x_test"), as_vector(y_net, "y_net")
    if x.shape != y.shape:
        raise ValueError(f"x_test and y_net differ in length: {x.shape} vs {y.shape}")
    s = np.argsort(x, kind="stable")
    x, y = x[s], y[s]
    fig, ax, own = figure_and_axes(ax, 3.6, 3.4)
    ax.plot(x, y, color=NET_COLOR, lw=1.8, label="network output", zorder=2)
    if x_train is not None and y_train is not None:
        xt, yt = as_vector(x_train, "x_train"), as_vector(y_train, "y_train")
        ax.plot(xt, yt, "o", color=DATA_COLOR, ms=3.5, label="training data", zorder=3)
    for i, fit in enumerate(fits):
        degree, coef, r2 = _fit_tuple(fit)
        c = as_vector(coef, f"coefficients of fit {i}")
        ax.plot(
            x, P.polyval(x, c), color=FIT_COLOR, lw=1.3, dashes=_FIT_DASHES[i % len(_FIT_DASHES)],
            label=fit_label(int(degree), float(r2)), zorder=4,
        )
    ax.set_xlabel("x")
    ax.set_ylabel("output")
    ax.margins(x=0.02)
    if own:
        fig.legend(loc="outside lower center", ncols=2, handlelength=2.6, columnspacing=1.2)
    else:
        ax.legend(fontsize="small", handlelength=2.2)
    if title:
        ax.set_title(title)
    return fig


def _epoch_marker(ax: Axes, y: np.ndarray, epoch: int) -> None:
    """Mark the analysed snapshot: a dot on the curve, or a line where the loss is missing."""
    label = f"snapshot (epoch {epoch})"
    if 0 <= epoch < y.size and np.isfinite(y[epoch]):
        ax.plot([epoch], [y[epoch]], "o", color="black", ms=5, mec="white", mew=0.8, label=label, zorder=4)
    else:
        ax.axvline(epoch, color="black", ls="--", lw=0.9, label=label)


@styled
def loss_plot(
    loss: np.ndarray,
    *,
    initial_stage_epoch: int | None = None,
    snapshot_epoch: int | None = None,
    title: str = "",
) -> Figure:
    """Training loss vs epoch (log scale) with the 70 % initial-stage threshold used for Figs. 3-6."""
    y = as_vector(loss, "loss")
    y = np.where(np.isfinite(y) & (y > 0), y, np.nan)  # diverged / zero values are left out
    epochs = np.arange(y.size)
    fig = new_figure(4.0, 3.3)
    ax = fig.add_subplot()
    ax.plot(epochs, y, color="tab:blue", lw=1.4, label="loss")
    ax.set_yscale("log")
    if y.size and np.isfinite(y[0]):
        ax.axhline(INITIAL_STAGE_FRACTION * y[0], color="0.4", ls=":", lw=1.0, label="0.7 × initial loss")
    if initial_stage_epoch is not None:
        ax.axvline(
            initial_stage_epoch, color="tab:red", ls="-", lw=1.0, alpha=0.8,
            label="initial stage end (loss = 70% of initial)",
        )
    if snapshot_epoch is not None:
        _epoch_marker(ax, y, int(snapshot_epoch))
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    ax.margins(x=0.01)
    fig.legend(loc="outside lower center", ncols=2, handlelength=2.0, columnspacing=1.2)
    if title:
        ax.set_title(title)
    return fig
