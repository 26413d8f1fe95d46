"""Paper-style figures for condlab results (Zhou et al., NeurIPS 2022, Figs. 2-6).

Plotting only reads arrays that analysis and training produced; it never trains
or analyses. Every function builds a fresh, unmanaged `matplotlib.figure.Figure`
(no pyplot state, no backend switch) and returns it; `save_figure` writes it to
disk as PNG (150 dpi) and SVG, each file atomically.

    cosine_heatmap(W, order)           Figs. 2-4: D(u, v) of input weights, colour range [-1, 1]
    cosine_panels([(title, W, order)]) Figs. 2-4: a row of (a), (b), ... heat maps, one colour bar
    direction_field_plot(...)          Fig. 6: (w, b) direction field, stable lines, neurons
    polyfit_plot(x, y, fits)           Fig. 5: network output with low-degree polynomial fits
    loss_plot(loss)                    loss vs epoch with the 70 % initial-stage threshold
    trajectories_plot(epochs, θ, amp)  orientation and amplitude of every neuron vs epoch
    save_figure(fig, path)             -> [path.png, path.svg]
    analysis_figures(run, analysis, out) every figure of one analysed run
"""

from .._lazy import exports

# name -> the private module that defines it; imported on first use (no import cost, no cycles)
_EXPORTS = {
    "COSINE_CMAP": "._style",
    "COSINE_ANCHORS": "._colors",
    "cosine_colors": "._colors",
    "analysis_figures": "._analysis",
    "cosine_heatmap": "._heatmaps",
    "heatmap_rows": "._heatmaps",
    "cosine_panels": "._heatmaps",
    "direction_field_plot": "._dynamics",
    "loss_plot": "._curves",
    "new_figure": "._style",
    "panel_row": "._style",
    "plateau_plot": "._theory",
    "polyfit_plot": "._curves",
    "rank_plot": "._theory",
    "sample_size_plot": "._theory",
    "save_figure": "._style",
    "styled": "._style",
    "trajectories_plot": "._dynamics",
}

# the public API of this package; the other names of _EXPORTS serve condlab's other subpackages
__all__ = [
    "analysis_figures", "cosine_heatmap", "cosine_panels", "direction_field_plot", "loss_plot",
    "panel_row", "polyfit_plot", "save_figure", "trajectories_plot",
]

__getattr__, __dir__ = exports(__name__, _EXPORTS)
