"""CI: check claims.json files for their schema and for scientific invariants -- not for verdicts.

Usage: python .ci/check_claims.py OUT_DIR

Verdicts may change when the science or the counting improves; a CI that locks today's
verdicts in would turn red when a claim starts to hold. What must never change:

* schema: every claims.json has its keys; each claim has one outcome, reason and
  (data seed, init seed) pair per measurement; a non-holding outcome has a reason; the
  verdict is the one the rule written in advance gives for the outcomes (recomputed here);
* invariants the theory guarantees where its assumptions hold:
  - Fig. 6: the direction field has exactly p stable lines on every pair;
  - Fig. 6 (1-D, epoch 200, inside the initial stage): measured lines <= p on every pair;
  - any "*/bound" claim measured under gradient descent: lines <= p on every conclusive pair;
* rules that keep a failure visible: a "*/bound" pair with more than p lines at every count
  of the band, or more than p lines beside an arc, is "fails" (never inconclusive); an
  "explained by" names a variant that ran, changed one stated factor and under which the
  claim holds, and never `data-draws` (draw-dependence is a label, not an explanation).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TOP_KEYS = {"experiment", "source", "status", "init_seeds", "data_seeds", "claims", "verdict_rule",
            "provisional", "counting_thresholds", "settings", "choices", "notes", "provenance"}
CLAIM_KEYS = {"id", "statement", "expected", "measured", "pairs", "outcomes", "reasons", "counts",
              "verdict", "reason", "explained_by", "variants"}
OUTCOMES = {"holds", "fails", "inconclusive"}
FIG6_P = {"tanh": 1, "xtanh": 2, "x2tanh": 3}


def rule(outcomes: list[str]) -> str:
    """The verdict rule of docs/reproduction.md, restated independently of condlab."""
    conclusive = [o for o in outcomes if o != "inconclusive"]
    if not outcomes or len(conclusive) < 0.5 * len(outcomes):
        return "inconclusive"
    share = conclusive.count("holds") / len(conclusive)
    return "holds" if share >= 2 / 3 else "fails" if share <= 1 / 3 else "inconclusive"


def check_claim(c: dict, where: str) -> list[str]:
    errors = [f"{where}: missing {k}" for k in sorted(CLAIM_KEYS - set(c))]
    if errors:
        return errors
    n = len(c["outcomes"])
    if len(c["pairs"]) != n or len(c["reasons"]) != n:
        errors.append(f"{where}: {n} outcomes but {len(c['pairs'])} pairs, {len(c['reasons'])} reasons")
    for key, values in c["measured"].items():
        if len(values) != n:
            errors.append(f"{where}: measured {key} has {len(values)} values for {n} outcomes")
    if set(c["outcomes"]) - OUTCOMES:
        errors.append(f"{where}: unknown outcomes {set(c['outcomes']) - OUTCOMES}")
    triples = zip(c["pairs"], c["outcomes"], c["reasons"], strict=False)
    errors += [f"{where}: pair {p} {o} without a reason" for p, o, r in triples if o != "holds" and not r]
    if c["verdict"] != rule(c["outcomes"]):
        errors.append(f"{where}: verdict {c['verdict']} but the rule gives {rule(c['outcomes'])}")
    if c["verdict"] != "holds" and not c["reason"]:
        errors.append(f"{where}: verdict {c['verdict']} without a reason")
    return errors


def hidden_failures(c: dict, where: str) -> list[str]:
    """Bound pairs that should fail by the rule of docs/analysis.md but do not."""
    if not c["id"].endswith("/bound") or "lines_by_threshold" not in c["measured"]:
        return []
    p, m = c["expected"]["max_lines"], c["measured"]
    arcs = m.get("arcs", [0] * len(c["outcomes"]))
    return [f"{where}: pair {pair} has lines {band} (arcs {a}) over the band but is {o}"
            for pair, o, lines, band, a in zip(c["pairs"], c["outcomes"], m["lines"],
                                                m["lines_by_threshold"], arcs, strict=False)
            if o != "fails" and (min([lines, *band.values()]) > p or (a and lines > p))]


def explanations(c: dict, where: str) -> list[str]:
    """An "explained by" must name a one-factor variant that ran and restored the claim."""
    name = c.get("explained_by")
    if not name:
        return []
    entry = next((v for v in c["variants"] if v.get("variant") == name), None)
    if entry is None or entry.get("verdict") != "holds" or not entry.get("factor") or name == "data-draws":
        return [f"{where}: explained by {name}, which is not a one-factor variant under which it holds"]
    return []


def invariants(data: dict, where: str) -> list[str]:
    errors = []
    gd = data.get("settings", {}).get("optimizer") == "gd"
    for c in data["claims"]:
        parts = c["id"].split("/")
        if data["experiment"] == "fig6" and parts[1] in FIG6_P:
            p = FIG6_P[parts[1]]
            if parts[2] == "field" and set(c["outcomes"]) != {"holds"}:
                errors.append(f"{where}: {c['id']}: the field lacks p = {p} stable lines on some pair")
            if parts[2] == "neurons" and any(n > p for n in c["measured"].get("lines", [])):
                errors.append(f"{where}: {c['id']}: more than p = {p} lines at epoch 200: "
                              f"{c['measured']['lines']}")
        if gd and parts[-1] == "bound":
            bad = [n for n, o in zip(c["measured"]["lines"], c["outcomes"], strict=False)
                   if o != "inconclusive" and n > c["expected"]["max_lines"]]
            if bad:
                errors.append(f"{where}: {c['id']}: GD counts above the bound: {bad}")
    return errors


def main(out: str) -> int:
    files = sorted(Path(out).glob("*/claims.json"))
    errors = [] if files else [f"no claims.json under {out}"]
    for path in files:
        data = json.loads(path.read_text())
        errors += [f"{path}: missing {k}" for k in sorted(TOP_KEYS - set(data))]
        for c in data.get("claims", []):
            errors += check_claim(c, f"{path}:{c.get('id')}")
            if not set(CLAIM_KEYS) - set(c):
                errors += hidden_failures(c, f"{path}:{c['id']}") + explanations(c, f"{path}:{c['id']}")
        errors += invariants(data, str(path)) if "claims" in data else []
        print(f"checked {path}: {len(data.get('claims', []))} claims")
    for e in errors:
        print("FAIL", e)
    print(f"{len(errors)} problem(s)" if errors else "schema and invariants hold")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
