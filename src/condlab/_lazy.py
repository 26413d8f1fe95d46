"""Lazy package namespaces: a name is imported from its private module on first use (PEP 562).

Each subpackage's ``__init__`` maps its names to the private modules that define them. Other
subpackages import those names from the package (``from ..records import write_runs``), never
from its private modules (tests/test_imports.py checks it), and nothing is imported before it is
used, so ``import condlab`` and the CLI's help stay fast and import cycles cannot form.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def exports(package: str, table: dict[str, str], submodules: tuple[str, ...] = ()
            ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module ``__getattr__`` and ``__dir__`` for `package`, resolving names through `table`;
    `submodules` are its public subpackages, imported on first use (``condlab.embed``)."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        if name in submodules:
            return importlib.import_module(f".{name}", package)
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(table[name], package), name)
        namespace[name] = value  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table, *submodules})

    return __getattr__, __dir__
