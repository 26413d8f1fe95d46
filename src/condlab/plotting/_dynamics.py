"""Input-weight dynamics: the (w, b) direction field (the paper's Fig. 6) and orientation trajectories."""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from ._inputs import as_array, as_pairs, as_vector
from ._style import figure_and_axes, new_figure, styled

FIELD_COLOR = "0.45"
LINE_COLOR = "tab:purple"
WEIGHT_COLOR = "tab:green"
VELOCITY_COLOR = "tab:orange"
AMPLITUDE_LABEL = "amplitude ‖(w, b)‖"


def _unit(u: np.ndarray, v: np.ndarray) -> tuple[np.ma.MaskedArray, np.ma.MaskedArray]:
    """Arrow components scaled to unit length; zero or non-finite arrows are masked."""
    n = np.hypot(u, v)
    bad = ~(np.isfinite(n) & (n > 0))
    safe = np.where(bad, 1.0, n)
    return np.ma.array(u / safe, mask=bad), np.ma.array(v / safe, mask=bad)


def _grid_step(W_grid: np.ndarray, B_grid: np.ndarray) -> float:
    steps = [np.ptp(W_grid) / max(W_grid.shape[1] - 1, 1), np.ptp(B_grid) / max(B_grid.shape[0] - 1, 1)]
    positive = [s for s in steps if s > 0]
    return min(positive) if positive else 1.0


def _limits(Wg: np.ndarray, Bg: np.ndarray, extra: np.ndarray | None, step: float) -> np.ndarray:
    """[[w_lo, w_hi], [b_lo, b_hi]] covering the grid (and `extra` points), half a step of margin."""
    pts = np.column_stack([Wg.ravel(), Bg.ravel()])
    if extra is not None:
        pts = np.vstack([pts, extra])
    pts = pts[np.all(np.isfinite(pts), axis=1)]
    if pts.size == 0:
        return np.array([[-1.0, 1.0], [-1.0, 1.0]])
    return np.column_stack([pts.min(axis=0) - step / 2, pts.max(axis=0) + step / 2])


def _draw_stable_lines(ax: Axes, lines: np.ndarray, lim: np.ndarray) -> None:
    """Each unit row u as the full line through the origin (clipped by the axes)."""
    reach = 2.0 * float(np.hypot(*np.abs(lim).max(axis=1)))
    for i, u in enumerate(lines):
        n = np.hypot(*u)
        if not (np.isfinite(n) and n > 0):
            continue
        a, b = reach * u / n
        ax.plot([-a, a], [-b, b], color=LINE_COLOR, lw=1.6, label="stable line" if i == 0 else None, zorder=2)


def _draw_neurons(ax: Axes, weights: np.ndarray, velocities: np.ndarray | None, step: float) -> None:
    """Neurons' (w, b) as green dots and their normalized velocities as orange arrows."""
    ax.plot(weights[:, 0], weights[:, 1], "o", color=WEIGHT_COLOR, ms=4, mec="white", mew=0.4,
            label="neuron (w, b)", zorder=4)
    if velocities is None:
        return
    if velocities.shape != weights.shape:
        raise ValueError(f"velocities {velocities.shape} must match weights {weights.shape}")
    vu, vv = _unit(velocities[:, 0], velocities[:, 1])
    ax.quiver(weights[:, 0], weights[:, 1], vu, vv, color=VELOCITY_COLOR, angles="xy", scale_units="xy",
              scale=1 / (1.6 * step), width=0.006, zorder=3)
    # A quiver's own legend entry is a plain patch; show an arrow instead.
    ax.add_line(Line2D([], [], color=VELOCITY_COLOR, ls="none", marker=r"$\rightarrow$", ms=11,
                       label="velocity direction"))


@styled
def direction_field_plot(
    W_grid: np.ndarray,
    B_grid: np.ndarray,
    dW: np.ndarray,
    dB: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    velocities: np.ndarray | None = None,
    stable_lines: np.ndarray | None = None,
    title: str = "",
    ax: Axes | None = None,
) -> Figure:
    """Direction field of the input weight (w, b), stable lines, neurons and velocities: Fig. 6.

    With `ax`, draws into that panel (legend inside it) and returns its figure.
    """
    named = (("W_grid", W_grid), ("B_grid", B_grid), ("dW", dW), ("dB", dB))
    Wg, Bg, U, V = (as_array(a, name, 2) for name, a in named)
    if not Wg.shape == Bg.shape == U.shape == V.shape:
        raise ValueError(f"grids and field differ in shape: {Wg.shape}, {Bg.shape}, {U.shape}, {V.shape}")
    if velocities is not None and weights is None:
        raise ValueError("velocities need the weights they start from")
    Wn = None if weights is None else as_pairs(weights, "weights")
    step = _grid_step(Wg, Bg)
    lim = _limits(Wg, Bg, Wn, step)
    fig, ax, own = figure_and_axes(ax, 3.8, 4.1)
    Un, Vn = _unit(U, V)
    ax.quiver(Wg, Bg, Un, Vn, color=FIELD_COLOR, angles="xy", scale_units="xy", scale=1 / (0.7 * step),
              width=0.004, headwidth=3.5, headlength=4, headaxislength=3.5, pivot="mid", zorder=1)
    if stable_lines is not None:
        _draw_stable_lines(ax, as_pairs(stable_lines, "stable_lines"), lim)
    if Wn is not None:
        _draw_neurons(ax, Wn, None if velocities is None else as_pairs(velocities, "velocities"), step)
    ax.set_xlim(*lim[0])
    ax.set_ylim(*lim[1])
    ax.set_aspect("equal", adjustable="box")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.set_xlabel("w")
    ax.set_ylabel("b")
    if ax.get_legend_handles_labels()[0] and own:
        fig.legend(loc="outside lower center", ncols=3, handlelength=1.6, columnspacing=1.0)
    elif ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small", loc="lower left")
    if title:
        ax.set_title(title)
    return fig


def _paths(t: np.ndarray, Y: np.ndarray, order: np.ndarray, wrap: bool) -> list[np.ndarray]:
    """Polylines (epoch, value) of the neurons in `order`; NaN vertices leave gaps."""
    out = []
    for j in order:
        y = Y[:, j]
        if wrap:
            jumps = np.flatnonzero(np.abs(np.diff(y)) > np.pi) + 1
            out.append(np.column_stack([np.insert(t, jumps, np.nan), np.insert(y, jumps, np.nan)]))
        else:
            out.append(np.column_stack([t, y]))
    return out


def _amplitude_norm(final: np.ndarray) -> Normalize:
    """Log colour scale over the finite, positive final amplitudes."""
    good = final[np.isfinite(final) & (final > 0)]
    if good.size == 0:
        return Normalize(0.0, 1.0)
    lo, hi = float(good.min()), float(good.max())
    return LogNorm(lo, hi) if hi > lo else LogNorm(lo / 2, hi * 2)


def _set_limits(ax_t: Axes, ax_a: Axes, t: np.ndarray, amp: np.ndarray) -> None:
    """Explicit limits: collections with NaN gaps do not autoscale reliably."""
    finite_t = t[np.isfinite(t)]
    if finite_t.size and np.ptp(finite_t) > 0:
        ax_t.set_xlim(finite_t.min(), finite_t.max())
    ax_t.set_ylim(-np.pi - 0.15, np.pi + 0.15)
    good = amp[np.isfinite(amp) & (amp > 0)]
    if good.size:
        lo, hi = float(good.min()), float(good.max())
        ax_a.set_ylim(lo / 1.5, hi * 1.5)


@styled
def trajectories_plot(
    epochs: np.ndarray, theta: np.ndarray, amplitude: np.ndarray, *, title: str = ""
) -> Figure:
    """Orientation θ and amplitude ‖(w, b)‖ of every neuron vs epoch (the dynamics behind Figs. 5-6)."""
    t = as_vector(epochs, "epochs")
    th, amp = as_array(theta, "theta", 2), as_array(amplitude, "amplitude", 2)
    if th.shape != amp.shape or th.shape[0] != t.size:
        raise ValueError(f"theta {th.shape} and amplitude {amp.shape} must both be (len(epochs)={t.size}, m)")
    final = amp[-1] if amp.shape[0] else np.zeros(amp.shape[1])
    norm = _amplitude_norm(final)
    colour = np.where(np.isfinite(final) & (final > 0), final, norm.vmin)
    order = np.argsort(colour, kind="stable")  # largest neurons drawn last, on top
    fig = new_figure(4.6, 4.4)
    ax_t, ax_a = fig.subplots(2, 1, sharex=True, height_ratios=[1.25, 1.0])
    ax_a.set_yscale("log")
    amp_shown = np.where(amp > 0, amp, np.nan)  # log axis: zero amplitude is left out
    for ax, Y, wrap in ((ax_t, th, True), (ax_a, amp_shown, False)):
        lc = LineCollection(_paths(t, Y, order, wrap), cmap="viridis", norm=norm, linewidths=0.8, alpha=0.7)
        lc.set_array(colour[order])
        ax.add_collection(lc, autolim=False)
    _set_limits(ax_t, ax_a, t, amp)
    ax_t.set_yticks([-np.pi, -np.pi / 2, 0, np.pi / 2, np.pi], ["−π", "−π/2", "0", "π/2", "π"])
    ax_t.set_ylabel("orientation θ (rad)")
    ax_a.set_ylabel(AMPLITUDE_LABEL)
    ax_a.set_xlabel("epoch")
    cbar = fig.colorbar(lc, ax=[ax_t, ax_a], shrink=0.8, aspect=30, pad=0.02)
    cbar.set_label("final " + AMPLITUDE_LABEL)
    cbar.solids.set_alpha(1.0)
    if title:
        ax_t.set_title(title)
    return fig
