"""What pages of every kind share: reading a results table, the provenance block."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import _html as h


def provenance(meta: dict[str, Any], config: dict[str, Any] | None, extra: tuple = ()) -> str:
    """condlab version, git commit, time, device, seeds, and the config (collapsed)."""
    prov = meta.get("provenance") or {}
    items = [("condlab", prov.get("condlab")), ("git commit", prov.get("git_commit")),
             ("created", prov.get("created")), ("device", meta.get("device")), ("dtype", meta.get("dtype")),
             ("training seconds", meta.get("seconds")), *extra,
             ("torch / numpy / python", "/".join(str(prov.get(k, "?")) for k in ("torch", "numpy", "python"))
              if prov else None), ("platform", prov.get("platform"))]
    cfg = h.details("config", h.pre_json(config)) if config else ""
    return h.definitions(items) + cfg


def read_csv(path: Path) -> tuple[list[str], list[list[Any]]]:
    """A results table as (columns, rows), numbers parsed, empty cells None."""
    import csv

    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        columns = next(reader, [])
        rows = [[_parse(v) for v in row] for row in reader]
    return columns, rows


def _parse(text: str) -> Any:
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)
