"""Executors: where a sweep's batches train. A new one is one class in one file.

An executor is a subclass of ``Executor`` with a ``name``, decorated with
``@register_executor`` (``_local.LocalExecutor``: in this process;
``_ray.RayExecutor``: one Ray task per batch). The sweep engine calls, in this order:

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
executors' files, which register their classes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from ._run import Batch, BatchDone

OnDone = Callable[[Batch, BatchDone], None]
EXECUTORS: dict[str, type[Executor]] = {}
OPTION_FLAGS = {"address": "--address", "cpus_per_batch": "--cpus-per-batch", "return_runs": "--return-runs"}


def register_executor(cls: type[Executor]) -> type[Executor]:
    """Make an Executor subclass available by its ``name`` (``--executor NAME``)."""
    EXECUTORS[cls.name] = cls
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
        raise NotImplementedError

    def close(self) -> None:
        """Release what connect() took (called after run, and after any error)."""
