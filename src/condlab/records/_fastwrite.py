"""The bytes of a run record's files, computed with less Python per run than the stock writers.

Each function returns exactly what the stock call returns (tests compare them byte for byte):

* ``json_indent2(obj, default)`` == ``json.dumps(obj, indent=2, default=default)``: Python 3.11's
  json writes indented output with its pure-Python, generator-based encoder (its C encoder
  does not indent); a recursive join over dicts, lists and scalars is several times faster;
* ``npy_parts(array)`` == the bytes of ``np.save(fh, array)`` as (header, data): the header is
  made once per dtype and shape (``np.save`` builds, checks and pads it on every call).

``write_file`` writes such parts with one ``writev``; ``fill_file`` into a file that
``_record_prepare.prepare_runs`` made empty (no truncation); ``save_npy`` is ``np.save`` by them.
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import Any

import numpy as np

_INF = float("inf")


class _Unusual(Exception):
    """Something the fast encoder leaves to json.dumps (non-string keys, circular data)."""


def json_indent2(obj: Any, default: Callable[[Any], Any] | None = None) -> str:
    """``json.dumps(obj, indent=2, default=default)``, the same string, built faster."""
    import json

    try:
        return _value(obj, "\n", default, 0)
    except (_Unusual, RecursionError):
        return json.dumps(obj, indent=2, default=default)


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == _INF:
        return "Infinity"
    if value == -_INF:
        return "-Infinity"
    return float.__repr__(value)


_EXACT: dict[type, Callable[[Any], str]] = {str: encode_basestring_ascii, float: _float, int: int.__repr__,
                                           bool: lambda o: "true" if o else "false",
                                           type(None): lambda o: "null"}


def _value(o: Any, newline: str, default: Callable[[Any], Any] | None, depth: int) -> str:
    exact = _EXACT.get(type(o))  # the common plain values, by their exact type
    if exact is not None:
        return exact(o)
    # the order of json.encoder._make_iterencode's checks: str, None, True, False, int, float,
    # list/tuple, dict, then default()
    if isinstance(o, str):
        return encode_basestring_ascii(o)
    if o is None:
        return "null"
    if o is True:
        return "true"
    if o is False:
        return "false"
    if isinstance(o, int):
        return int.__repr__(o)
    if isinstance(o, float):
        return _float(o)
    if depth > 100:
        raise _Unusual  # deep or circular: json.dumps decides
    inner = newline + "  "
    if isinstance(o, list | tuple):
        if not o:
            return "[]"
        items = [_value(v, inner, default, depth + 1) for v in o]
        return "[" + inner + ("," + inner).join(items) + newline + "]"
    if isinstance(o, dict):
        if not o:
            return "{}"
        items = []
        for k, v in o.items():
            if not isinstance(k, str):
                raise _Unusual
            items.append(encode_basestring_ascii(k) + ": " + _value(v, inner, default, depth + 1))
        return "{" + inner + ("," + inner).join(items) + newline + "}"
    if default is None:
        raise _Unusual  # json.dumps raises its own TypeError
    return _value(default(o), newline, default, depth + 1)


@functools.lru_cache(maxsize=64)
def _npy_header(descr: str, shape: tuple[int, ...]) -> bytes:
    """What np.save writes before the data of a C-ordered array of this dtype and shape: the
    version 1.0 header, which np.save picks for every header that fits it (ours do; tested)."""
    buf = io.BytesIO()
    header = np.lib.format.header_data_from_array_1_0(np.empty((0,), np.dtype(descr)))
    np.lib.format.write_array_header_1_0(buf, {**header, "shape": shape})
    return buf.getvalue()


def npy_parts(array: np.ndarray) -> tuple[bytes, memoryview] | None:
    """(header, data) of ``np.save(fh, array)``; None where np.save should write it itself."""
    if not array.flags.c_contiguous or array.dtype.kind not in "biufc" or array.size == 0 \
            or array.dtype.fields is not None or not array.dtype.isnative:
        return None
    return _npy_header(array.dtype.str, tuple(array.shape)), memoryview(array).cast("B")


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
