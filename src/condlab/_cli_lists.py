"""The ``condlab`` commands that list what condlab knows (activations, presets, experiments) and
``reproduce``, which runs the experiments; the parser and the other commands are in _cli."""

from __future__ import annotations

import argparse
import json
import sys


def cmd_activations(args: argparse.Namespace) -> int:
    from .activations import activation_table, get_activation, list_activations

    notes = {a.name: a.note for a in list_activations()}  # why p is undefined, where it is
    rows = [r | {"note": notes.get(r["name"], "")} for r in activation_table()]
    if args.expr:
        act = get_activation(args.expr)
        p = act.multiplicity if act.multiplicity is not None else "undefined"
        rows = [{"name": act.name, "formula": act.formula, "p": p, "note": act.note}]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(r["name"]) for r in rows)
    fwidth = max(len(r["formula"]) for r in rows)
    print(f"{'name':<{width}}  {'formula':<{fwidth}}  p")
    for r in rows:
        print(f"{r['name']:<{width}}  {r['formula']:<{fwidth}}  {r['p']}")
    for r in rows:  # every undefined p with its reason, below the table
        if r["note"]:
            print(f"  {r['name']}: p undefined: {r['note']}")
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    from .training import PRESETS

    if args.json:
        print(json.dumps(PRESETS, indent=2))
        return 0
    for name, raw in PRESETS.items():
        m, t = raw["model"], raw["train"]
        acts = ",".join(m.get("activations", ["tanh"]))
        print(f"{name:<14} {m.get('arch', 'fc'):<9} width={m['width']:<4} "
              f"activations={acts:<36} lr={t['lr'][0]:g} epochs={t['epochs']}")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from ._outputs import point_latest, reproduce_out, reproduced_already
    from .reproduce import EXPERIMENTS, check_data_dir, reproduce, reproduce_all, summary_rows, unknown

    if args.name != "all" and args.name not in EXPERIMENTS:
        raise unknown(args.name)
    check_data_dir(args.data_dir)
    names = list(EXPERIMENTS) if args.name == "all" else [args.name]
    settings = {n: reproduce_settings(n, args.seeds, args.data_seeds, args.quick) for n in names}
    out, stamped = reproduce_out(args.out, names, args.overwrite, settings)  # the one output-folder rule
    if not stamped and not args.overwrite and reproduced_already(out, names, settings):
        return _reproduced_already(out, names, args.json)
    options = dict(seeds=args.seeds, quick=args.quick, out=out, device=args.device,
                   data_dir=args.data_dir, progress=not args.no_progress and sys.stderr.isatty(),
                   data_seeds=args.data_seeds,
                   executor=args.executor, address=args.address)
    if args.json:
        results = reproduce_all(**options)[0] if args.name == "all" else [reproduce(args.name, **options)]
        print(json.dumps(summary_rows(results), indent=2))
        return 0
    if args.name == "all":
        results, table = reproduce_all(**options)
        print(table)
        print(f"summary: {out / 'summary.md'} and summary.csv")
    else:
        results = [reproduce(args.name, **options)]
        rows = summary_rows(results)
        width = max(len(r["claim"]) for r in rows)  # never empty: a skipped experiment has a row
        vw = max(len(r["verdict"]) for r in rows)
        for r in rows:
            print(f"{r['verdict']:<{vw}} {r['claim']:<{width}}  expected {r['expected']:<28} "
                  f"holds on {r['pairs']} (holds/conclusive/all pairs)")
            if r["reason"] != "-":
                print(f"{'':<{vw}} {'':<{width}}  why: {r['reason']}; explained by: {r['explained by']}"
                      + (f" (variants tried: {r['tried']})" if r["tried"] != "-" else "")
                      + (f"; other draws: {r['other draws']}" if r["other draws"] != "-" else ""))
    if args.quick:
        print("--quick: few (data, init) pairs; these verdicts are PROVISIONAL")
    for result in results:
        for note in result.notes:
            print(f"note ({result.experiment}): {note}")
        verdict = _summary(result.status, [c.verdict for c in result.claims])
        print(f"{result.experiment}: {verdict}; {out / result.experiment / 'claims.json'}, "
              f"{len(result.figures)} figure files")
    if stamped:
        print(f"results in {out} ({point_latest(out)} points there)")
    return 0


def _summary(status: str | None, verdicts: list[str | None]) -> str:
    """One experiment's line: NOT RUN, all claims hold, SOME CLAIMS FAIL, or, with none failing,
    SOME CLAIMS INCONCLUSIVE (the two are different news: a failure is a measured disagreement)."""
    if status != "ran":
        return "NOT RUN"
    if all(v == "holds" for v in verdicts):
        return "all claims hold"
    return "SOME CLAIMS FAIL" if "fails" in verdicts else "SOME CLAIMS INCONCLUSIVE, none fails"


def reproduce_settings(name: str, seeds: list[int] | None, data_seeds: list[int] | None,
                       quick: bool) -> dict:
    """What claims.json records of an experiment's settings (its seeds and --quick): what the
    one output-folder rule compares."""
    from .reproduce import seed_grid

    init, data = seed_grid(name, seeds, data_seeds, quick)
    return {"init_seeds": init, "data_seeds": data, "provisional": bool(quick)}


def _reproduced_already(out, names: list[str], as_json: bool) -> int:
    """Every experiment asked for is in `out` with the same settings: nothing is run again."""
    from ._outputs import read_json

    claims = [read_json(out / n / "claims.json") for n in names]
    if as_json:
        print(json.dumps(claims if len(claims) > 1 else claims[0], indent=2))
    for name, c in zip(names, claims, strict=True):
        state = _summary(c.get("status"), [claim.get("verdict") for claim in c.get("claims", [])])
        print(f"{name}: already reproduced with these settings ({state}): {out / name / 'claims.json'}; "
              "nothing run (--overwrite runs it again)", file=sys.stderr if as_json else sys.stdout)
    return 0


def cmd_experiments(args: argparse.Namespace) -> int:
    from .reproduce import EXPERIMENTS

    rows = [{"name": e.name, "source": e.source, "shows": e.shows} for e in EXPERIMENTS.values()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        print(f"{r['name']:<14} {r['source']:<28} {r['shows']}")
    return 0
