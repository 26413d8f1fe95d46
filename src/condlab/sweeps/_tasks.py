"""The trainers ("tasks") a sweep spec may name: a registry looked up by name, never an import.

A spec is a file people share, so reading one must not run code: ``task: NAME`` selects one of
condlab's own tasks (``BUILTIN``, by module name or short alias) or an entry point that an
installed package declares in the group ``condlab.tasks`` (``[project.entry-points."condlab.tasks"]
mytask = "mypkg.mytask"``: installing a package is the user's decision, reading a spec is not).
Planning (and ``--dry-run``) only checks the name; the module is imported when a batch trains.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from ..training import ConfigError

GROUP = "condlab.tasks"
# canonical name (the module; it is part of each run's hash and of plan.json) -> its module
BUILTIN = {
    "condlab.phase._task": "condlab.phase._task",
    "condlab.reproduce._facilitators_task": "condlab.reproduce._facilitators_task",
}
ALIASES = {"phase": "condlab.phase._task", "facilitators": "condlab.reproduce._facilitators_task"}


def declared(group: str) -> dict[str, Any]:
    """The entry points installed packages declare in `group`, by name (reading metadata imports
    nothing): the tasks here, the executors (sweeps/_executors.py)."""
    from importlib.metadata import entry_points

    try:
        return {ep.name: ep for ep in entry_points(group=group)}
    except Exception:  # a broken installed distribution must not break planning  # noqa: BLE001
        return {}


def _entry_points() -> dict[str, Any]:
    return declared(GROUP)


def task_names() -> list[str]:
    return [*ALIASES, *BUILTIN, *_entry_points()]


def resolve_task(task: Any) -> str:
    """A spec's `task:` value -> the registered task's canonical name ("" for condlab.train)."""
    if task is None or task == "":
        return ""
    if isinstance(task, str):
        name = ALIASES.get(task, task)
        if name in BUILTIN or name in _entry_points():
            return name
    shown = repr(task) if len(repr(task)) <= 80 else repr(task)[:77] + "..."
    raise ConfigError(f"sweep task={shown} is not a registered task: choose one of "
                      f"{', '.join(task_names())}, or leave task out (condlab.train)")


def load_task(name: str) -> ModuleType:
    """The module of a registered task (imported only now, when a batch trains)."""
    if name in BUILTIN:
        module = importlib.import_module(BUILTIN[name])
    else:
        ep = _entry_points().get(name)
        if ep is None:
            raise ConfigError(f"task '{name}' is not registered here: choose one of "
                              f"{', '.join(task_names())}")
        module = ep.load()
    missing = [f for f in ("train_part", "write_part") if not hasattr(module, f)]
    if missing:
        raise ConfigError(f"task '{name}' lacks {' and '.join(missing)}: it cannot train a batch")
    return module
