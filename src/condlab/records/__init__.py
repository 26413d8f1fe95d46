"""Run records: one directory per run, written atomically and read back (docs/records.md).
"""

from .._lazy import exports

# name -> the private module that defines it; imported on first use (no import cost, no cycles)
_EXPORTS = {
    "BatchSnapshots": "._snapshots",
    "Run": "._records",
    "RunResult": "._records",
    "RecordError": "._load",
    "RunSpec": "._records",
    "SnapshotRecorder": "._snapshots",
    "atomic_write_bytes": "._io",
    "atomic_write_json": "._io",
    "atomic_write_npz": "._io",
    "atomic_write_text": "._io",
    "commit_runs": "._records",
    "durable": "._io",
    "fill_known": "._prepare",
    "flush_now": "._io",
    "folder_lock": "._lock",
    "fsync_path": "._io",
    "load_checkpoint": "._safe_load",
    "load_source": "._safe_load",
    "load_run": "._load",
    "meta_bytes": "._records",
    "prepare_runs": "._prepare",
    "provenance": "._io",
    "record_files": "._prepare",
    "thinned_neurons": "._snapshots",
    "write_bodies": "._records",
    "write_run": "._records",
    "write_runs": "._records",
}

# the public API of this package; the other names of _EXPORTS serve condlab's other subpackages
__all__ = ["Run", "RunResult", "load_run"]

__getattr__, __dir__ = exports(__name__, _EXPORTS)
