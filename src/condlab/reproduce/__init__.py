"""Reproduce the experiments of the source documents, each with a verdict on every claim.

    condlab reproduce fig3 [--quick] [--seeds N]   ->  OUT/fig3/claims.json, fig3.png/svg, runs/
    condlab reproduce all                          ->  every experiment + OUT/summary.md/.csv
"""

from ._claims import Claim, ExperimentResult, summary_rows, write_summary
from ._context import Context, Experiment
from ._runner import (
    DEFAULT_DATA_SEEDS,
    DEFAULT_SEEDS,
    EXPERIMENTS,
    QUICK_DATA_SEEDS,
    QUICK_SEEDS,
    check_data_dir,
    reproduce,
    reproduce_all,
)

__all__ = ["Claim", "Context", "DEFAULT_DATA_SEEDS", "DEFAULT_SEEDS", "EXPERIMENTS", "Experiment",
           "ExperimentResult", "QUICK_DATA_SEEDS", "QUICK_SEEDS", "check_data_dir", "reproduce",
           "reproduce_all", "summary_rows", "write_summary"]
