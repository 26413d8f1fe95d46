"""The results table of a sweep: one row per run, written as CSV and (with pyarrow) Parquet."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

import numpy as np

LEADING = ("run", "status")
MEASURED = ("final_loss", "last_epoch", "initial_stage_epoch", "lines_epoch", "final_snapshot")
TRAILING = ("host", "node", "error")  # where each run trained (node: its Ray node id), why it failed


def table_columns(settings: list[str], rows: list[dict[str, Any]]) -> list[str]:
    """Settings first, then hash and status, the scalar measurements, the per-layer columns,
    then host, node and error."""
    seen = dict.fromkeys(k for row in rows for k in row)
    layers = [k for k in seen if k not in settings and k not in LEADING and k not in MEASURED
              and k not in TRAILING]
    return settings + list(LEADING) + list(MEASURED) + sorted(layers, key=_layer_order) + list(TRAILING)


def _layer_order(key: str) -> tuple[int, str]:
    name, _, what = key.partition("_")
    number = int(name[5:]) if name.startswith("layer") and name[5:].isdigit() else 10**6
    return number, what


def write_table(rows: list[dict[str, Any]], columns: list[str], out: Path | Any) -> list[Path | str]:
    """Write OUT/results.csv (always) and OUT/results.parquet (when pyarrow is installed), each
    atomically; `out`: a local folder or a sweep storage (``_storage``)."""
    from ._storage import open_storage

    storage = open_storage(out) if isinstance(out, (str, Path)) else out
    storage.write_bytes("results.csv", csv_text(rows, columns).encode())
    written = [_shown(storage, "results.csv")]
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return written
    table = pa.table({c: _column(pa, [row.get(c) for row in rows]) for c in columns})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    storage.write_bytes("results.parquet", buf.getvalue())
    return written + [_shown(storage, "results.parquet")]


def _shown(storage: Any, name: str) -> Path | str:
    """A written table's path as the user named the folder (a URI stays a string)."""
    out = storage.out
    return out / name if isinstance(out, Path) else storage.where(name)


def _column(pa, values: list[Any]):
    """A typed Arrow column; None (and NaN) become nulls, ints stay ints where they all are.

    Built from numpy buffers (``pa.Array.from_buffers``) rather than ``pa.array``: on first use
    ``pa.array`` imports pandas (pyarrow's pandas shim), 0.4 s that a sweep does not need.
    """
    clean = [None if isinstance(v, float) and math.isnan(v) else v for v in values]
    kinds = {type(v) for v in clean if v is not None}
    if not kinds:  # all null: what pa.array infers for [None, ...]
        return pa.nulls(len(clean))
    if kinds == {bool}:
        bits = np.packbits(np.array([bool(v) for v in clean]), bitorder="little")
        return _from_numpy(pa, pa.bool_(), clean, bits)
    if kinds == {int}:
        try:
            ints = np.array([0 if v is None else v for v in clean], dtype=np.int64)
        except OverflowError:  # beyond int64: let pyarrow choose (uint64) or refuse, as before
            return pa.array(clean)
        return _from_numpy(pa, pa.int64(), clean, ints)
    if kinds <= {int, float}:
        floats = np.array([0.0 if v is None else float(v) for v in clean], dtype=np.float64)
        return _from_numpy(pa, pa.float64(), clean, floats)
    return _strings(pa, [None if v is None else str(v) for v in clean])


def _validity(clean: list[Any]) -> tuple[np.ndarray | None, int]:
    """Arrow's validity bitmap (LSB first) and the null count; no bitmap when nothing is null."""
    valid = np.array([v is not None for v in clean], dtype=bool)
    nulls = len(clean) - int(valid.sum())
    return (np.packbits(valid, bitorder="little") if nulls else None), nulls


def _from_numpy(pa, kind, clean: list[Any], data: np.ndarray):
    bitmap, nulls = _validity(clean)
    buffers = [None if bitmap is None else pa.py_buffer(bitmap), pa.py_buffer(data)]
    return pa.Array.from_buffers(kind, len(clean), buffers, null_count=nulls)


def _strings(pa, texts: list[str | None]):
    """A utf-8 string column: int32 offsets into one data buffer (pa.array's layout)."""
    encoded = [b"" if t is None else t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    if offsets[-1] >= 2**31:  # more than string's int32 offsets hold
        return pa.array(texts, type=pa.string())
    bitmap, nulls = _validity(texts)
    buffers = [None if bitmap is None else pa.py_buffer(bitmap),
               pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(texts), buffers, null_count=nulls)


def csv_text(rows: list[dict[str, Any]], columns: list[str]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else _cell(row[c]) for c in columns])
    return buf.getvalue()


def _cell(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)
