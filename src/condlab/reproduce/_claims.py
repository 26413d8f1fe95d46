"""Claims and verdicts: what a paper says, what condlab measured on each (data, init) pair, and the verdict.

Every pair gets one of three outcomes: *holds*, *fails* or *inconclusive* (the measurement
cannot decide), each non-holding one with a one-line reason. Line-count claims decide by
`bound_outcome` ("at most p lines") and `count_outcome` ("exactly p lines"): a pair fails
when the count is wrong at every setting of the counter's sensitivity band, or when more
than p lines stand beside an arc; an arc or a moving count makes a pair inconclusive only
where it could change the answer; a layer with nothing condensed says so.

A claim's verdict follows a rule fixed in advance (VERDICT_RULE, also in
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

from .._display import ShownAsPage
from ..records import atomic_write_json, atomic_write_text, provenance

HOLD_SHARE, FAIL_SHARE, MIN_CONCLUSIVE = 2 / 3, 1 / 3, 0.5
REQUIRED_SHARE = HOLD_SHARE  # kept for readers of older claims.json: the share needed to hold
VERDICT_RULE = ("inconclusive if fewer than 1/2 of the (data, init) pairs are conclusive; holds if it "
                "holds on >= 2/3 of the conclusive pairs; fails if on <= 1/3; else inconclusive")
MIN_ACTIVE = 10  # fewer active neurons: a line count means little (size rule at its floor of 2)


Outcome = tuple[bool | None, str]  # (True holds / False fails / None inconclusive, reason)


def _active(o: Any) -> int:
    """Active neurons of a count: those on lines or arcs, and the scattered ones (not negligible)."""
    return sum(len(c.members) for c in (*o.lines, *o.arcs)) + len(o.scattered)


def _band(o: Any) -> list[int]:
    """Line counts over the counter's sensitivity band, the reported count included."""
    return [int(n) for n in o.counts_by_threshold.values()] + [int(o.n_lines)]


def _arcs(o: Any) -> str:
    return f"{o.n_arcs} arc(s) ({', '.join(f'{c.width_deg:.0f}°' for c in o.arcs)} wide)"


def _band_text(o: Any) -> str:
    return ",".join(str(int(n)) for n in o.counts_by_threshold.values())


def _too_few(o: Any) -> Outcome | None:
    active = _active(o)
    return (None, f"only {active} active neurons (need {MIN_ACTIVE})") if active < MIN_ACTIVE else None


def _settled_early(o: Any, p: int) -> Outcome | None:
    """Inconclusive with too few active neurons; fails with more than p lines beyond doubt; else None.

    Beyond doubt: more than p lines at every setting of the band, or more than p lines beside
    an arc (an arc is one structure more however it is read, never a line fewer).
    """
    few = _too_few(o)
    if few:
        return few
    if min(_band(o)) > p:
        return False, f"{o.n_lines} lines > {p} at every setting of the band (lines {_band_text(o)})"
    if o.n_arcs and o.n_lines > p:
        return False, f"{o.n_lines} lines > {p} beside {_arcs(o)}"
    return None


def bound_outcome(o: Any, p: int) -> Outcome:
    """Outcome of "at most p lines" on one layer measured as Orientations o (Proposition 1's bound).

    In this order: fewer than MIN_ACTIVE active neurons -> inconclusive; more than p lines at
    every count of the sensitivity band (``counts_by_threshold``), or more than p lines beside
    an arc -> fails (an arc never makes such a pair inconclusive); 0 lines and no arc ->
    inconclusive, "nothing condensed" (nothing to hold against the bound); an arc beside at
    most p lines -> inconclusive (the arc may be one line or several); at most p lines at
    every count of the band -> holds; else (the band straddles p) inconclusive.
    """
    early = _settled_early(o, p)
    if early:
        return early
    if o.n_lines == 0 and not o.n_arcs:
        return None, "nothing condensed: 0 lines and no arc, nothing to hold against the bound"
    if o.n_arcs:
        return None, f"{_arcs(o)} beside {o.n_lines} line(s): the arc may be one line or several"
    if max(_band(o)) <= p:
        return True, ""
    return None, f"count not stable: lines {_band_text(o)} over the band, on both sides of {p}"


def count_outcome(o: Any, p: int) -> Outcome:
    """Outcome of "exactly p lines" on one layer measured as Orientations o (p >= 1).

    In this order: fewer than MIN_ACTIVE active neurons -> inconclusive; more than p lines
    beyond doubt (as in `bound_outcome`) -> fails; fewer than p lines at every count of the
    band and no arc -> fails ("nothing condensed" when that count is 0); an arc -> inconclusive
    (it may be the missing lines); p lines at every count of the band and ``stable`` -> holds;
    else inconclusive.
    """
    early = _settled_early(o, p)
    if early:
        return early
    band = _band(o)
    if max(band) < p and not o.n_arcs:
        if max(band) == 0:
            return False, f"nothing condensed: 0 lines and no arc (expected {p})"
        return False, f"{o.n_lines} lines < {p} at every setting of the band (lines {_band_text(o)})"
    if o.n_arcs:
        return None, f"{_arcs(o)} beside {o.n_lines} line(s): the arc may be the missing line(s)"
    if set(band) == {p}:
        return (True, "") if o.stable else (None, f"{p} line(s) at every count of the band, but the "
                                                  "counter calls the count not stable")
    return None, f"count not stable: lines {_band_text(o)} over the band (expected {p})"


def line_outcome(o: Any, ok: bool, what: str) -> Outcome:
    """Outcome of any other claim on Orientations o: `ok` and its reason `what`, when decidable.

    Inconclusive with fewer than MIN_ACTIVE active neurons, an arc, or a count that moves
    over the band (`stable` false); otherwise ok, with `what` as the reason of a failure.
    """
    few = _too_few(o)
    if few:
        return few
    if o.n_arcs:
        return None, f"{_arcs(o)} besides {o.n_lines} line(s)"
    if not o.stable:
        return None, f"count not stable: lines {_band_text(o)} over the band"
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
    explained_by: str | None = None   # the first one-factor variant under which the claim holds
    variants: list[dict[str, Any]] = field(default_factory=list)
    draws: dict[str, Any] | None = None  # the verdict on other data draws: draw-dependence, not a cause

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
                "holds": self.holds, "explained_by": self.explained_by, "variants": self.variants,
                "draws": self.draws, "draw_dependence": self.draw_dependence}

    @property
    def draw_dependence(self) -> str:
        """One line on the other data draws: whether the outcome depends on the draw ("-": not tried)."""
        if self.draws is None:
            return "-"
        seeds = self.draws["data_seeds"]
        where = f"data seeds {seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else f"data seed {seeds[0]}"
        if self.draws["verdict"] == self.verdict:
            return f"same on {where}"
        return f"depends on the draw: {self.draws['verdict']} on {where}"


@dataclass
class ExperimentResult(ShownAsPage):
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
            "counting_thresholds": {k: v for k, v in defaults.items() if k != "band"},
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


def explanation(verdict: str, explained_by: str | None, variants: list[dict[str, Any]]) -> str:
    """The "explained by" cell: "-" (holds), the variant, "unexplained", "no variant applies" or
    "not diagnosed" (no variant was tried)."""
    if verdict == "holds":
        return "-"
    if explained_by:
        return explained_by
    ran = [v for v in variants if v.get("verdict") not in ("not applicable", "error", "diverged")
           and v.get("variant") != "data-draws"]
    return "unexplained" if ran else "no variant applies" if variants else "not diagnosed"


KEYS = ["experiment", "claim", "expected", "measured", "pairs", "verdict", "reason", "explained by",
        "other draws"]


def summary_rows(results: list[ExperimentResult]) -> list[dict[str, str]]:
    """One row per claim: expected, measured (main quantity), pairs (holds/conclusive/all), verdict."""
    rows = []
    for result in results:
        if result.status != "ran":
            rows.append({"experiment": result.experiment, "claim": "-", "expected": "-",
                         "measured": result.notes[0] if result.notes else "-", "pairs": "-",
                         "verdict": result.status.upper(), "reason": "-", "explained by": "-",
                         "other draws": "-"})
        for c in result.claims:
            main = next(iter(c.measured), None)
            verdict = c.verdict + (" (provisional)" if result.provisional else "")
            explained = explanation(c.verdict, c.explained_by, c.variants)
            rows.append({"experiment": result.experiment, "claim": c.id,
                         "expected": _compact(c.expected),
                         "measured": f"{main}={_compact(c.measured[main])}" if main else "-",
                         "pairs": f"{sum(c.passed)}/{c.conclusive}/{len(c.outcomes)}",
                         "verdict": verdict, "reason": c.reason or "-", "explained by": explained,
                         "other draws": c.draw_dependence,
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
