"""The seam between condlab's reference computations and their fast paths.

Every computation has one readable reference implementation (plain torch or numpy) that owns a
small protocol -- "training step": ``BatchedNet.loss_and_grad`` of an architecture; "optimizer
step": an optimizer's ``step``; "phase step": the phase-diagram trainer's loop for a network
class; "plan resolution": ``make_plan``'s resolution of a sweep's points into runs, for a config
class; "mixture EM": the line counter's EM on a stack of layers, for the stack's array class. A
fast path is a module of this package that computes the same thing faster for the CONCRETE
classes it was written for, and registers for them here (``register``). The
reference asks once, with the exact class of its object, ``find("training step", type(arch),
net, x, y, dropout)``; it gets a made fast path, or None, and then runs its own code. Matching
is by identity, never ``isinstance``: a subclass that overrides the forward pass is a different
class and never gets its parent's fast path.

The switch ``CONDLAB_REFERENCE=1`` (read at every lookup; the tests' ``reference`` fixture sets
it) turns every fast path off. A fast path that fails -- its module does not import (numba
missing), or making it raises anything (a private API renamed, a compile error) -- is skipped
for the rest of the process with one ``AccelWarning``, and the reference runs.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

ENV_VAR = "CONDLAB_REFERENCE"

# protocol -> the modules of this package that hold its fast paths, imported on its first lookup
# (so that training a small network never imports numba)
MODULES: dict[str, tuple[str, ...]] = {
    "training step": ("._cpu_step", "._wide_step"),
    "optimizer step": ("._fused",),
    "phase step": ("._relu_fused",),
    "plan resolution": ("._resolve",),
    "mixture EM": ("._mixture_em",),
}


class AccelWarning(UserWarning):
    """A fast path failed and is off for this process: the reference computes instead."""


@dataclass(frozen=True)
class FastPath:
    """One registered fast path.

    `make(*args)` returns the fast object for the reference's arguments, or None where it does
    not apply (sizes, dtypes, devices it was not written for); `benchmark` is the script that
    measures its gain over the reference (docs/architecture.md, "Fast paths").
    """

    name: str
    protocol: str
    written_for: tuple[type, ...]   # the concrete classes, matched by identity (never subclasses)
    make: Callable[..., Any]
    benchmark: str


_PATHS: dict[str, list[FastPath]] = {}
_LOADED: set[str] = set()        # protocols whose modules were imported (or failed to)
_FAILED: set[str] = set()        # fast paths (or modules) that raised: off for this process
_OFF: set[str] = set()           # fast paths switched off by name (reference_only)


def register(path: FastPath) -> FastPath:
    """Add a fast path (called by its module, at import)."""
    if path.protocol not in MODULES:
        raise ValueError(f"unknown protocol '{path.protocol}': choose one of {', '.join(MODULES)}")
    _PATHS.setdefault(path.protocol, []).append(path)
    return path


def reference() -> bool:
    """Whether ``CONDLAB_REFERENCE`` turns every fast path off (any value but '' and '0')."""
    return os.environ.get(ENV_VAR, "") not in ("", "0")


@contextmanager
def reference_only(*names: str) -> Iterator[None]:
    """Inside the block every fast path is off (``CONDLAB_REFERENCE=1``), or only the named ones:
    what benchmarks compare against."""
    known = {path.name for protocol in MODULES for path in paths(protocol)}
    if set(names) - known:
        raise ValueError(f"no fast path named {sorted(set(names) - known)}: choose from {sorted(known)}")
    before, off = os.environ.get(ENV_VAR), set(names) - _OFF
    _OFF.update(off)
    if not names:
        os.environ[ENV_VAR] = "1"
    try:
        yield
    finally:
        _OFF.difference_update(off)
        if not names and before is None:
            del os.environ[ENV_VAR]
        elif not names:
            os.environ[ENV_VAR] = before


def find(protocol: str, cls: type, *args: Any) -> Any:
    """The first fast path of `protocol` written for the class `cls` that takes `args`, made; or
    None, and the caller runs its reference.

    `cls` is the exact class of the reference's object (``type(obj)``): a fast path written for
    a parent class does not apply to a subclass.
    """
    if reference():
        return None
    for path in paths(protocol):
        if path.name in _FAILED or path.name in _OFF or not any(cls is k for k in path.written_for):
            continue
        try:
            made = path.make(*args)
        except Exception as err:   # anything: a private API changed, a compiler failed, ...
            _fail(path.name, err)
            continue
        if made is not None:
            return made
    return None


def paths(protocol: str) -> list[FastPath]:
    """The fast paths registered for `protocol` (importing their modules on first use)."""
    if protocol not in _LOADED:
        _LOADED.add(protocol)
        for module in MODULES[protocol]:
            try:
                importlib.import_module(module, __package__)
            except Exception as err:   # e.g. numba missing or broken
                _fail(f"{__package__}{module}", err)
    return list(_PATHS.get(protocol, []))


def _fail(name: str, err: BaseException) -> None:
    """Switch a fast path off for this process, with one warning."""
    _FAILED.add(name)
    warnings.warn(AccelWarning(f"fast path '{name}' is off ({type(err).__name__}: {err}); "
                               f"the reference computes instead"), stacklevel=3)
