"""Helpers for tests that kill a sweep-based command and look at what it left in OUT/runs."""

from __future__ import annotations

from pathlib import Path


def finished(out: Path) -> list[Path]:
    """meta.json of the run directories made final: a NAME.partial directory holds its meta.json
    before its rename (records.commit_runs), and a kill there leaves it to be trained again."""
    return [p for p in (out / "runs").glob("*/meta.json") if not p.parent.name.endswith(".partial")]
