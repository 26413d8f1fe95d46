"""Report sections of tabular results: a sweep, a phase diagram, an ``inspect --out`` folder.

A sweep's table (results.csv, one row per run) is sortable and filterable, with a plot of any
column against any other over the rows shown, one series per value of a third column (e.g. lines
against the width, per seed). A phase diagram adds its verdicts, its figures (the theory's
regions and the named schemes are drawn there) and the regime of every point. An inspect folder
shows its per-layer table and the stored heat map of a selected layer.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from . import _html as h
from ._common import provenance, read_csv


def _first_numeric(columns: list[str], rows: list[list[Any]], among: list[str]) -> str:
    for c in among:
        if c in columns and any(isinstance(r[columns.index(c)], int | float) for r in rows):
            return c
    return columns[0] if columns else ""


def results_table(ids: h.Ids, columns: list[str], rows: list[list[Any]], settings: list[str],
                  y_prefer: list[str], group_prefer: list[str], log: bool = False) -> str:
    """The sortable, filterable table with its plot (x: the first numeric setting)."""
    table_id = ids.new("results")
    numeric_settings = [c for c in settings if c not in group_prefer] + settings
    x = _first_numeric(columns, rows, numeric_settings)
    y = _first_numeric(columns, rows, y_prefer)
    group = next((g for g in group_prefer if g in columns and g != x), "")
    statuses = Counter(r[columns.index("status")] for r in rows) if "status" in columns else Counter()
    counts = ", ".join(f"{n} {s}" for s, n in statuses.items())
    return (f"<p class='clr-note'>{len(rows)} runs{': ' + h.esc(counts) if counts else ''}. Click a header "
            "to sort; the plot shows the rows the filter keeps.</p>"
            + h.filter_box(table_id, "status=complete model.width>100")
            + h.table_plot(ids, table_id, columns, x, y, group, logx=log, logy=log)
            + f"<div class='clr-scroll'>{h.table(columns, rows, table_id=table_id)}</div>")


def _first_meta(runs_dir: Path, hashes: list[Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """meta.json and config.json of the first finished run (their provenance stands for the sweep's)."""
    for name in hashes:
        meta_file = runs_dir / str(name) / "meta.json"
        if meta_file.is_file():
            try:
                meta = json.loads(meta_file.read_text())
                config_file = runs_dir / str(name) / "config.json"
                config = json.loads(config_file.read_text()) if config_file.is_file() else None
                return meta, config
            except (OSError, json.JSONDecodeError):
                continue
    return {}, None


def sweep_body(ids: h.Ids, folder: Path | None, columns: list[str], rows: list[list[Any]],
               name: str, settings: list[str]) -> str:
    """The page body of a sweep: the table and plot, the spec, the provenance of its runs."""
    layer_lines = [c for c in columns if c.endswith("_lines")]
    table = results_table(ids, columns, rows, settings, layer_lines + ["final_loss"], ["seed", "data.seed"])
    parts = [f"<h1>sweep {h.esc(name)}</h1><p class='clr-sub'>{h.esc(folder or '')}</p>",
             h.section("Results", table)]
    if folder is not None and (folder / "spec.yaml").is_file():
        parts.append(h.section("Spec", f"<pre>{h.esc((folder / 'spec.yaml').read_text())}</pre>"))
    if folder is not None and "run" in columns:
        meta, config = _first_meta(folder / "runs", [r[columns.index("run")] for r in rows])
        seeds = sorted({r[columns.index("seed")] for r in rows if r[columns.index("seed")] is not None}) \
            if "seed" in columns else None
        note = "<p class='clr-note'>of the first finished run; each run's is in runs/HASH/meta.json</p>"
        parts.append(h.section("Provenance", note + provenance(meta, config, (("init seeds", seeds),))))
    return "".join(parts)


def sweep_folder_body(ids: h.Ids, folder: Path) -> str:
    columns, rows = read_csv(folder / "results.csv")
    plan = _read(folder / "plan.json")
    return sweep_body(ids, folder, columns, rows, plan.get("name", folder.name), plan.get("columns", []))


def _read(path: Path) -> dict[str, Any]:
    from .._outputs import read_json

    data = read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"'{path}' does not hold a JSON object: the file is corrupt")
    return data


def verdict_list(verdicts: list[dict[str, Any]]) -> str:
    rows = [[v.get("claim"), v.get("measured"), h.verdict("holds" if v.get("holds") else "fails")]
            for v in verdicts]
    return h.table(["claim", "measured", "verdict"], rows, sortable=False)


def phase_body(ids: h.Ids, folder: Path) -> str:
    """A phase diagram (two or three layers): verdicts, figures, regimes per point, every run."""
    claims = _read(folder / "claims.json")
    spec = claims.get("spec") or {}
    parts = [f"<h1>phase diagram {h.esc(spec.get('name', folder.name))}</h1><p class='clr-sub'>"
             f"{len(spec.get('gammas', []))} × {len(spec.get('gamma_primes', []))} grid (γ, γ'), widths "
             f"{h.esc(h.fmt(spec.get('widths')))}, seeds {h.esc(h.fmt(spec.get('seeds')))}, target "
             f"{h.esc(spec.get('target'))}, {h.esc(spec.get('activation'))}</p>",
             h.section("Verdicts", verdict_list(claims.get("verdicts", []))
                       + h.details("rules", h.definitions((claims.get("rules") or {}).items()), open_=True))]
    figs = [folder / f"{n}.{ext}" for n in ("phase_diagram", "rescaled_time") for ext in ("png", "svg")]
    note = ("<p class='clr-note'>cells: measured regime; black line: the theory's boundary; stars: the "
            "named initialization schemes</p>")
    parts.append(h.section("Diagram", note + h.figures(figs)))
    schemes = claims.get("schemes") or claims.get("schemes_w1") or {}
    if schemes:
        keys = list(next(iter(schemes.values())))
        rows = [[n, *[s.get(k) for k in keys]] for n, s in schemes.items()]
        parts.append(h.section("Named schemes", h.table(["scheme", *keys], rows)))
    if (folder / "regimes.csv").is_file():
        columns, rows = read_csv(folder / "regimes.csv")
        table_id = ids.new("regimes")
        parts.append(h.section("Regime of every point", h.filter_box(table_id, "agrees=no")
                               + h.scroll_table(columns, rows, table_id)))
    if (folder / "results.csv").is_file():
        columns, rows = read_csv(folder / "results.csv")
        columns, rows = _with_point(columns, rows)
        rd = [c for c in columns if c.startswith("rd")]
        parts.append(h.section("Runs", results_table(ids, columns, rows, ["width"], rd, ["point"], log=True)))
    sweep = claims.get("sweep") or {}
    prov = claims.get("provenance") or {}
    parts.append(h.section("Provenance", provenance({"provenance": prov}, spec, tuple(sweep.items()))))
    return "".join(parts)


def _with_point(columns: list[str], rows: list[list[Any]]) -> tuple[list[str], list[list[Any]]]:
    """Add a 'point' column, 'γ,γ′' or the scheme's name, to plot each point's RD against the width."""
    if not {"gamma", "gamma_prime"} <= set(columns):
        return columns, rows
    g, gp = columns.index("gamma"), columns.index("gamma_prime")
    s = columns.index("scheme") if "scheme" in columns else None
    point = [(r[s] if s is not None and r[s] else f"{r[g]},{r[gp]}") for r in rows]
    return ["point", *columns], [[p, *r] for p, r in zip(point, rows, strict=True)]


def inspect_body(ids: h.Ids, folder: Path) -> str:
    """An `inspect --out` folder: the per-layer table and the stored heat map of a selected layer."""
    info = _read(folder / "inspect.json")
    columns, rows = read_csv(folder / "inspect.csv")
    table_id = ids.new("layers")
    parts = [f"<h1>inspect {h.esc(info.get('source') or folder.name)}</h1>",
             h.section("Layers", h.filter_box(table_id, "kind=linear lines>0")
                       + h.scroll_table(columns, rows, table_id))]
    # cosine_LAYER.png, in the table's order (names that inspect had to alter for a file name last)
    layers = [str(r[columns.index("layer")]) for r in rows] if "layer" in columns else []
    found = sorted(folder.glob("cosine_*.png"))
    rank = {name: i for i, name in enumerate(layers)}
    maps = sorted(found, key=lambda p: (rank.get(p.stem[len("cosine_"):], len(rank)), p.name))
    if maps:
        heat = info.get("heatmap") or {}
        note = (f"<p class='clr-note'>Heat maps as `condlab inspect` drew them: layers of more than "
                f"{heat.get('max_rows', 512)} rows show a sample, {h.esc(heat.get('sampling', ''))} with "
                f"seed {heat.get('seed', 0)}; the sampled rows are in inspect.json.</p>")
        choices = [(p.stem[len("cosine_"):], h.figure(p)) for p in maps]
        parts.append(h.section("Heat map of a layer", note + h.switch(ids, "layer", choices)))
    else:
        none = "<p class='clr-note'>none stored (inspect --no-figures)</p>"
        parts.append(h.section("Heat map of a layer", none))
    skipped = info.get("skipped") or []
    if skipped or info.get("notes"):
        rows = [[s.get("layer"), s.get("reason")] for s in skipped]
        table = h.table(["layer", "reason"], rows) if skipped else ""
        parts.append(h.section("Skipped modules and notes",
                               table + "".join(f"<p>{h.esc(n)}</p>" for n in info.get("notes") or [])))
    parts.append(h.section("Provenance", provenance({"provenance": info.get("provenance")}, None,
                                                    (("counting options", info.get("count_kwargs")),))))
    return "".join(parts)
