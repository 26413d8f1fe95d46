"""Reproduce the experiments of the source documents, each with a verdict on every claim.

condlab reproduce fig3 [--quick] [--seeds N]   ->  OUT/fig3/claims.json, fig3.png/svg, runs/
condlab reproduce all                          ->  every experiment + OUT/summary.md/.csv
"""

from .._lazy import exports

# name -> the private module that defines it; imported on first use (no import cost, no cycles)
_EXPORTS = {
    "Claim": "._claims",
    "Context": "._context",
    "DEFAULT_DATA_SEEDS": "._runner",
    "DEFAULT_SEEDS": "._runner",
    "EXPERIMENTS": "._runner",
    "Experiment": "._context",
    "ExperimentResult": "._claims",
    "QUICK_DATA_SEEDS": "._runner",
    "QUICK_SEEDS": "._runner",
    "check_data_dir": "._runner",
    "reproduce": "._runner",
    "reproduce_all": "._runner",
    "seed_grid": "._runner",
    "summary_rows": "._claims",
    "unknown": "._runner",
    "write_summary": "._claims",
}

# the public API of this package; the other names of _EXPORTS serve condlab's other subpackages
__all__ = [
    "Claim", "Context", "DEFAULT_DATA_SEEDS", "DEFAULT_SEEDS", "EXPERIMENTS", "Experiment",
    "ExperimentResult", "QUICK_DATA_SEEDS", "QUICK_SEEDS", "check_data_dir", "reproduce",
    "reproduce_all", "summary_rows", "write_summary",
]

__getattr__, __dir__ = exports(__name__, _EXPORTS)
