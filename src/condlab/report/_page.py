"""Which result a folder holds, the page for it, and writing that page (``condlab report``).

The kinds, by the file that identifies them (first match wins):

    run         meta.json          a run record of `condlab train`, a sweep run (a Tracker's: below)
    tracker     meta.json with "architecture": "external"    a condlab.Tracker record
    batch       batch.json         a `condlab train` batch
    inspect     inspect.json       a `condlab inspect --out` folder
    phase       regimes.csv and claims.json                  a phase diagram (two or three layers)
    experiment  claims.json        one `condlab reproduce NAME` folder
    sweep       plan.json and results.csv                    a `condlab sweep` folder
    collection  sub-folders with claims.json                 `reproduce all`, runs/reproduce/latest
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import _html as h

KINDS = ("run", "tracker", "batch", "inspect", "phase", "experiment", "sweep", "collection")
NAMES = {"run": "run", "tracker": "Tracker record", "batch": "batch", "inspect": "inspect",
         "phase": "phase diagram", "experiment": "reproduce", "sweep": "sweep",
         "collection": "reproduce folder"}  # what `condlab report` prints
WHAT = ("a run or batch folder (condlab train), a sweep folder, a reproduce folder (one experiment or "
        "all), a phase diagram, an `inspect --out` folder or a Tracker record")


def _experiments(folder: Path) -> list[Path]:
    """Experiment folders inside `folder`, in summary.csv's order where there is one."""
    found = [p.parent for p in folder.glob("*/claims.json") if not (p.parent / "regimes.csv").exists()]
    order: list[str] = []
    if (folder / "summary.csv").is_file():
        import csv

        with open(folder / "summary.csv", newline="") as fh:
            order = list(dict.fromkeys(r.get("experiment", "") for r in csv.DictReader(fh)))
    rank = {name: i for i, name in enumerate(order)}
    return sorted(found, key=lambda p: (rank.get(p.name, len(rank)), p.name))


def detect(path: Path) -> str:
    """The kind of result in folder `path` (KINDS), or a one-line ValueError saying what is accepted."""
    if not path.exists():
        raise ValueError(f"'{path}' does not exist: give {WHAT}")
    if not path.is_dir():
        raise ValueError(f"'{path}' is a file: give the folder that holds the result ({WHAT})")
    if path.name.endswith(".partial"):
        raise ValueError(f"'{path}' is an unfinished run (its .partial folder was never completed)")
    if (path / "meta.json").is_file():
        try:
            meta = json.loads((path / "meta.json").read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            meta = {}
        return "tracker" if isinstance(meta, dict) and meta.get("architecture") == "external" else "run"
    for kind, files in (("batch", ["batch.json"]), ("inspect", ["inspect.json"]),
                        ("phase", ["regimes.csv", "claims.json"]), ("experiment", ["claims.json"]),
                        ("sweep", ["plan.json", "results.csv"])):
        if all((path / f).is_file() for f in files):
            return kind
    if _experiments(path):
        return "collection"
    raise ValueError(f"'{path}' holds no condlab result: give {WHAT}")


def build(path: Path) -> tuple[str, h.Ids, str]:
    """(title, ids, content) of the page for the result in `path`.

    Each kind imports what it draws: table pages (sweep, phase, inspect) need neither torch nor
    the counter, which pages with heat maps load."""
    kind, ids = detect(path), h.Ids()
    if kind in ("run", "tracker", "batch"):
        from ..records import load_run
        from ._run import batch_body, run_body

        content = batch_body(ids, path) if kind == "batch" else run_body(ids, load_run(path))
    elif kind in ("sweep", "phase", "inspect"):
        from ._tables import inspect_body, phase_body, sweep_folder_body

        content = {"sweep": sweep_folder_body, "phase": phase_body, "inspect": inspect_body}[kind](ids, path)
    else:
        from ._claims import collection_body, experiment_body, read_claims

        experiments = [path] if kind == "experiment" else _experiments(path)
        content = (experiment_body(ids, read_claims(experiments[0]), experiments[0]) if len(experiments) == 1
                   else collection_body(ids, path, experiments))
    return f"condlab {kind}: {path.resolve().name}", ids, _draw(ids, content)


def _draw(ids: h.Ids, content: str) -> str:
    """The content with its heat-map sliders drawn (all of the page's maps counted at once)."""
    if not ids.pending:
        return content
    from ._heatmap import draw_sliders

    return draw_sliders(ids, content)


def render_page(path: str | Path) -> str:
    """The whole self-contained HTML page for the result in folder `path`."""
    title, ids, content = build(Path(path))
    return h.page(title, ids, content, result=result_id(path))


def result_id(path: str | Path) -> str:
    """Which result folder a page shows, as a hash of its absolute path (a shared page names no
    folder of its author's machine)."""
    import hashlib

    return hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]


def check_replaceable(out: Path, path: Path | None = None, overwrite: bool = False) -> None:
    """The one output rule for a page (``condlab._outputs``): a new file; an earlier condlab
    report of the same result (`path`), replaced; of another result, only with `overwrite`; any
    other file never (nothing a user has is lost). No `path`: the page in the result's own
    folder (PATH/report.html), of that result wherever the folder was moved."""
    import html
    import re

    from .._outputs import check_same_result

    if out.is_dir():
        raise ValueError(f"--out '{out}' is a folder: give a file name, e.g. {out / 'report.html'}")
    if not out.exists():
        return
    with open(out, "rb") as fh:
        head = fh.read(4096).decode("utf-8", "replace")
    if f'name="generator" content="{h.GENERATOR}' not in head:
        raise ValueError(f"'{out}' exists and is not a condlab report: choose another --out, or move it "
                         "(a file condlab did not write is never replaced, not even with --overwrite)")
    if path is not None:
        shown = re.search(f'<meta name="{h.RESULT_META}" content="([^"]*)">', head)
        before = {"result": html.unescape(shown.group(1)) if shown else None}
        check_same_result(out, {"result": result_id(path)}, overwrite, "report", before=before,
                          folder=False)


def write_report(path: str | Path, out: str | Path | None = None, overwrite: bool = False) -> Path:
    """Write the page for the result in `path` to `out` (default PATH/report.html), atomically.

    An earlier condlab report of the same result there is replaced, one of another result only
    with `overwrite`; any other file is refused.
    """
    from ..records import atomic_write_text

    path = Path(path)
    target = Path(out) if out is not None else path / "report.html"
    check_replaceable(target, path if out is not None else None, overwrite)  # PATH/report.html: its own
    text = render_page(path)
    atomic_write_text(target, text)
    return target


def html_body(result: Any) -> str:
    """The page body of a result object (Jupyter's ``_repr_html_``): Run, RunResult, SweepResult,
    ExperimentResult, DiagramResult, or a path to a result folder."""
    from ._claims import experiment_body
    from ._run import batch_body, run_body
    from ._tables import phase_body, sweep_body

    ids = h.Ids()
    kind = type(result).__name__
    if isinstance(result, str | Path):
        _, ids, content = build(Path(result))
    elif kind == "Run":
        content = run_body(ids, result)
    elif kind == "RunResult":
        content = batch_body(ids, Path(result.out)) if result.out is not None else \
            "".join(run_body(ids, r) for r in result.runs[:16])
    elif kind == "SweepResult":
        rows = [[row.get(c) for c in result.columns] for row in result.rows]
        content = sweep_body(ids, result.out, result.columns, rows, result.plan.name, result.plan.columns)
    elif kind == "ExperimentResult":
        folder = Path(result.figures[0]).parent if result.figures else None
        content = experiment_body(ids, result.to_dict(), folder)
    elif kind == "DiagramResult":
        content = phase_body(ids, Path(result.sweep.out))
    else:
        raise TypeError(f"condlab report cannot show a {kind}: give a result folder or a condlab result")
    return h.body(ids, _draw(ids, content))
