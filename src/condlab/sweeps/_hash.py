"""How a sweep names a run and a batch: hashes of canonical JSON of resolved configs.

(Shared by the planner, ``sweeps/_plan.py``, and its fast path, ``_accel/_resolve.py``.)
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# RunSpec field -> the config list that condlab.train varies per run inside one batch (see
# run_specs): runs that differ only in these are trained together. A field added to RunSpec
# (per-run weight decay, dropout, ...) becomes batchable by listing it here.
BATCHED: dict[str, str] = {"seed": "train.seeds", "init_std": "model.init_std", "lr": "train.lr",
                           "weight_decay": "train.weight_decay", "momentum": "train.momentum",
                           "dropout": "model.dropout"}
BATCHED_KEYS: tuple[str, ...] = tuple(BATCHED.values())
# Keys that do not change what a run computes: left out of its hash.
UNHASHED_KEYS: tuple[str, ...] = ("name", "train.device", "train.checkpoint_seconds")
HASH_VERSION = 1
HASH_CHARS = 16


def clone_tree(tree: Any) -> Any:
    """Copy of a config tree (dicts, lists, scalars): copy.deepcopy's result, several times faster."""
    if isinstance(tree, dict):
        return {k: clone_tree(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [clone_tree(v) for v in tree]
    return tree  # scalars, and tuples of scalars, are immutable


def canonical_json(obj: Any) -> str:
    """Sorted keys, no spaces, floats as Python's shortest round-trip repr."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def run_hash(config: dict[str, Any], task: str = "") -> str:
    """Identity of a single-run config (what goes into it: ``_sweep_plan``'s docstring); a run
    trained by a task (which may record and measure differently) has the task in its identity."""
    ident = clone_tree(config)
    for key in UNHASHED_KEYS:
        drop_key(ident, key)
    text = canonical_json({"condlab_run": HASH_VERSION, "config": ident, **({"task": task} if task else {})})
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_CHARS]


def batch_key(single: dict[str, Any]) -> str:
    shared = clone_tree(single)
    for key in BATCHED_KEYS + ("name",):
        drop_key(shared, key)
    return hashlib.sha256(canonical_json(shared).encode()).hexdigest()[:HASH_CHARS]


def drop_key(tree: dict[str, Any], key: str) -> None:
    *parents, last = key.split(".")
    for part in parents:
        tree = tree[part]
    tree.pop(last, None)
