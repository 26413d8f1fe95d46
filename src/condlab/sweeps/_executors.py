"""Executors: where a sweep's batches train. A new one is one class in one file.

An executor is a subclass of ``Executor`` (public: ``condlab.Executor``) with a ``name``,
decorated with ``@register_executor`` (``condlab.register_executor``; ``_local.LocalExecutor``:
in this process; ``_ray.RayExecutor``: one Ray task per batch), or declared by an installed
package in the entry-point group ``condlab.executors`` (``[project.entry-points."condlab.executors"]
myexec = "mypkg.myexec:MyExecutor"``), which the CLI's ``--executor`` reaches: an entry point is
imported only when its name is asked for and no registered executor has it. The sweep engine
calls, in this order:

    connect()                           reach whatever trains; fail fast, before anything is
                                        written (spec.yaml and plan.json included)
    check(storage, batches)             refuse what cannot work (resources, storage, code
                                        versions), still before spec.yaml and plan.json
    run(batches, storage, bar, on_done) train the batches: on_done(batch, BatchDone) once each,
                                        bar.update(cost units) as they progress
    close()                             always, last (also after an error)

`storage` is the sweep's output (``_storage``): ``storage.stage()`` gives the local
folder to write runs into and ``storage.publish(folder, hashes)`` puts them in place.
Options (``--address``, ``--cpus-per-batch``, ...) are keyword arguments of the class,
listed in its ``options``; the CLI flag that gives each is in ``OPTION_FLAGS``.
``_sweep.make_executor`` turns a name and options into an executor (it imports the built-in
executors' files, which register their classes; ``executor_class`` finds the class).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from ..training import ConfigError
from ._run import Batch, BatchDone
from ._tasks import declared

OnDone = Callable[[Batch, BatchDone], None]
EXECUTORS: dict[str, type[Executor]] = {}
GROUP = "condlab.executors"  # the entry-point group of installed packages' executors
HOW_TO_ADD = 'or register one: docs/sweeps.md, "Your own executor"'
OPTION_FLAGS = {"address": "--address", "cpus_per_batch": "--cpus-per-batch", "return_runs": "--return-runs"}


def register_executor(cls: type[Executor]) -> type[Executor]:
    """Make an Executor subclass available by its ``name`` (``--executor NAME``)."""
    EXECUTORS[cls.name] = cls
    return cls


def _entry_points() -> dict[str, Any]:
    return declared(GROUP)


def executor_names() -> list[str]:
    """Every name ``--executor`` accepts: the registered executors, then the installed packages' ones."""
    return list(dict.fromkeys([*EXECUTORS, *_entry_points()]))


def executor_class(name: str) -> type[Executor]:
    """The executor class called `name`: a registered one, else an installed package's (imported
    only now); a one-line ConfigError for another name or an entry point that is no such class."""
    if name in EXECUTORS:
        return EXECUTORS[name]
    found = _entry_points().get(name)
    if found is None:
        raise ConfigError(f"executor '{name}' is not accepted: choose one of {', '.join(executor_names())} "
                          f"({HOW_TO_ADD})")
    where = f"executor '{name}' ({found.value}, entry point of {GROUP})"
    try:
        cls = found.load()
    except (ImportError, AttributeError) as err:  # a package installed half, or a renamed class
        raise ConfigError(f"{where} cannot be loaded: {type(err).__name__}: {err}") from None
    if not (isinstance(cls, type) and issubclass(cls, Executor)):
        raise ConfigError(f"{where} is not an Executor subclass: it must be one, with name = '{name}'")
    if cls.name != name:  # its options and errors speak of cls.name: the two must agree
        raise ConfigError(f"{where} is named '{cls.name}': its class must have name = '{name}'")
    return cls


class Executor:
    """Where batches train; see the module docstring for the order of the calls."""

    name: ClassVar[str] = ""
    options: ClassVar[tuple[str, ...]] = ()  # keyword options of __init__ (CLI: OPTION_FLAGS)

    def connect(self) -> None:
        """Reach whatever trains; raise ConfigError (one line) when it cannot be reached."""

    def check(self, storage: Any, batches: list[Batch]) -> None:
        """Refuse, with one line, a sweep this executor cannot run as asked."""

    def run(self, batches: list[Batch], storage: Any, bar: Any, on_done: OnDone) -> None:
        """Train the batches into `storage`: on_done(batch, BatchDone) once each, bar.update as they go."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what connect() took (called after run, and after any error)."""
