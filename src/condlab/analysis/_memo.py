"""Values simulated once per machine: a small JSON memo in condlab's cache folder.

The arc test's null (`_arcs.flat_bound`) simulates 4,000 Gaussian samples per band size, 5-30 ms
each, and every fresh process that counts lines paid them again (~0.05 s of a 64-run sweep's
128 counts). The simulation is deterministic (fixed seed), so its values can be kept: one JSON
file per simulation and settings (`key`, which names the seed, the draws and numpy's version),
in ``$CONDLAB_CACHE`` if set (empty: no file at all), else ``$XDG_CACHE_HOME/condlab``, else
``~/.cache/condlab``. A value read back is the float that was simulated (JSON keeps a float's
shortest repr, which round-trips). A file that cannot be read or written is ignored: the
value is simulated again, never wrong.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from ..records import atomic_write_json

CACHE_ENV = "CONDLAB_CACHE"


def cache_dir() -> Path | None:
    """The folder of condlab's memo files (module docstring); None where ``$CONDLAB_CACHE`` is empty."""
    if CACHE_ENV in os.environ:
        return Path(os.environ[CACHE_ENV]) if os.environ[CACHE_ENV] else None
    try:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    except (RuntimeError, KeyError):  # no home folder to be found: keep no file
        return None
    return Path(base) / "condlab"


def memoized(name: str, key: str, n: int, simulate: Callable[[int], float]) -> float:
    """simulate(n), read from the memo file of (`name`, `key`) where it is there, else simulated
    and added to that file (``records.atomic_write_json``: a temporary file renamed over it)."""
    folder = cache_dir()
    if folder is None:
        return simulate(n)
    path = folder / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    known = _read(path, key)
    if str(n) in known:
        return float(known[str(n)])
    value = simulate(n)
    _write(path, key, {**_read(path, key), str(n): value})  # read again: another process may have added
    return value


def _read(path: Path, key: str) -> dict[str, float]:
    try:
        stored = json.loads(path.read_text())
        values = stored["values"] if stored.get("key") == key else {}
        return {k: v for k, v in values.items() if isinstance(v, float)}
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        return {}


def _write(path: Path, key: str, values: dict[str, float]) -> None:
    try:
        atomic_write_json(path, {"key": key, "values": values})
    except OSError:  # a read-only home, a full disk: the next process simulates again
        pass
