"""Measure condensation and hold it against the theory of Sec. 5 (plain functions, numpy out).

Conventions: a layer's input weights W are (m, q) with the bias as last column; amplitude
of a neuron = the norm of its full row; a *line* is an orientation up to sign (u ~ -u), a
*direction* keeps the sign. Thresholds of ``count_orientations`` are documented there.
"""

from ._cosine import abs_cosine_neighbors, cosine_matrix, cosine_order
from ._fields import (
                      PolyFit,
                      direction_field,
                      orientation_trajectories,
                      polynomial_fits,
                      stable_lines_2d,
                      velocities,
)
from ._orientations import Cluster, Orientations, count_orientations
from ._rank import ModelRank, RankTrace, jacobian, model_rank, rank_over_snapshots
from ._replay import History, replay_neurons
from ._report import LayerReport, analyze_layer, default_epoch, layer_history, run_history
from ._run import RunAnalysis, analyze_run
from ._theory import (
                      Prediction,
                      effective_residual,
                      flow_for_optimizer,
                      flow_lines,
                      line_angles,
                      match_report,
                      output_direction,
                      p1_line,
                      p2_lines,
                      predict_lines,
                      roots_1d,
)

__all__ = [
    "Cluster", "History", "LayerReport", "Orientations", "PolyFit", "Prediction", "RunAnalysis",
    "abs_cosine_neighbors", "analyze_layer", "analyze_run", "cosine_matrix", "cosine_order",
    "count_orientations", "default_epoch", "direction_field", "effective_residual", "flow_for_optimizer",
    "flow_lines", "layer_history", "line_angles", "run_history", "match_report", "orientation_trajectories",
    "output_direction", "p1_line",
    "p2_lines", "polynomial_fits", "predict_lines", "replay_neurons", "roots_1d",
    "stable_lines_2d", "velocities",
    "ModelRank", "RankTrace", "jacobian", "model_rank", "rank_over_snapshots",
]
