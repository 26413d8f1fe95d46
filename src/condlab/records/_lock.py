"""One process per output folder: an exclusive lock file, OUT/.lock, held while a sweep writes there.

Two sweeps on the same ``--out`` would train the same runs twice and race on the results
table, so the second one is refused with the holder's pid. The lock is ``fcntl.flock`` on an
open file descriptor: the operating system releases it when the holder exits, however it exits
(``kill -9`` included), so a stale ``.lock`` file never blocks. The file itself is left in
place (removing it would let a third process lock a different file of the same name).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..training import ConfigError

LOCK_NAME = ".lock"
# A holder that is exiting (killed a moment ago; or a child it forked that has not reached
# exec yet, which holds a copy of the descriptor) keeps the lock for a few milliseconds to a
# second on a loaded machine: wait that long before calling the folder busy.
GRACE_SECONDS = 3.0


class FolderInUse(ConfigError):
    """Another live process holds the output folder's lock; the message names its pid."""


@contextmanager
def folder_lock(out: Path, what: str = "sweep", flag: str = "--out") -> Iterator[Path]:
    """Hold OUT/.lock exclusively within ``with`` (creating OUT); refuse at once if it is held."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no locking, as before
        yield Path(out)
        return
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not _try_lock(fcntl, fd, GRACE_SECONDS):
            raise FolderInUse(f"{flag} '{out}' is in use by another {what} (pid {_holder(fd)}): wait "
                              f"for it to end, or choose another {flag}")
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield out
    finally:
        os.close(fd)  # releases the lock


def _try_lock(fcntl, fd: int, grace: float) -> bool:
    """Take the exclusive lock, retrying for `grace` seconds; False when still held then."""
    deadline = time.monotonic() + grace
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


def _holder(fd: int) -> str:
    """The pid the holder wrote (it writes it just after locking: may be empty for a moment)."""
    text = os.pread(fd, 64, 0).decode(errors="replace").strip()
    return text if text.isdigit() else "unknown"
