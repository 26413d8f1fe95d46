"""Resolve a sweep spec into single runs, identified by a hash, grouped into batches.

A spec (YAML or a dict) is a base config plus axes::

    name: widths                      # optional; the runs' config name
    base: fig5                        # a preset, a config file (relative to the spec), or a mapping
    set: {train.epochs: 300}          # optional overrides of the base (dotted keys, like --set)
    grid: {model.width: [100, 1000]}  # cartesian product of every key's values
    zip: {data.n: [20, 40], data.high: [1.0, 1.5]}   # parallel lists (or a list of such groups)
    list: [{train.lr: 1e-3}, {train.lr: 5e-4, model.init_std: 0.01}]   # explicit settings
    seeds: {init: 3, data: [0, 1]}    # train.seeds (a count or a list) and data.seed values
    task: facilitators                # optional: a registered task (sweeps/_tasks.py) trains each batch

Every point of grid x zip x list x data seeds x init seeds is a config; each config is split
into single runs over the per-run (batchable) keys ``BATCHED_KEYS``. A run's identity is the
SHA-256 of the canonical JSON of its resolved single-run config (every key of the typed tree,
values as the tree types them, one value in each batchable list), without ``name``,
``train.device`` and ``train.checkpoint_seconds``, which say where and under what label it
ran, not what it computes.
Runs whose configs differ only in batchable keys share a batch: one ``condlab.train`` call.
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .._outputs import check_name
from ..training import Config, ConfigError, assign_key
from ._hash import (  # noqa: F401  (re-exported: the sweep engine and phase diagrams use them)
    BATCHED,
    BATCHED_KEYS,
    HASH_CHARS,
    HASH_VERSION,
    UNHASHED_KEYS,
    batch_key,
    canonical_json,
    clone_tree,
    run_hash,
)

SPEC_KEYS = ("name", "base", "set", "grid", "zip", "list", "seeds", "task")


@dataclass(frozen=True)
class PlannedRun:
    """One run of the plan: its hash, its batch, the swept settings and its single-run config."""

    hash: str
    batch: str
    settings: dict[str, Any]
    config: dict[str, Any]


@dataclass
class Plan:
    """Every run of a sweep, in spec order, and the columns that name its settings."""

    name: str
    runs: list[PlannedRun]
    columns: list[str]
    duplicates: int = 0
    batches: dict[str, list[str]] = field(default_factory=dict)  # batch key -> run hashes
    task: str = ""  # the module that trains and writes each batch ("": condlab.train)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "hash_version": HASH_VERSION, "columns": self.columns,
                "batches": self.batches, **({"task": self.task} if self.task else {}),
                "runs": [{"hash": r.hash, "batch": r.batch, "settings": r.settings, "config": r.config}
                         for r in self.runs]}


def load_spec(spec: str | Path | dict[str, Any]) -> tuple[dict[str, Any], str, Path]:
    """A spec file or mapping -> (mapping, the text as given, directory for relative paths)."""
    if isinstance(spec, dict):
        if not spec:
            raise ConfigError("the sweep spec is empty: give a base and axes (grid, zip, list, seeds)")
        return copy.deepcopy(spec), yaml.safe_dump(spec, sort_keys=False), Path.cwd()
    path = Path(spec)
    if not path.is_file():
        raise ConfigError(f"sweep spec '{path}' does not exist")
    text = path.read_text()
    raw = yaml.safe_load(text)
    if not raw and raw is not False:  # an empty spec would train the defaults unasked
        raise ConfigError(f"sweep spec '{path}' is empty: give a base and axes (grid, zip, list, "
                          "seeds; docs/sweeps.md)")
    if not isinstance(raw, dict):
        raise ConfigError(f"sweep spec '{path}' must hold a mapping, got {type(raw).__name__}")
    return raw, text, path.resolve().parent


MAX_RUNS = 100_000  # planned runs beyond which a sweep or diagram is refused unless yes=True (--yes)


def check_run_count(runs: int, factors: list[int], what: str, yes: bool, least: bool = False) -> None:
    """Refuse, before anything is expanded, a plan of more than MAX_RUNS runs unless `yes`
    (`least`: `runs` is a lower bound)."""
    if runs > MAX_RUNS and not yes:
        shown = " x ".join(str(f) for f in factors)
        raise ConfigError(f"{what} plans {'at least ' * least}{runs:,} runs ({shown}), more than the "
                          f"limit of {MAX_RUNS:,}: narrow its axes, or pass --yes (yes=True) to plan them "
                          "anyway")


def make_plan(raw: dict[str, Any], base_dir: Path = Path("."), *, yes: bool = False) -> Plan:
    """Resolve a spec mapping into runs (checked against the config tree) and batches.

    Each point is resolved on its own (``Config.from_dict``, its single runs, their hashes);
    the registered fast path (``_accel/_resolve.py``, off with ``CONDLAB_REFERENCE=1``) resolves
    points that differ only in batchable keys from one config, to the same runs and hashes. The
    runs are counted first (axes x the base's per-run lists): beyond MAX_RUNS only with `yes`.
    """
    from .._accel import find

    unknown = sorted(set(raw) - set(SPEC_KEYS))
    if unknown:
        raise ConfigError(f"unknown sweep key '{unknown[0]}': a spec has keys {', '.join(SPEC_KEYS)}")
    base = _base_config(raw.get("base"), base_dir)
    name = check_name(raw.get("name", base["name"]), "sweep name")
    base["name"] = name
    for key, value in _mapping(raw.get("set") or {}, "set").items():
        assign_key(base, key, value)
    axes, axis_keys = _axes(raw, base)
    lists = (_get(base, k) for k in BATCHED_KEYS)  # a per-run key of the base: one run per value
    factors = [len(a) for a in axes] + [len(v) for v in lists if isinstance(v, list) and len(v) > 1]
    check_run_count(math.prod(factors), factors, f"sweep {name}", yes)
    task = _task(raw.get("task"))
    runs: dict[str, PlannedRun] = {}
    duplicates = 0
    groups = find("plan resolution", Config, task)  # None: the reference, point by point
    alone: list[dict[str, Any]] = []  # configs of the runs resolved outside any group
    for point in itertools.product(*axes):
        raw_cfg = clone_tree(base)
        for key, value in (kv for part in point for kv in part.items()):
            assign_key(raw_cfg, key, value)
        found = groups.singles(raw_cfg) if groups is not None else None
        if found is None:
            found = [(single, run_hash(single, task), batch_key(single))
                     for single in _single_runs(Config.from_dict(raw_cfg).to_dict())]
            alone += [single for single, _, _ in found]
        for single, h, batch in found:
            if h in runs:
                _check_same_identity(name, runs[h].config, single)
                duplicates += 1
                continue
            runs[h] = PlannedRun(h, batch, {}, single)
    columns = _columns(axis_keys, list(runs.values()), (groups.shared_configs() if groups else []) + alone)
    planned = [PlannedRun(r.hash, r.batch, {c: _setting(r.config, c) for c in columns}, r.config)
               for r in runs.values()]
    batches: dict[str, list[str]] = {}
    for r in planned:
        batches.setdefault(r.batch, []).append(r.hash)
    return Plan(name, planned, columns, duplicates, batches, task)


def _check_same_identity(name: str, earlier: dict[str, Any], single: dict[str, Any]) -> None:
    """Two points with one hash are one run: refuse them when they differ in a key left out of the
    hash (train.device, ...), which would otherwise be merged without a word (one trained, the
    other's value lost)."""
    for key in UNHASHED_KEYS:
        a, b = _get(earlier, key), _get(single, key)
        if a != b:
            raise ConfigError(f"sweep {name}: {key}={a!r} and {key}={b!r} make the same run: {key} does "
                              "not change a run's result, so it is not part of its identity (hash) and "
                              f"the points would be merged into one; set {key} once (in base or set:), "
                              "not as an axis")


def _task(task: Any) -> str:
    """A spec's task: a name from the registry (``_tasks``); nothing is imported here."""
    from ._tasks import resolve_task

    return resolve_task(task)


def _base_config(base: Any, base_dir: Path) -> dict[str, Any]:
    from ..training import PRESETS, preset

    if base is None:
        return Config().to_dict()
    if isinstance(base, dict):
        return Config.from_dict(base).to_dict()
    if not isinstance(base, str):
        raise ConfigError(f"sweep base={base!r} is not accepted: give a preset, a config file or a mapping")
    if base in PRESETS:
        return preset(base).to_dict()
    path = Path(base) if Path(base).is_absolute() else base_dir / base
    if not path.is_file():
        raise ConfigError(f"sweep base '{base}' is neither a preset ({', '.join(PRESETS)}) "
                          "nor a config file")
    return Config.from_file(path).to_dict()


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"sweep '{where}' must be a mapping of config keys, got {value!r}")
    return value


def _axes(raw: dict[str, Any], base: dict[str, Any]) -> tuple[list[list[dict[str, Any]]], list[str]]:
    """Each axis is a list of partial settings {key: value}; the plan is their product."""
    axes: list[list[dict[str, Any]]] = []
    owner: dict[str, str] = {}

    def claim(key: str, where: str) -> None:
        assign_key(clone_tree(base), key, None)  # unknown keys: the same error as --set
        if key in owner and owner[key] != where:
            raise ConfigError(f"sweep key '{key}' is set by both {owner[key]} and {where}")
        owner[key] = where

    for key, values in _mapping(raw.get("grid") or {}, "grid").items():
        claim(key, "grid")
        axes.append([{key: v} for v in _values(values, f"grid.{key}")])
    groups = raw.get("zip") or []
    for i, group in enumerate([groups] if isinstance(groups, dict) else groups):
        lists = {k: _values(v, f"zip.{k}", unique=False) for k, v in _mapping(group, "zip").items()}
        if len({len(v) for v in lists.values()}) > 1:
            lengths = ", ".join(f"{k}: {len(v)}" for k, v in lists.items())
            raise ConfigError(f"sweep zip group {i + 1} has lists of different lengths ({lengths})")
        for key in lists:
            claim(key, "zip")
        rows = [list(vals) for vals in zip(*lists.values(), strict=True)]
        _values(rows, f"zip group {i + 1} ({', '.join(lists)})")  # a repeated tuple: the same runs twice
        axes.append([dict(zip(lists, vals, strict=True)) for vals in rows])
    items = raw.get("list")
    if items is not None:
        if not isinstance(items, list) or not items:
            raise ConfigError("sweep 'list' must be a non-empty list of mappings of config keys")
        _values(items, "list")  # the same item twice: the same runs twice
        for item in items:
            for key in _mapping(item, "list"):
                claim(key, "list")
        axes.append(items)
    axes += _seed_axes(raw.get("seeds"), claim)
    return axes, list(owner)


def _seed_axes(seeds: Any, claim) -> list[list[dict[str, Any]]]:
    """`seeds: N | [..] | {init: N | [..], data: [..]}` -> axes over data.seed and train.seeds."""
    if seeds is None:
        return []
    spec = seeds if isinstance(seeds, dict) else {"init": seeds}
    unknown = sorted(set(spec) - {"init", "data"})
    if unknown:
        raise ConfigError(f"unknown key 'seeds.{unknown[0]}': seeds has keys init, data")
    axes = []
    if "data" in spec:
        claim("data.seed", "seeds")
        axes.append([{"data.seed": s} for s in _values(spec["data"], "seeds.data")])
    if "init" in spec:
        init = spec["init"]
        if isinstance(init, int) and not isinstance(init, bool):
            if init < 1:
                raise ConfigError(f"seeds.init={init} is not accepted: a count must be >= 1")
            init = list(range(init))
        claim("train.seeds", "seeds")
        axes.append([{"train.seeds": [s]} for s in _values(init, "seeds.init")])
    return axes


def _values(values: Any, where: str, unique: bool = True) -> list[Any]:
    """A non-empty list; `unique`: without repeats (a zip column may repeat: its tuples differ)."""
    if not isinstance(values, list) or not values:
        raise ConfigError(f"sweep {where}={values!r} is not accepted: give a non-empty list of values")
    if not unique:
        return values
    seen: dict[str, Any] = {}
    for v in values:  # as `train` refuses them: a repeat would plan the same runs twice
        token = canonical_json(v)
        if token in seen:
            raise ConfigError(f"sweep {where}={values!r} is not accepted: it has repeated values "
                              f"({seen[token]!r} and {v!r}); give each value once")
        seen[token] = v
    return values


def _single_runs(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """Split a validated config into one config per combination of its batchable lists."""
    lists = [_get(cfg, key) for key in BATCHED_KEYS]
    singles = []
    for combo in itertools.product(*lists):
        single = clone_tree(cfg)
        for key, value in zip(BATCHED_KEYS, combo, strict=True):
            assign_key(single, key, [value])
        singles.append(single)
    return singles


def run_spec_fields(single: dict[str, Any]) -> dict[str, Any]:
    """The RunSpec fields of a single-run config (each batchable list holds one value)."""
    return {name: _get(single, key)[0] for name, key in BATCHED.items()}


def _columns(axis_keys: list[str], runs: list[PlannedRun], shared: list[dict[str, Any]]) -> list[str]:
    """Swept keys in spec order, then any other key that differs between runs; seeds always.

    `shared`: configs that hold every run's non-batchable values (the groups' configs), so that
    only the batchable keys are compared run by run.
    """
    def differs(key: str) -> bool:
        configs = [r.config for r in runs] if key in BATCHED_KEYS else shared
        return len({_token(_get(c, key)) for c in configs}) > 1

    varying = [k for k in _flat_keys(runs[0].config) if differs(k)] if runs else []
    keys = list(dict.fromkeys(axis_keys + [k for k in varying if k != "name"]))
    keys = [k for k in keys if k != "train.seeds"]
    return keys + ["seed"]


_SCALARS = (str, int, float, bool, type(None))


def _token(value: Any) -> Any:
    """Equal for two values exactly when their canonical JSON is (cheaper for plain values)."""
    if type(value) in _SCALARS:
        return type(value), repr(value)  # repr keeps -0.0 apart from 0.0, as JSON does
    if type(value) is list and all(type(v) in _SCALARS for v in value):
        return tuple((type(v), repr(v)) for v in value)
    return canonical_json(value)


def _setting(config: dict[str, Any], column: str) -> Any:
    value = _get(config, "train.seeds" if column == "seed" else column)
    if isinstance(value, list):
        return value[0] if len(value) == 1 else ",".join(str(v) for v in value)
    return value


def _flat_keys(tree: dict[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for k, v in tree.items():
        keys += _flat_keys(v, f"{prefix}{k}.") if isinstance(v, dict) else [prefix + k]
    return keys


def _get(tree: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        tree = tree[part]
    return tree
