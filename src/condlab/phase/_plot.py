"""Figures of a phase diagram; they only read results.

Two layers: measured regimes with the theory's boundary and the named schemes, (theta, A) scatters of
a typical point of each regime, and loss against the rescaled time. Three layers: a regime map per
layer with the two-layer boundary and our heuristic's, and W1 scatters at two corners."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from ..plotting import new_figure, save_figure
from ._net2 import init_params, orientation_amplitude
from ._param import kernel_time, lazy_exponents, rescaled_time

if TYPE_CHECKING:
    from ._depth import Depth

REGIMES = ["linear", "critical", "condensed"]
COLORS = ["#4c72b0", "#dddd88", "#c44e52"]
TYPICAL = {"linear": ("lecun", 0.5, 0.5), "critical": ("mean-field", 1.0, 0.0),
           "condensed": ("", 1.75, 0.0)}


def figures2(depth: Depth, fits, rows: list[dict[str, Any]], runs_dir: Path, out: Path) -> list[Path]:
    """OUT/phase_diagram (the diagram, cells coloured by measured regime, and one (theta, A) scatter
    per regime) and OUT/rescaled_time."""
    fig = new_figure(15, 4.6)
    grid = fig.add_gridspec(1, 4, width_ratios=[1.5, 1, 1, 1])
    _diagram_panel(fig.add_subplot(grid[0]), fits)
    for i, regime in enumerate(REGIMES):
        _scatter_panel(fig.add_subplot(grid[i + 1]), regime, rows, runs_dir, depth)
    return save_figure(fig, out / "phase_diagram") + rescaled_time_figure(depth, rows, runs_dir,
                                                                         out / "rescaled_time")


def _edges(values: list[float]) -> np.ndarray:
    v = np.asarray(sorted(values), dtype=float)
    if len(v) == 1:
        return np.array([v[0] - 0.5, v[0] + 0.5])
    mid = (v[1:] + v[:-1]) / 2
    return np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])


def _diagram_panel(ax, fits) -> None:
    grid = [f for f in fits if not f.scheme]
    gs = sorted({f.gamma for f in grid})
    gps = sorted({f.gamma_prime for f in grid})
    cells = np.full((len(gps), len(gs)), np.nan)
    for f in grid:
        if f.measured in REGIMES:
            cells[gps.index(f.gamma_prime), gs.index(f.gamma)] = REGIMES.index(f.measured)
    ax.pcolormesh(_edges(gs), _edges(gps), np.ma.masked_invalid(cells), cmap=ListedColormap(COLORS),
                  vmin=-0.5, vmax=2.5, edgecolors="white", linewidth=0.5)
    for f in grid:
        if f.near_boundary:
            ax.plot(f.gamma, f.gamma_prime, marker=".", color="k", ms=3)
        elif not f.agrees:
            ax.plot(f.gamma, f.gamma_prime, marker="x", color="k", ms=8)
    lo, hi = min(gps + [0]) - 0.2, max(gps + [1]) + 0.2
    ax.plot([1, 1], [lo, 0], "k-", lw=2)
    ax.plot([1, hi + 1], [0, hi], "k-", lw=2)
    _mark_schemes(ax, [f for f in fits if f.scheme])
    ax.set_xlim(_edges(gs)[0], _edges(gs)[-1])
    ax.set_ylim(_edges(gps)[0], _edges(gps)[-1])
    ax.set_xlabel("γ")
    ax.set_ylabel("γ'")
    ax.set_title("measured regime (slope of log RD(θ_w) vs log m)")
    handles = [Patch(color=c, label=r) for c, r in zip(COLORS, REGIMES, strict=True)]
    ax.legend(handles=handles, loc="upper left", fontsize=7, title="· near boundary, × disagrees",
              title_fontsize=7)


def _mark_schemes(ax, fits) -> None:
    at: dict[tuple[float, float], list[str]] = {}
    for f in fits:
        at.setdefault((f.gamma, f.gamma_prime), []).append(f.scheme)
    for (g, gp), names in at.items():
        ax.plot(g, gp, marker="*", color="k", ms=12, mec="white")
        ax.annotate(", ".join(names), (g, gp), xytext=(6, -10), textcoords="offset points", fontsize=7)


def _pick(rows: list[dict[str, Any]], scheme: str, g: float, gp: float) -> dict[str, Any] | None:
    """The run of a scheme, else of the grid point nearest (g, gp), at its largest width and smallest
    seed (None when there is none)."""
    done = [r for r in rows if r.get("status") == "complete"]
    if scheme:
        cands = [r for r in done if r["scheme"] == scheme]
    else:
        grid = [r for r in done if not r["scheme"]]
        if not grid:
            return None
        best = min(grid, key=lambda r: (r["gamma"] - g) ** 2 + (r["gamma_prime"] - gp) ** 2)
        cands = [r for r in grid if (r["gamma"], r["gamma_prime"]) == (best["gamma"], best["gamma_prime"])]
    if not cands:
        return None
    return max(cands, key=lambda r: (r["width"], -r["seed"]))


def _scatter_panel(ax, regime: str, rows: list[dict[str, Any]], runs_dir: Path, depth: Depth) -> None:
    row = _pick(rows, *TYPICAL[regime])
    if row is None:
        ax.set_title(f"{regime}: no finished run")
        return
    final = load_neurons(runs_dir, row["run"])
    k = len(final["a"])
    m = int(row["width"])
    a0, w0 = init_params(m, [depth.run_scales(row, m)], [int(row["seed"])], False)
    start = {"a": a0[0, :k].numpy(), "w": w0[0, :k, 0].numpy(), "b": w0[0, :k, 1].numpy()}
    for data, colour, label in ((start, "0.6", "initial"), (final, COLORS[REGIMES.index(regime)], "final")):
        theta, amp = orientation_amplitude(data)
        ax.scatter(theta, amp / amp.max(), s=3, color=colour, label=label, rasterized=True)
    name = row["scheme"] or f"γ={row['gamma']:g}, γ'={row['gamma_prime']:g}"
    ax.set_title(f"{regime}: {name}, m={row['width']}", fontsize=9)
    ax.set_xlabel("θ (angle of (w, b))")
    ax.set_ylabel("A / max A  (A = |a| ‖(w, b)‖)")
    ax.set_xlim(-np.pi, np.pi)
    ax.legend(fontsize=7, markerscale=3)


def rescaled_time_figure(depth: Depth, rows: list[dict[str, Any]], runs_dir: Path, path: Path) -> list[Path]:
    """Loss of every width at one point (mean-field, else the first grid point) against t and t_bar."""
    done = [r for r in rows if r.get("status") == "complete" and r["seed"] == min(x["seed"] for x in rows)]
    pick = [r for r in done if r["scheme"] == "mean-field"] or \
        [r for r in done if (r["gamma"], r["gamma_prime"], r["scheme"]) ==
         (done[0]["gamma"], done[0]["gamma_prime"], done[0]["scheme"])] if done else []
    fig = new_figure(13, 3.6)
    axes = fig.subplots(1, 3)
    for r in sorted(pick, key=lambda r: r["width"]):
        curve = load_curve(runs_dir, r["run"])
        s = depth.run_scales(r, int(r["width"]))
        axes[0].loglog(curve["time"][1:], curve["loss"][1:], label=f"m={r['width']}")
        axes[1].loglog(rescaled_time(curve["time"][1:], s), curve["loss"][1:], label=f"m={r['width']}")
        axes[2].loglog(kernel_time(curve["time"][1:], s, int(r["width"])), curve["loss"][1:],
                       label=f"m={r['width']}")
    where = (pick[0]["scheme"] or f"γ={pick[0]['gamma']:g}, γ'={pick[0]['gamma_prime']:g}") if pick else "-"
    axes[0].set_xlabel("t (sum of step sizes)")
    axes[1].set_xlabel("t̄ = t / (β1 β2)  (JMLR)")
    axes[2].set_xlabel("t̂ = t̄ m κ² (κ' + 1/κ')")
    for ax in axes:
        ax.set_ylabel("loss")
        ax.set_title(where, fontsize=9)
        ax.legend(fontsize=7)
    return save_figure(fig, path)


# --- three layers ----------------------------------------------------------------------------------

LAYER_NAMES = {"w1": "W1 (first hidden layer, with bias)", "w2": "W2 (second hidden layer)",
               "a": "a (output layer)"}


def figures3(depth: Depth, fits, rows: list[dict[str, Any]], runs_dir: Path, out: Path) -> list[Path]:
    """OUT/phase_diagram: per-layer regime maps (W1, W2, a) and W1 scatters at the linear and the
    condensed corner."""
    fig = new_figure(20, 4.6)
    grid = fig.add_gridspec(1, 5)
    for i, layer in enumerate(depth.net.LAYERS):
        _map_panel(fig.add_subplot(grid[i]), [f for f in fits if f.layer == layer], layer, legend=i == 0)
    for i, corner in enumerate([(0.25, 1.5), (2.25, -0.5)]):
        _scatter3(fig.add_subplot(grid[3 + i]), corner, rows, runs_dir)
    return save_figure(fig, out / "phase_diagram")


def _map_panel(ax, fits, layer: str, legend: bool) -> None:
    grid = [f for f in fits if not f.scheme]
    if not grid:
        ax.set_title(f"{layer}: no grid point")
        return
    gs, gps = sorted({f.gamma for f in grid}), sorted({f.gamma_prime for f in grid})
    cells = np.full((len(gps), len(gs)), np.nan)
    for f in grid:
        if f.measured in REGIMES:
            cells[gps.index(f.gamma_prime), gs.index(f.gamma)] = REGIMES.index(f.measured)
        if f.agrees_two_layer is False:
            ax.plot(f.gamma, f.gamma_prime, marker="x", color="k", ms=7)
    ax.pcolormesh(_edges(gs), _edges(gps), np.ma.masked_invalid(cells), cmap=ListedColormap(COLORS),
                  vmin=-0.5, vmax=2.5, edgecolors="white", linewidth=0.5)
    lo, hi = _edges(gps)[0], _edges(gps)[-1]
    ax.plot([1, 1], [lo, 0], "k--", lw=1.5)
    ax.plot([1, hi + 1], [0, hi], "k--", lw=1.5)
    gg, pp = np.meshgrid(np.linspace(_edges(gs)[0], _edges(gs)[-1], 120), np.linspace(lo, hi, 120))
    g2 = grid[0].gamma2
    def exponent(g: float, p: float) -> float:  # hidden maps: where the lazy picture fails for either
        e = lazy_exponents(g, p, g2)
        return e["a"] if layer == "a" else max(e["w1"], e["w2"])

    top = np.vectorize(exponent)(gg, pp)
    # just below 0: the refined estimate saturates at exactly 0 past the boundary (a plateau)
    ax.contour(gg, pp, top, levels=[-1e-6], colors="k", linestyles=":", linewidths=1.5)
    for f in fits:
        if f.scheme:
            ax.plot(f.gamma, f.gamma_prime, marker="*", color="k", ms=10, mec="white")
    ax.set_xlim(_edges(gs)[0], _edges(gs)[-1])
    ax.set_ylim(lo, hi)
    ax.set_xlabel("γ")
    ax.set_ylabel("γ'")
    ax.set_title(f"{LAYER_NAMES[layer]}\nslope of log RD vs log m (γ2 = {g2:g})", fontsize=9)
    if legend:
        handles = [Patch(color=c, label=r) for c, r in zip(COLORS, REGIMES, strict=True)]
        ax.legend(handles=handles, loc="upper left", fontsize=6,
                  title="-- two-layer boundary\n·· heuristic exponent 0 (ours)\n× differs from two-layer",
                  title_fontsize=6)


def _scatter3(ax, corner: tuple[float, float], rows: list[dict[str, Any]], runs_dir: Path) -> None:
    row = _pick(rows, "", *corner)
    if row is None:
        ax.set_title("no finished run")
        return
    z = load_neurons(runs_dir, row["run"])
    for w1, out, colour, label in ((z["w1_0"], z["w2_out_0"], "0.6", "initial"),
                                   (z["w1"], z["w2_out"], COLORS[2], "final")):
        amp = out * np.hypot(w1[:, 0], w1[:, 1])
        ax.scatter(np.arctan2(w1[:, 1], w1[:, 0]), amp / amp.max(), s=3, color=colour, label=label,
                   rasterized=True)
    ax.set_title(f"W1 neurons: γ={row['gamma']:g}, γ'={row['gamma_prime']:g}, m={row['width']}", fontsize=9)
    ax.set_xlabel("θ (angle of (w, b))")
    ax.set_ylabel("A / max A  (A = ‖W2[:, j]‖ ‖(w_j, b_j)‖)")
    ax.set_xlim(-np.pi, np.pi)
    ax.legend(fontsize=7, markerscale=3)


def load_neurons(runs_dir: Path, run: str) -> dict[str, np.ndarray]:
    with np.load(runs_dir / run / "neurons.npz") as z:
        return {k: z[k] for k in z.files}


def load_curve(runs_dir: Path, run: str) -> dict[str, np.ndarray]:
    with np.load(runs_dir / run / "curve.npz") as z:
        return {k: z[k] for k in z.files}

