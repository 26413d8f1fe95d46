"""Writing a run record's files: numpy's and json's bytes, written with one system call each.

``write_file`` writes parts with one ``writev``; ``fill_file`` into a file that
``_prepare.prepare_runs`` made empty (no truncation); ``save_npy`` is ``np.save`` by them;
``npz_bytes`` a batch's shared data.npz once.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np


def json_indent2(obj: Any, default: Callable[[Any], Any] | None = None) -> str:
    """``json.dumps(obj, indent=2, default=default)``: config.json and meta.json."""
    return json.dumps(obj, indent=2, default=default)


def npy_parts(array: np.ndarray) -> tuple[bytes, memoryview] | None:
    """(header, data) of ``np.save(fh, array)`` (numpy's own version 1.0 header, which np.save
    picks for every header that fits it; tested); None where np.save should write it itself."""
    if not array.flags.c_contiguous or array.dtype.kind not in "biufc" or array.size == 0 \
            or array.dtype.fields is not None or not array.dtype.isnative:
        return None
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, np.lib.format.header_data_from_array_1_0(array))
    return buf.getvalue(), memoryview(array).cast("B")


def save_npy(path: str, array: np.ndarray, write=None) -> str:
    """np.save(path, array): the same bytes, written with one system call where possible."""
    parts = npy_parts(array)
    if parts is None:
        return _save(path, lambda fh: np.save(fh, array))
    return (write or write_file)(path, *parts)


def npz_bytes(x: np.ndarray, y: np.ndarray, cache: dict) -> bytes:
    """``np.savez(x=x, y=y)`` as bytes (a run's data.npz), made once per (x, y) in `cache`
    (the runs of a batch share their data set)."""
    key = (id(x), id(y))
    if key not in cache:
        buf = io.BytesIO()
        np.savez(buf, x=x, y=y)
        cache[key] = (x, y, buf.getvalue())  # x and y kept alive: their ids stay theirs
    return cache[key][2]


def fill_file(path: str, *chunks: bytes | memoryview) -> str:
    """write_file into a file that is empty or new (prepare_runs): no truncation, a journaled
    metadata change on ext4 that costs more than the write itself."""
    return write_file(path, *chunks, flags=os.O_WRONLY | os.O_CREAT)


_REPLACE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC


def write_file(path: str, *chunks: bytes | memoryview, flags: int = _REPLACE) -> str:
    """Write `chunks` to `path` (created or replaced; the mode as open() gives it) with writev."""
    fd = os.open(path, flags, 0o666)
    try:
        pending = [memoryview(c) for c in chunks]
        while pending:  # writev writes everything to a regular file, but may be cut short
            done = os.writev(fd, pending) if hasattr(os, "writev") else os.write(fd, pending[0])
            while pending and done >= len(pending[0]):
                done -= len(pending.pop(0))
            if pending and done:
                pending[0] = pending[0][done:]
    finally:
        os.close(fd)
    return path


def _save(path: str, writer) -> str:
    with open(path, "wb") as fh:
        writer(fh)  # a contiguous array goes out in one write(), without a copy
    return path
