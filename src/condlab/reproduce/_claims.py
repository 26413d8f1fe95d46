"""Claims and verdicts: what a paper says, what condlab measured on each (data, init) pair, and the verdict.

Every pair gets one of three outcomes: *holds*, *fails* or *inconclusive* (the measurement
cannot decide: the line count changes over the threshold band, the neurons form an arc
rather than separated lines, or too few neurons are active), each non-holding one with a
one-line reason. A claim's verdict follows a rule fixed in advance (VERDICT_RULE, also in
docs/reproduction.md); it never depends on today's results:

* inconclusive when fewer than half of the pairs are conclusive;
* holds when it holds on at least 2/3 of the conclusive pairs;
* fails when it holds on at most 1/3 of them;
* inconclusive otherwise (the outcome depends on the draw).
"""

from __future__ import annotations

import csv
import io
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records import atomic_write_json, atomic_write_text, provenance

HOLD_SHARE, FAIL_SHARE, MIN_CONCLUSIVE = 2 / 3, 1 / 3, 0.5
REQUIRED_SHARE = HOLD_SHARE  # kept for readers of older claims.json: the share needed to hold
VERDICT_RULE = ("inconclusive if fewer than 1/2 of the (data, init) pairs are conclusive; holds if it "
                "holds on >= 2/3 of the conclusive pairs; fails if on <= 1/3; else inconclusive")
MIN_ACTIVE = 10  # fewer active neurons: a line count means little (size rule at its floor of 2)


def line_outcome(o: Any, ok: bool, what: str, bound: bool = False) -> tuple[bool | None, str]:
    """(True/False/None for inconclusive, reason) of a line-count claim measured as Orientations o.

    bound=True: an upper-bound claim, which a layer with nothing condensed cannot test.
    """
    m_active = o.params.get("m_active", 0)
    if m_active < MIN_ACTIVE:
        return None, f"only {m_active} active neurons (need {MIN_ACTIVE})"
    if o.n_arcs:
        widths = ", ".join(f"{c.width_deg:.0f}°" for c in o.arcs)
        return None, f"{o.n_arcs} arc(s) of neurons ({widths} wide) besides {o.n_lines} line(s)"
    if not o.stable:
        band = ",".join(str(n) for n in o.counts_by_threshold.values())
        amp = ",".join(str(n) for n in o.counts_by_amplitude.values())
        return None, f"count not stable: lines {band} over |cos| {min(o.counts_by_threshold):.2f}-" \
                     f"{max(o.counts_by_threshold):.2f}, {amp} over amplitude ratios"
    if bound and o.n_lines == 0:
        return None, "no condensed line: nothing to hold against the bound"
    return ok, "" if ok else what


@dataclass
class Claim:
    """One statement of a paper, measured on every (data seed, init seed) pair."""

    id: str
    statement: str
    expected: dict[str, Any]
    measured: dict[str, list[Any]] = field(default_factory=dict)
    outcomes: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    pairs: list[list[Any]] = field(default_factory=list)
    explained_by: str | None = None
    variants: list[dict[str, Any]] = field(default_factory=list)

    def record(self, ok: bool | None, *, run: Any = None, pair: tuple | None = None,
               reason: str = "", **values: Any) -> None:
        """Add one pair's measurement: ok True/False, or None for inconclusive (with a reason)."""
        if pair is None and run is not None:
            pair = (run.config.data.seed, run.spec.seed)
        self.pairs.append(list(pair) if pair is not None else [None, None])
        self.outcomes.append("inconclusive" if ok is None else "holds" if ok else "fails")
        self.reasons.append("" if ok else reason or "measured value differs from the expected one")
        for key, value in values.items():
            self.measured.setdefault(key, []).append(value)

    @property
    def passed(self) -> list[bool]:
        return [o == "holds" for o in self.outcomes]

    @property
    def conclusive(self) -> int:
        return sum(o != "inconclusive" for o in self.outcomes)

    @property
    def share(self) -> float:
        """Share of the conclusive pairs on which the claim holds."""
        return sum(self.passed) / self.conclusive if self.conclusive else 0.0

    @property
    def verdict(self) -> str:
        if not self.outcomes or self.conclusive < MIN_CONCLUSIVE * len(self.outcomes):
            return "inconclusive"
        if self.share >= HOLD_SHARE:
            return "holds"
        return "fails" if self.share <= FAIL_SHARE else "inconclusive"

    @property
    def holds(self) -> bool:
        return self.verdict == "holds"

    @property
    def reason(self) -> str:
        """One line: why the claim does not hold (empty when it holds)."""
        if self.verdict == "holds":
            return ""
        n, c, h = len(self.outcomes), self.conclusive, sum(self.passed)
        few = c < MIN_CONCLUSIVE * n  # then say why pairs were inconclusive, else why they failed
        wanted = "inconclusive" if few else "fails"
        common = Counter(r for o, r in zip(self.outcomes, self.reasons, strict=True)
                         if o == wanted and r).most_common(1)
        why = f"; e.g. {common[0][0]}" if common else ""
        if few:
            return f"inconclusive on {n - c} of {n} pairs{why}"
        return f"holds on {h} of {c} conclusive pairs{why}"

    def to_dict(self) -> dict[str, Any]:
        counts = Counter(self.outcomes)
        return {"id": self.id, "statement": self.statement, "expected": self.expected,
                "measured": self.measured, "pairs": self.pairs, "outcomes": self.outcomes,
                "reasons": self.reasons,
                "counts": {k: counts.get(k, 0) for k in ("holds", "fails", "inconclusive")},
                "share_of_conclusive": self.share, "verdict": self.verdict, "reason": self.reason,
                "passed_per_seed": self.passed, "share": self.share,  # older readers: holds per pair
                "holds": self.holds, "explained_by": self.explained_by, "variants": self.variants}


@dataclass
class ExperimentResult:
    """Everything one ``condlab reproduce NAME`` writes to claims.json."""

    experiment: str
    source: str
    seeds: list[int]                                     # init seeds
    claims: list[Claim] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    choices: list[str] = field(default_factory=list)    # where the document was ambiguous
    notes: list[str] = field(default_factory=list)      # disagreements, warnings, stand-ins
    figures: list[str] = field(default_factory=list)
    status: str = "ran"                                  # or "not run" (data missing)
    data_seeds: list[int] | None = None                  # None: the data are fixed (real data)
    provisional: bool = False                            # --quick: too few pairs to trust
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
        from ..analysis import count_orientations

        defaults = count_orientations.__kwdefaults__ or {}
        return {
            "experiment": self.experiment, "source": self.source, "status": self.status,
            "seeds": self.seeds, "init_seeds": self.seeds, "data_seeds": self.data_seeds,
            "claims": [c.to_dict() for c in self.claims], "all_hold": self.all_hold,
            "verdict_rule": VERDICT_RULE, "provisional": self.provisional,
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


KEYS = ["experiment", "claim", "expected", "measured", "pairs", "verdict", "reason", "explained by"]


def summary_rows(results: list[ExperimentResult]) -> list[dict[str, str]]:
    """One row per claim: expected, measured (main quantity), pairs (holds/conclusive/all), verdict."""
    rows = []
    for result in results:
        if result.status != "ran":
            rows.append({"experiment": result.experiment, "claim": "-", "expected": "-",
                         "measured": result.notes[0] if result.notes else "-", "pairs": "-",
                         "verdict": result.status.upper(), "reason": "-", "explained by": "-"})
        for c in result.claims:
            main = next(iter(c.measured), None)
            verdict = c.verdict + (" (provisional)" if result.provisional else "")
            explained = "-" if c.holds else (c.explained_by or ("unexplained" if c.variants else
                                                                 "not diagnosed"))
            rows.append({"experiment": result.experiment, "claim": c.id,
                         "expected": _compact(c.expected),
                         "measured": f"{main}={_compact(c.measured[main])}" if main else "-",
                         "pairs": f"{sum(c.passed)}/{c.conclusive}/{len(c.outcomes)}",
                         "verdict": verdict, "reason": c.reason or "-", "explained by": explained,
                         "tried": ", ".join(f"{v['variant']} {v['verdict']}" for v in c.variants) or "-"})
    return rows


def write_summary(results: list[ExperimentResult], out: Path) -> str:
    """Write summary.md and summary.csv; return the Markdown table.

    pairs = holds / conclusive / all (data seed, init seed) pairs.
    """
    rows = summary_rows(results)
    lines = ["| " + " | ".join(KEYS) + " |", "|" + "---|" * len(KEYS)]
    lines += ["| " + " | ".join(r[k].replace("|", "/") for k in KEYS) + " |" for r in rows]
    table = "\n".join(lines) + "\n"
    atomic_write_text(out / "summary.md", table)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=KEYS + ["tried"])
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(out / "summary.csv", buf.getvalue())
    return table
