"""Measure condensation and hold it against the theory of Sec. 5 (plain functions, numpy out).

Conventions: a layer's input weights W are (m, q) with the bias as last column; amplitude
of a neuron = the norm of its full row; a *line* is an orientation up to sign (u ~ -u), a
*direction* keeps the sign. Thresholds of ``count_orientations`` are documented there.

The public surface is ``__all__`` (docs/analysis.md, "Python API"); the helpers behind it
(replay, direction fields, flow integration, chunked cosines) stay in the private modules.
"""

from .._lazy import exports

# name -> the private module that defines it; imported on first use (no import cost, no cycles)
_EXPORTS = {
    "INITIAL_STAGE_SHARE": "._stage",
    "Cluster": "._orientations",
    "LayerReport": "._report",
    "ModelRank": "._rank",
    "Orientations": "._orientations",
    "Prediction": "._theory",
    "RankTrace": "._rank",
    "Reduction": "._reduce",
    "RunAnalysis": "._run",
    "analyze_layer": "._report",
    "analyze_run": "._run",
    "as_matrix": "._cosine",
    "cosine_matrix": "._cosine",
    "cosine_order": "._orientations",
    "count_lines": "._line_counts",
    "count_lines_many": "._line_counts",
    "count_orientations": "._orientations",
    "count_orientations_many": "._orientations",
    "default_epoch": "._stage",
    "effective_rank": "._reduce",
    "effective_residual": "._leading",
    "flow_for_optimizer": "._leading",
    "is_external": "._external",
    "line_angles": "._theory",
    "may_use_lanczos": "._arcs",
    "model_rank": "._rank",
    "output_direction": "._leading",
    "predict_lines": "._theory",
    "preload_lanczos": "._arcs",
    "rank_over_snapshots": "._rank",
    "reduce": "._reduce",
}

# the public API of this package; the other names of _EXPORTS serve condlab's other subpackages
__all__ = [
    "Cluster", "LayerReport", "ModelRank", "Orientations", "Prediction", "RankTrace", "Reduction",
    "RunAnalysis", "analyze_layer", "analyze_run", "cosine_matrix", "cosine_order",
    "count_orientations", "count_orientations_many", "default_epoch", "effective_rank", "effective_residual",
    "line_angles",
    "model_rank", "output_direction", "predict_lines", "rank_over_snapshots", "reduce",
]

__getattr__, __dir__ = exports(__name__, _EXPORTS)
