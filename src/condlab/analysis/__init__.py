"""Measure condensation and hold it against the theory of Sec. 5 (plain functions, numpy out).

Conventions: a layer's input weights W are (m, q) with the bias as last column; amplitude
of a neuron = the norm of its full row; a *line* is an orientation up to sign (u ~ -u), a
*direction* keeps the sign. Thresholds of ``count_orientations`` are documented there.

The public surface is ``__all__`` (docs/analysis.md, "Python API"); the helpers behind it
(replay, direction fields, flow integration, chunked cosines) stay in the private modules.
"""

from ._cosine import cosine_matrix
from ._orientations import Cluster, Orientations, cosine_order, count_orientations
from ._rank import ModelRank, RankTrace, model_rank, rank_over_snapshots
from ._report import LayerReport, analyze_layer, default_epoch
from ._run import RunAnalysis, analyze_run
from ._theory import Prediction, effective_residual, line_angles, output_direction, predict_lines

__all__ = [
    "Cluster", "LayerReport", "ModelRank", "Orientations", "Prediction", "RankTrace", "RunAnalysis",
    "analyze_layer", "analyze_run", "cosine_matrix", "cosine_order", "count_orientations",
    "default_epoch", "effective_residual", "line_angles", "model_rank", "output_direction",
    "predict_lines", "rank_over_snapshots",
]
