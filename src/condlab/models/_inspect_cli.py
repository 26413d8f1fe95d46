"""``condlab inspect``: read a checkpoint safely, print the table, write files on request.

The table and its files are ``condlab.models._inspect``'s; TensorBoard output is
``condlab.models._tensorboard``'s (kept apart so that neither module imports the other back).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._inspect import TOP_SHARES, InspectReport, inspect_model, write_report


def format_table(report: InspectReport) -> str:
    """The table as aligned text, then the skipped modules and notes."""
    t = report.table
    width = max([len("layer"), *(len(n) for n in t["layer"])])
    lines = [f"{'layer':<{width}}  {'kind':<7} {'rows':>6} {'cols':>6} {'lines':>5} {'dirs':>4} "
             f"{'shares of largest lines':<23} {'eff.neurons':>11} {'stable':>6} {'aside':>5}"]
    for r in t.to_dict(orient="records"):
        shares = " ".join(f"{r[f'share_{i + 1}']:.2f}" for i in range(TOP_SHARES))
        lines.append(f"{r['layer']:<{width}}  {r['kind']:<7} {r['rows']:>6} {r['cols']:>6} {r['lines']:>5} "
                     f"{r['directions']:>4} {shares:<23} {r['effective_neurons']:>11.1f} "
                     f"{'yes' if r['stable'] else 'no':>6} {r['set_aside']:>5}")
    for s in report.skipped:
        lines.append(f"skipped {s['layer']}: {s['reason']}")
    by_note: dict[str, list[str]] = {}
    for r in t.to_dict(orient="records"):
        if r["note"]:
            by_note.setdefault(r["note"], []).append(r["layer"])
    for note, names in by_note.items():
        lines.append(f"note on {names[0]}" + (f" and {len(names) - 1} more" if len(names) > 1 else "")
                     + f": {note}")
    lines += [f"note: {n}" for n in report.notes]
    lines.append("eff.neurons: exp(entropy) of the shares of condensed lines and scattered rows "
                 "(1 = all on one line; rows = no condensation)")
    return "\n".join(lines)


def run_inspect(args: Any) -> int:
    """``condlab inspect``: load a checkpoint safely, print the table, optionally write files."""
    import json

    from .._guards import check_count_options
    from .._outputs import check_same_result
    from ..records import load_source

    check_count_options(args.penalty, args.negligible_mads, args.min_share)
    counting = {k: v for k, v in (("penalty", args.penalty),
                                  ("negligible_mads", args.negligible_mads),
                                  ("min_share", args.min_share)) if v is not None}
    settings = {"source": str(Path(args.checkpoint).resolve()), "layers": args.layers, "heads": args.heads,
                "counting": counting}
    if args.out:  # the one output-folder rule, before the checkpoint is read
        check_same_result(Path(args.out) / "inspect.json", settings, args.overwrite, "inspect")
    model, config = load_source(args.checkpoint, unsafe_pickle=args.unsafe_pickle)
    report = inspect_model(model, layers=args.layers, heads=args.heads, count_kwargs=counting, config=config)
    if args.tensorboard:
        from ._tensorboard import write_inspect

        write_inspect(report, args.tensorboard)
    written = []
    if args.out:
        written = write_report(report, args.out, figures=not args.no_figures, source=str(args.checkpoint),
                               settings=settings, overwrite=args.overwrite)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print(format_table(report))
        if written:
            print(f"written: {len(written)} files in {args.out} (inspect.csv, inspect.json"
                  + (", inspect.parquet" if any(p.suffix == ".parquet" for p in written) else "")
                  + (", heat maps)" if any(p.suffix == ".png" for p in written) else ")"))
        if args.tensorboard:
            print(f"TensorBoard: scalars and heat maps in {args.tensorboard}")
    return 0
