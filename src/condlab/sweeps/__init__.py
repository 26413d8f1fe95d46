"""Sweeps: a spec planned into runs, trained in batches by an executor, gathered in one table.

Public: ``sweep``/``SweepResult`` (re-exported by ``condlab``); ``Executor`` and
``register_executor`` add an executor in one file (docs/sweeps.md, "Your own executor"), which
gets ``Batch``es to train and reports each as a ``BatchDone`` (or wraps ``LocalExecutor``).
"""

from .._lazy import exports

# name -> the private module that defines it; imported on first use (no import cost, no cycles)
_EXPORTS = {
    "Batch": "._run",
    "BatchDone": "._run",
    "EXECUTORS": "._executors",
    "Executor": "._executors",
    "LocalExecutor": "._local",
    "RayExecutor": "._ray",
    "BATCHED_KEYS": "._hash",
    "UNHASHED_KEYS": "._hash",
    "batch_key": "._hash",
    "clone_tree": "._hash",
    "drop_key": "._hash",
    "run_hash": "._hash",
    "HASH_CHARS": "._plan",
    "HASH_VERSION": "._plan",
    "Plan": "._plan",
    "PlannedRun": "._plan",
    "SweepResult": "._sweep",
    "canonical_json": "._plan",
    "check_run_count": "._plan",
    "csv_text": "._table",
    "execute_batches": "._sweep",
    "executor_class": "._executors",
    "finished_row": "._run",
    "make_executor": "._sweep",
    "open_storage": "._storage",
    "register_executor": "._executors",
    "summarize": "._run",
    "sweep": "._sweep",
    "write_inputs": "._sweep",
    "write_table": "._table",
}

# the public API of this package; the other names of _EXPORTS serve condlab's other subpackages
__all__ = ["Batch", "BatchDone", "Executor", "LocalExecutor", "SweepResult", "register_executor", "sweep"]

__getattr__, __dir__ = exports(__name__, _EXPORTS)
