"""Typed trees from plain data: YAML/JSON values checked and converted against dataclass
annotations (training/_config.py's Config tree, and the sweep and phase specs built on it).

Every error is a ConfigError with one line naming the key and the value.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any


class ConfigError(ValueError):
    """A config value or key that condlab does not accept; the message is one line."""


def _yaml_problem(err: Exception) -> str:
    """One line: what PyYAML found and where (line/column, 1-based)."""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def assign_key(raw: dict[str, Any], key: str, value: Any) -> None:
    node: Any = raw
    parts = key.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, dict) or part not in node:
            where = ".".join(parts[:i]) or "the config"
            known = ", ".join(sorted(node)) if isinstance(node, dict) else "none (not a section)"
            raise ConfigError(f"unknown key '{key}': {where} has keys {known}")
        if i == len(parts) - 1:
            node[part] = value
        node = node[part]


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)  # slow (ms per call), and a sweep builds thousands of configs


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, Any, bool], ...]:
    """(name, type hint, is a section) of each field, once per class: a sweep builds many configs."""
    hints = type_hints(cls)
    return tuple((f.name, hints[f.name], dataclasses.is_dataclass(hints[f.name]))
                 for f in dataclasses.fields(cls))


_SCALARS = (str, int, float, bool, type(None))


def _as_dict(obj: Any) -> dict[str, Any]:
    """dataclasses.asdict(obj) for a config tree (sections, scalars, lists of scalars), without
    its generic deep copy: a sweep writes one config per run."""
    out = {}
    for name, hint, section in _fields(type(obj)):
        value = getattr(obj, name)
        kind = type(value)
        if kind in _SCALARS:
            out[name] = value
        elif section and kind is hint:
            out[name] = _as_dict(value)
        elif kind is list and all(type(v) in _SCALARS for v in value):
            out[name] = list(value)
        else:
            return dataclasses.asdict(obj)  # something a validated config does not hold
    return out


def _plain_tree(raw: Any) -> Any:
    """Mappings as dicts and sequences (not strings) as lists, all the way down; dicts and
    lists of plain values are returned as they are (the common case: no copy)."""
    if isinstance(raw, Mapping):
        items = {k: _plain_tree(v) for k, v in raw.items()}
        return raw if type(raw) is dict and all(items[k] is v for k, v in raw.items()) else items
    if isinstance(raw, Sequence) and not isinstance(raw, str | bytes):
        items = [_plain_tree(v) for v in raw]
        return raw if type(raw) is list and all(a is b for a, b in zip(items, raw, strict=True)) else items
    return raw


def _build(cls: type, raw: Any, prefix: str) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(f"'{prefix or 'config'}' must be a mapping, got {raw!r}")
    fields = _fields(cls)
    if not raw.keys() <= {name for name, _, _ in fields}:
        names = [name for name, _, _ in fields]
        unknown = sorted(set(raw) - set(names))
        where = prefix.rstrip(".") or "the config"
        raise ConfigError(f"unknown key '{prefix}{unknown[0]}': {where} has keys {', '.join(names)}")
    kwargs = {}
    for name, hint, section in fields:
        if name not in raw:
            continue
        if section:
            kwargs[name] = _build(hint, raw[name], prefix=f"{prefix}{name}.")
        else:
            kwargs[name] = coerce(raw[name], hint, f"{prefix}{name}")
    return cls(**kwargs)


@functools.cache
def _hint_parts(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    return typing.get_origin(hint), typing.get_args(hint)


_PLAIN = (int, str, bool)


def coerce(value: Any, hint: Any, key: str) -> Any:
    """Convert a YAML/JSON value to the annotated type, or raise a one-line ConfigError."""
    kind = type(value)
    if kind is hint and (kind in _PLAIN or (kind is float and math.isfinite(value))):
        return value  # already what the tree holds: the common case (a sweep builds many configs)
    origin, args = _hint_parts(hint)
    if origin in (typing.Union, types.UnionType):
        for option in args:
            try:
                return coerce(value, option, key)
            except ConfigError:
                continue
        raise ConfigError(f"{key}={value!r} is not accepted: expected {_describe(hint)}")
    if origin is list:
        (item,) = args
        values = value if isinstance(value, list | tuple) else [value]
        if isinstance(value, str) and item is not str:
            values = [v for v in value.replace(",", " ").split()]
        if not values:
            raise ConfigError(f"{key} must not be empty")
        return [coerce(v, item, key) for v in values]
    try:
        if hint is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise ValueError
        if hint is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if hint is float:
            if isinstance(value, bool):
                raise ValueError
            out = float(value)
            if not math.isfinite(out):
                raise ValueError
            return out
        if hint is str:
            if not isinstance(value, str):
                raise ValueError
            return value
    except (TypeError, ValueError):
        raise ConfigError(f"{key}={value!r} is not accepted: expected {_describe(hint)}") from None
    raise ConfigError(f"{key}: unsupported type {hint}")


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(h) for h in typing.get_args(hint))
    if origin is list:
        return f"a list of {_describe(typing.get_args(hint)[0])}"
    return {int: "an integer", float: "a finite number", str: "a string", bool: "true/false"}.get(
        hint, str(hint)
    )
