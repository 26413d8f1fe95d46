"""The results table of a sweep: one row per run, written as CSV and (with pyarrow) Parquet."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from ._io import atomic_write_bytes, atomic_write_text

LEADING = ("run", "status")
MEASURED = ("final_loss", "last_epoch", "initial_stage_epoch", "lines_epoch", "final_snapshot")


def table_columns(settings: list[str], rows: list[dict[str, Any]]) -> list[str]:
    """Settings first, then hash and status, the scalar measurements, then per-layer columns."""
    seen = dict.fromkeys(k for row in rows for k in row)
    layers = [k for k in seen if k not in settings and k not in LEADING and k not in MEASURED
              and k != "error"]
    return settings + list(LEADING) + list(MEASURED) + sorted(layers, key=_layer_order) + ["error"]


def _layer_order(key: str) -> tuple[int, str]:
    name, _, what = key.partition("_")
    number = int(name[5:]) if name.startswith("layer") and name[5:].isdigit() else 10**6
    return number, what


def write_table(rows: list[dict[str, Any]], columns: list[str], out: Path) -> list[Path]:
    """Write OUT/results.csv (always) and OUT/results.parquet (when pyarrow is installed)."""
    written = [out / "results.csv"]
    atomic_write_text(written[0], _csv(rows, columns))
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return written
    table = pa.table({c: _column(pa, [row.get(c) for row in rows]) for c in columns})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    atomic_write_bytes(out / "results.parquet", buf.getvalue())
    return written + [out / "results.parquet"]


def _column(pa, values: list[Any]):
    """A typed Arrow column; None (and NaN) become nulls, ints stay ints where they all are."""
    clean = [None if isinstance(v, float) and math.isnan(v) else v for v in values]
    kinds = {type(v) for v in clean if v is not None}
    if kinds <= {int, bool} and kinds != {int, bool}:
        return pa.array(clean)
    if kinds <= {int, float}:
        return pa.array([None if v is None else float(v) for v in clean], type=pa.float64())
    return pa.array([None if v is None else str(v) for v in clean], type=pa.string())


def _csv(rows: list[dict[str, Any]], columns: list[str]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else _cell(row[c]) for c in columns])
    return buf.getvalue()


def _cell(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)
