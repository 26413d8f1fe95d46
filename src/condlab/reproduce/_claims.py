"""Claims and verdicts: what a paper says, what condlab measured on each seed, and whether it holds.

A claim holds when it holds on at least ``required_share`` of the seeds (default one half);
the share, the seeds and the counting thresholds are written into ``claims.json``. Nothing is
tuned per seed: every seed is measured the same way and a failing claim is reported as such.
"""

from __future__ import annotations

import csv
import io
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._io import atomic_write_json, atomic_write_text, provenance

REQUIRED_SHARE = 0.5


@dataclass
class Claim:
    """One statement of a paper, measured on every seed."""

    id: str
    statement: str
    expected: dict[str, Any]
    measured: dict[str, list[Any]] = field(default_factory=dict)
    passed: list[bool] = field(default_factory=list)
    required_share: float = REQUIRED_SHARE

    def record(self, ok: bool, **values: Any) -> None:
        """Add one seed's measurement and whether the claim held on it."""
        self.passed.append(bool(ok))
        for key, value in values.items():
            self.measured.setdefault(key, []).append(value)

    @property
    def share(self) -> float:
        return sum(self.passed) / len(self.passed) if self.passed else 0.0

    @property
    def holds(self) -> bool:
        return bool(self.passed) and self.share >= self.required_share

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "statement": self.statement, "expected": self.expected,
                "measured": self.measured, "passed_per_seed": self.passed,
                "share": self.share, "required_share": self.required_share, "holds": self.holds}


@dataclass
class ExperimentResult:
    """Everything one ``condlab reproduce NAME`` writes to claims.json."""

    experiment: str
    source: str
    seeds: list[int]
    claims: list[Claim] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    choices: list[str] = field(default_factory=list)    # where the document was ambiguous
    notes: list[str] = field(default_factory=list)      # disagreements, warnings, stand-ins
    figures: list[str] = field(default_factory=list)
    status: str = "ran"                                  # or "not run" (data missing)
    started: float = field(default_factory=time.perf_counter)

    def claim(self, id: str, statement: str, **expected: Any) -> Claim:
        """Create, register and return a claim."""
        made = Claim(id, statement, expected)
        self.claims.append(made)
        return made

    @property
    def all_hold(self) -> bool:
        return self.status == "ran" and all(c.holds for c in self.claims)

    def to_dict(self) -> dict[str, Any]:
        from ..analysis._orientations import count_orientations

        defaults = count_orientations.__kwdefaults__ or {}
        return {
            "experiment": self.experiment, "source": self.source, "status": self.status,
            "seeds": self.seeds,
            "claims": [c.to_dict() for c in self.claims], "all_hold": self.all_hold,
            "required_share": REQUIRED_SHARE,
            "counting_thresholds": {k: v for k, v in defaults.items() if k != "chunk"},
            "settings": self.settings, "choices": self.choices, "notes": self.notes,
            "figures": self.figures, "seconds": round(time.perf_counter() - self.started, 2),
            "provenance": provenance(),
        }

    def write(self, out: Path) -> Path:
        atomic_write_json(out / "claims.json", self.to_dict())
        return out / "claims.json"


def _compact(values: Any) -> str:
    if isinstance(values, dict):
        return "; ".join(f"{k}={_compact(v)}" for k, v in values.items())
    if isinstance(values, list):
        return "[" + ", ".join(_compact(v) for v in values) + "]"
    if isinstance(values, float):
        return f"{values:.3g}"
    return str(values)


def summary_rows(results: list[ExperimentResult]) -> list[dict[str, str]]:
    """One row per claim: experiment, id, expected, measured (main quantity), share, verdict."""
    rows = []
    for result in results:
        if result.status != "ran":
            rows.append({"experiment": result.experiment, "claim": "-", "expected": "-",
                         "measured": result.notes[0] if result.notes else "-", "share": "-",
                         "verdict": result.status.upper()})
        for c in result.claims:
            main = next(iter(c.measured), None)
            rows.append({"experiment": result.experiment, "claim": c.id,
                         "expected": _compact(c.expected),
                         "measured": f"{main}={_compact(c.measured[main])}" if main else "-",
                         "share": f"{sum(c.passed)}/{len(c.passed)}",
                         "verdict": "holds" if c.holds else "FAILS"})
    return rows


def write_summary(results: list[ExperimentResult], out: Path) -> str:
    """Write summary.md and summary.csv; return the Markdown table."""
    rows = summary_rows(results)
    keys = ["experiment", "claim", "expected", "measured", "share", "verdict"]
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(r[k] for k in keys) + " |" for r in rows]
    table = "\n".join(lines) + "\n"
    atomic_write_text(out / "summary.md", table)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=keys)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(out / "summary.csv", buf.getvalue())
    return table
