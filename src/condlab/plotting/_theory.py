"""Figures of the talk's theory results: model rank over training, sample-size curves, plateaus.

Plotting only reads arrays the experiments computed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ._style import figure_and_axes, styled


@styled
def rank_plot(epochs: np.ndarray, ranks: dict[str, np.ndarray], lines: np.ndarray | None = None, *,
              reference: dict[str, float] | None = None, loss: np.ndarray | None = None,
              ax: Axes | None = None, title: str = "") -> Figure:
    """Model rank (one curve per tolerance rule) and condensed-line count against epoch."""
    fig, ax, _ = figure_and_axes(ax, 5.2, 3.6)
    x = np.maximum(np.asarray(epochs), 1)
    for label, values in ranks.items():
        ax.plot(x, values, marker=".", label=f"rank ({label})")
    for label, value in (reference or {}).items():
        ax.axhline(value, ls="--", lw=1, color="0.4")
        ax.annotate(label, (x[0], value), fontsize=7, va="bottom", color="0.3")
    ax.set_xscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("model rank")
    handles, labels = ax.get_legend_handles_labels()
    if lines is not None:
        twin = ax.twinx()
        twin.step(x, lines, where="post", color="tab:red", label="condensed lines")
        twin.set_ylabel("condensed lines", color="tab:red")
        twin.set_ylim(0, max(4, int(np.max(lines)) + 1))
        h2, l2 = twin.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    if loss is not None:
        ax.set_title(title + f"  (final loss {loss[-1]:.2g})", fontsize=9)
    elif title:
        ax.set_title(title, fontsize=9)
    ax.legend(handles, labels, fontsize=7, loc="best")
    return fig


@styled
def sample_size_plot(ns: Sequence[int], errors: dict[str, np.ndarray], *, optimistic: float,
                     n_params: int, threshold: float, ax: Axes | None = None, title: str = "") -> Figure:
    """Relative test error against n (per seed: dots, median: line), O_f* and P marked.

    errors: label -> (n_values, seeds) array.
    """
    fig, ax, _ = figure_and_axes(ax, 5.0, 3.6)
    ns = np.asarray(ns, dtype=float)
    for (label, err), color in zip(errors.items(), ("tab:blue", "tab:orange", "tab:green"), strict=False):
        err = np.asarray(err, dtype=float)
        for s in range(err.shape[1]):
            ax.scatter(ns, err[:, s], s=10, color=color, alpha=0.5)
        ax.plot(ns, np.nanmedian(err, axis=1), color=color, label=label)
    ax.axvline(optimistic, ls="--", color="k", lw=1)
    ax.axvline(n_params, ls=":", color="k", lw=1)
    ax.axhline(threshold, ls="-.", color="0.5", lw=1)
    top = ax.get_ylim()[1] if ax.get_ylim()[1] > 0 else 1
    ax.annotate(r"$O_{f^*}$", (optimistic, top), fontsize=8, ha="right", va="top")
    ax.annotate("P", (n_params, top), fontsize=8, ha="right", va="top")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training samples n")
    ax.set_ylabel("relative test error")
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title, fontsize=9)
    return fig


@styled
def plateau_plot(loss: np.ndarray, plateaus: Sequence[int], reduced_loss: Sequence[float],
                 widths: Sequence[int], *, ax: Axes | None = None, title: str = "") -> Figure:
    """Training loss with each plateau's snapshot marked and the loss of its reduced network."""
    fig, ax, _ = figure_and_axes(ax, 5.2, 3.6)
    epochs = np.arange(1, len(loss) + 1)
    ax.plot(epochs, loss, color="tab:blue", label="wide network")
    for e, value, width in zip(plateaus, reduced_loss, widths, strict=True):
        ax.scatter([max(e, 1)], [value], color="tab:red", zorder=3)
        ax.annotate(f"width {width}", (max(e, 1), value), fontsize=7, xytext=(4, 4),
                    textcoords="offset points")
    ax.scatter([], [], color="tab:red", label="merged narrow network")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title, fontsize=9)
    return fig
