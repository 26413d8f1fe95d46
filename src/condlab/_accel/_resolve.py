"""Fast path of the sweep planner: points resolved in groups, not one config round trip each.

The reference (``sweeps/_plan.py``, ``make_plan``) resolves every point of a spec on its own:
``Config.from_dict`` of the point, its single runs, a hash of each run's canonical JSON. Here,
points that agree on every non-batchable value form a *group*: one ``Config.from_dict`` gives
the group's resolved config, its batch key and a template of the canonical JSON that each run's
hash is taken of, with a slot for each batchable value. A run's config and hash then cost a
copy of the resolved tree and one SHA-256 of the template with its values spliced in: the same
bytes, so the same hashes, as the reference (``tests/test_accel_parity.py`` compares the two
plans). A point whose batchable values were not yet seen in its group is still checked
(``validate`` of the group's config with its values: the error it always had); a point this
module cannot split (a section replaced, an unusual value) is returned as None and the
reference resolves it. Registered for ``Config`` itself (protocol "plan resolution");
``benchmarks/bench_plan.py`` measures the gain.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import re
from typing import Any

from ..sweeps import (
    BATCHED_KEYS,
    HASH_CHARS,
    HASH_VERSION,
    UNHASHED_KEYS,
    batch_key,
    canonical_json,
    clone_tree,
    drop_key,
    run_hash,
)
from ..training import Config, ConfigError, coerce, type_hints, validate
from ._registry import FastPath, register

_MARK = "@@condlab-batched-{}@@"
_SLOT = re.compile(r'"@@condlab-batched-(\d+)@@"')


def _list_hint(key: str) -> Any:
    section, name = key.split(".")
    return type_hints(type_hints(Config)[section])[name]


class Groups:
    """Single runs (config, hash, batch key) of resolved points, one validation per group."""

    def __init__(self, task: str):
        self.keys, self.unhashed, self.task = BATCHED_KEYS, UNHASHED_KEYS, task
        self.version, self.chars = HASH_VERSION, HASH_CHARS
        self.hints = {key: _list_hint(key) for key in BATCHED_KEYS}
        self.groups: dict[str, _Group] = {}

    def singles(self, raw: dict[str, Any]) -> list[tuple[dict[str, Any], str, str]] | None:
        """(config, hash, batch key) of every single run of point `raw`, or None: resolve it alone."""
        try:
            lists = {key: coerce(_get(raw, key), self.hints[key], key) for key in self.keys}
            shared = {**raw, **{part: dict(raw[part]) for part in {k.split(".")[0] for k in self.keys}}}
            for key in self.keys:
                section, name = key.split(".")
                del shared[section][name]
            shared_text = canonical_json(shared)
        except (ConfigError, KeyError, TypeError, ValueError):
            return None
        if any(len(set(values)) != len(values) for values in lists.values()):
            return None  # repeated values: Config.from_dict says so
        group = self.groups.get(shared_text)
        if group is None:
            config = Config.from_dict(raw)  # this point's own error, if it has one
            group = self.groups[shared_text] = _Group(config, self)
        elif any(v not in group.valid[k] for k, values in lists.items() for v in values):
            validate(_with_lists(group.config, lists))  # the error Config.from_dict(raw) would give
        for key, values in lists.items():
            group.valid[key].update(values)
        return [group.single(combo) for combo in itertools.product(*lists.values())]

    def shared_configs(self) -> list[dict[str, Any]]:
        """One resolved config per group: every non-batchable value of the grouped runs."""
        return [g.resolved for g in self.groups.values()]


def _with_lists(config: Config, lists: dict[str, list[Any]]) -> Config:
    """A copy of `config` (validated) with these batchable lists: what _build makes of the point."""
    sections: dict[str, dict[str, Any]] = {}
    for key, values in lists.items():
        section, name = key.split(".")
        sections.setdefault(section, {})[name] = values
    return dataclasses.replace(config, **{section: dataclasses.replace(getattr(config, section), **fields)
                                          for section, fields in sections.items()})


class _Group:
    def __init__(self, config: Config, owner: Groups):
        resolved = config.to_dict()
        self.config, self.resolved, self.keys, self.owner = config, resolved, owner.keys, owner
        self.batch = batch_key(resolved)
        self.valid: dict[str, set[Any]] = {key: set() for key in owner.keys}
        ident = clone_tree(resolved)
        for key in owner.unhashed:
            drop_key(ident, key)
        for i, key in enumerate(owner.keys):
            _set(ident, key, [_MARK.format(i)])
        text = canonical_json({"condlab_run": owner.version, "config": ident,
                               **({"task": owner.task} if owner.task else {})})
        parts = _SLOT.split(text)
        slots = [int(i) for i in parts[1::2]]
        # a value elsewhere in the config that looks like a slot: hash each run the plain way
        self.template = (parts[0::2], slots) if sorted(slots) == list(range(len(owner.keys))) \
            and text.count("@@condlab-batched-") == len(slots) else None

    def single(self, combo: tuple[Any, ...]) -> tuple[dict[str, Any], str, str]:
        config = clone_tree(self.resolved)
        for key, value in zip(self.keys, combo, strict=True):
            _set(config, key, [value])
        if self.template is None:
            return config, run_hash(config, self.owner.task), self.batch
        texts, slots = self.template
        # values are exactly int or float here (coerced): repr is what json writes for them
        filled = [texts[0]]
        for slot, text in zip(slots, texts[1:], strict=True):
            filled += (repr(combo[slot]), text)
        digest = hashlib.sha256("".join(filled).encode()).hexdigest()[:self.owner.chars]
        return config, digest, self.batch


def _get(tree: dict[str, Any], key: str) -> Any:
    section, name = key.split(".")
    return tree[section][name]


def _set(tree: dict[str, Any], key: str, value: Any) -> None:
    section, name = key.split(".")
    tree[section][name] = value


register(FastPath("grouped plan resolution", "plan resolution", (Config,), Groups,
                  "benchmarks/bench_plan.py"))
