"""Atomic file writes and provenance (versions, git commit) for every result condlab writes.

A file is written to a temporary name in the same directory, flushed to disk, then renamed
over its final name: a crash leaves either the old file or none, never a half-written one.
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import os
import platform
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np


def _file_mode() -> int:
    mask = os.umask(0)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _file_mode()  # read once, at import, before any threads could race on it


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` atomically (temp file + fsync + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, _FILE_MODE)  # mkstemp makes 0600 files; records are shared like any other file
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, default=_jsonable) + "\n")


def atomic_write_npz(path: str | Path, arrays: dict[str, np.ndarray], *, compress: bool = True) -> None:
    """Write arrays as one .npz atomically; `compress=False` trades size for speed (large arrays)."""
    buf = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def durable(files: Iterable[Path | str], dirs: Iterable[Path | str],
            roots: Iterable[Path | str] | None = None) -> None:
    """Put written `files` and the entries of `dirs` on disk before a commit (e.g. a rename).

    One ``syncfs(2)`` per file system where Linux offers it (one system call for a whole
    batch of run directories), else an fsync of every file and directory. `roots`: directories
    on the same file systems as all of `dirs` (e.g. their parents), stat'ed instead of each dir.
    """
    dirs = list(dirs)
    devices = {os.stat(d).st_dev: d for d in (dirs if roots is None else roots)}
    if _syncfs(devices.values()):
        return
    for path in [*files, *dirs]:
        fsync_path(path)


def flush_now(directory: Path | str) -> None:
    """Start putting the file system of `directory` on disk now (syncfs; nothing where Linux
    lacks it): a head start for a later ``durable``, which alone guarantees anything."""
    _syncfs([directory])


def fsync_path(path: Path | str) -> None:
    """fsync one file or directory by name (a directory's fsync makes its entries durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _syncfs(dirs: Iterable[Path]) -> bool:
    """syncfs(2) on the file system of each directory; False where it is not available."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        syncfs = libc.syncfs
    except (OSError, AttributeError):
        return False
    for d in dirs:
        fd = os.open(d, os.O_RDONLY)
        try:
            if syncfs(fd) != 0:
                return False
        finally:
            os.close(fd)
    return True


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


_GIT_TTL = 60.0  # seconds a git answer is reused: a sweep of many batches asks once, not per batch
_git_seen: tuple[float, str | None] | None = None


def git_commit() -> str | None:
    """The commit of the condlab source tree, with '+dirty' when it has local changes."""
    global _git_seen
    import time

    now = time.monotonic()
    if _git_seen is None or now - _git_seen[0] > _GIT_TTL:
        _git_seen = (now, _ask_git())  # two git processes: ~10-30 ms, per batch before this
    return _git_seen[1]


def _ask_git() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                              text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


def provenance() -> dict[str, Any]:
    """Versions, platform, git commit and time, stored beside every result."""
    import torch

    from .._version import __version__

    return {
        "condlab": __version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "git_commit": git_commit(),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
