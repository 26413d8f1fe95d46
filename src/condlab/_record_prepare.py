"""The empty run directories a sweep makes while a batch trains (``write_runs(..., prepared=)``).

Creating a file or a directory is journaled file-system work (45-80 µs a file on this
machine's ext4, against 9-12 µs to write into an empty one without truncating it): the local
executor does it for batch k+1 on its writer thread while batch k+1 trains.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path


def record_files(layers: Sequence[str]) -> list[str]:
    """The files of an unthinned run directory with these snapshot layers, relative to it."""
    return ["config.json", "loss.csv", "data.npz", "snapshots/epochs.npy",
            *(f"snapshots/{name}.npy" for name in layers), "meta.json"]


SPAWN_FROM = 300  # prepare_runs makes this many files and directories or more in child processes


def prepare_runs(paths: Sequence[Path], files: Sequence[str] = ()) -> None:
    """Make each ``NAME.partial/snapshots`` directory and the empty `files` in it, for
    ``write_runs(..., prepared=files)`` to fill: a sweep makes them while the batch trains, as
    creating files and directories is file-system work that need not wait for the training
    (writing into an empty file costs a fraction of creating one)."""
    partials = [path.with_name(path.name + ".partial") for path in paths]
    dirs = [str(p / "snapshots") for p in partials]
    made = [str(p / name) for p in partials for name in files]
    steps = [(["rm", "-rf", "--"], [str(p) for p in partials]), (["mkdir", "-p", "--"], dirs),
             (["touch", "--"], made)]
    # a child process costs a few ms to start: worth it for a large batch only
    if len(made) + len(dirs) < SPAWN_FROM or not all(_tool(command, args) for command, args in steps):
        for partial in partials:
            shutil.rmtree(partial, ignore_errors=True)
        for d in dirs:
            os.makedirs(d)
        for name in made:
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT, 0o666))


def _tool(command: list[str], paths: list[str], per_call: int = 2000) -> bool:
    """Run mkdir or touch over `paths` in a child process: the file system work of thousands of
    files then never takes this process's GIL, which the training thread needs meanwhile
    (every system call made here would hand the GIL back and forth). False: not available."""
    import subprocess

    for start in range(0, len(paths), per_call):
        try:
            done = subprocess.run([*command, *paths[start:start + per_call]], capture_output=True)
        except OSError:
            return False
        if done.returncode != 0:
            return False
    return True
