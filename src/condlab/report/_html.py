"""HTML pieces of a report page: escaping, tables, figures as data URIs, charts, the page shell.

Everything a page shows is inside it: images are base64 data URIs, the CSS and JavaScript
(report.css, report.js beside this file) are inlined, and the page's Content-Security-Policy
forbids every fetch (``default-src 'none'``), so a page can make no network request even if a
result held a URL. Element ids carry a per-page prefix, so several page bodies can sit in one
notebook.
"""

from __future__ import annotations

import base64
import html
import json
import math
import uuid
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

RESULT_META = "condlab-result"  # <meta name=...>: the result folder a page shows
GENERATOR = "condlab report"   # <meta name="generator">: marks a file `condlab report` may replace
CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
       "base-uri 'none'; form-action 'none'")


def esc(value: Any) -> str:
    """Text for HTML (None as an empty string)."""
    return "" if value is None else html.escape(str(value), quote=True)


class Ids:
    """Unique element ids within a page, and across pages shown in one notebook; `pending`: the
    page's heat-map sliders, drawn together once the page is built (_heatmap.draw_sliders)."""

    def __init__(self) -> None:
        self.prefix = "clr" + uuid.uuid4().hex[:8]
        self.count = 0
        self.pending: list[Any] = []

    def new(self, hint: str = "") -> str:
        self.count += 1
        safe = "".join(c if c.isalnum() else "-" for c in hint)[:40]
        return f"{self.prefix}-{self.count}{'-' + safe if safe else ''}"


def fmt(value: Any) -> str:
    """A cell's text: floats to 4 significant digits, lists and dicts compact, None empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        return "; ".join(f"{k}={fmt(v)}" for k, v in value.items())
    return str(value)


def cell(value: Any, raw: str | None = None) -> str:
    """One <td>: numbers right-aligned with the full value in data-v (sorting and plots read it)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"<td>{raw if raw is not None else esc(fmt(value))}</td>"
    full = repr(float(value)) if isinstance(value, float) else str(value)
    return f'<td class="clr-num" data-v="{esc(full)}">{raw if raw is not None else esc(fmt(value))}</td>'


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, table_id: str = "",
          sortable: bool = True, row_attrs: Sequence[str] | None = None,
          headers: Sequence[str] | None = None) -> str:
    """A table of plain values (or (value, html) pairs for cells with markup); sortable by default."""
    head = "".join(f'<th data-col="{esc(c)}">{esc(h)}</th>'
                   for c, h in zip(columns, headers or columns, strict=True))
    body = []
    for i, row in enumerate(rows):
        cells = "".join(cell(*v) if isinstance(v, tuple) else cell(v) for v in row)
        attrs = f" {row_attrs[i]}" if row_attrs else ""
        body.append(f"<tr{attrs}>{cells}</tr>")
    klass = ' class="clr-sortable"' if sortable else ""
    ident = f' id="{table_id}"' if table_id else ""
    return f"<table{ident}{klass}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def scroll_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], table_id: str) -> str:
    """A sortable table in a box that scrolls (long or wide tables)."""
    return f"<div class='clr-scroll'>{table(columns, rows, table_id=table_id)}</div>"


def switch(ids: Ids, label: str, choices: Sequence[tuple[str, str]]) -> str:
    """A select that shows one of several blocks: choices are (option text, block html)."""
    box = ids.new(label)
    options = "".join(f"<option value='{i}'>{esc(name)}</option>" for i, (name, _) in enumerate(choices))
    blocks = "".join(f"<div data-choice='{i}'>{block}</div>" for i, (_, block) in enumerate(choices))
    return (f"<label>{esc(label)} <select class='clr-switch' data-for='{box}'>{options}</select></label>"
            f"<div id='{box}'>{blocks}</div>")


def verdict(text: str) -> tuple[str, str]:
    """A verdict cell: (its text, the text coloured by holds / fails / inconclusive / not run)."""
    return text, f"<span class='{verdict_class(text)}'>{esc(text)}</span>"


def filter_box(table_id: str, hint: str = "") -> str:
    """A filter for a table: text anywhere, or COLUMN=VALUE, COLUMN>NUMBER, ... (all terms must hold)."""
    example = hint or "text, or column=value, column>number"
    return (f'<div class="clr-controls"><input class="clr-filter" data-for="{table_id}" '
            f'placeholder="filter: {esc(example)}" aria-label="filter rows">'
            f'<span class="clr-count" data-for="{table_id}"></span></div>')


def table_plot(ids: Ids, table_id: str, columns: Sequence[str], x: str, y: str, group: str = "",
               logx: bool = False, logy: bool = False) -> str:
    """Controls and an SVG drawing column y against column x of the rows the table shows."""
    def select(role: str, chosen: str, none: bool = False) -> str:
        options = ([f'<option value=""{" selected" if not chosen else ""}>(none)</option>'] if none else [])
        options += [f'<option{" selected" if c == chosen else ""}>{esc(c)}</option>' for c in columns]
        return f'<label>{role} <select data-role="{role}">{"".join(options)}</select></label>'

    def box(role: str, on: bool) -> str:
        return f'<label><input type="checkbox" data-role="{role}"{" checked" if on else ""}> {role}</label>'

    return (f'<div class="clr-tableplot" data-table="{table_id}" id="{ids.new("plot")}">'
            f'<div class="clr-controls">{select("x", x)}{select("y", y)}{select("group", group, True)}'
            f'{box("logx", logx)}{box("logy", logy)}</div><svg role="img"></svg></div>')


def chart(series: list[dict[str, Any]], **options: Any) -> str:
    """A line chart drawn by report.js: series [{name, x, y}], options logx, logy, xlabel, ylabel,
    vlines [{x, label}], hlines [{y, label}]."""
    return f'<div class="clr-chart">{json_script({"series": series, **options})}<svg role="img"></svg></div>'


def json_script(obj: Any) -> str:
    """Data for report.js; '</' is escaped so the JSON cannot end the script element."""
    text = json.dumps(obj, allow_nan=False, separators=(",", ":")).replace("</", "<\\/")
    return f'<script type="application/json">{text}</script>'


def finite(values: Iterable[float]) -> list[float | None]:
    """Floats for JSON: NaN and infinities become null (JSON has neither)."""
    return [float(v) if math.isfinite(v) else None for v in values]


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def figure(path: Path, caption: str = "") -> str:
    """A figure file (PNG, else SVG) inlined as a data URI."""
    mime = "image/svg+xml" if path.suffix.lower() == ".svg" else "image/png"
    img = f'<img class="clr-fig" alt="{esc(path.name)}" src="{data_uri(path.read_bytes(), mime)}">'
    text = f"<figcaption class='clr-note'>{esc(caption or path.name)}</figcaption>"
    return f"<figure>{img}{text}</figure>"


def figures(paths: Iterable[Path]) -> str:
    """Each figure once: the PNG where both a PNG and an SVG of it exist (a fraction of the size)."""
    chosen: dict[Path, Path] = {}
    for p in paths:
        if p.suffix.lower() in (".png", ".svg") and p.is_file():
            base = p.with_suffix("")
            if base not in chosen or p.suffix.lower() == ".png":
                chosen[base] = p
    return "".join(figure(p) for p in chosen.values())


def section(title: str, body: str, ident: str = "") -> str:
    anchor = f' id="{ident}"' if ident else ""
    return f"<section{anchor}><h2>{esc(title)}</h2>{body}</section>"


def details(summary: str, body: str, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{esc(summary)}</summary>{body}</details>"


def pre_json(obj: Any) -> str:
    return f"<pre>{esc(json.dumps(obj, indent=2, default=str))}</pre>"


def definitions(items: Iterable[tuple[str, Any]]) -> str:
    """A two-column list of names and values (provenance)."""
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{esc(fmt(v))}</dd>" for k, v in items if fmt(v) != "")
    return f'<dl class="clr-prov">{rows}</dl>'


def verdict_class(verdict: str) -> str:
    word = verdict.split()[0].lower() if verdict else ""
    return {"holds": "v-holds", "fails": "v-fails", "inconclusive": "v-inconclusive"}.get(word, "v-notrun")


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def body(ids: Ids, content: str) -> str:
    """A page body: the content in its .clr root, with the style and script it needs (notebooks)."""
    return (f'<div class="clr" id="{ids.prefix}">{content}</div>'
            f"<style>{_asset('report.css')}</style><script>{_asset('report.js')}</script>")


def page(title: str, ids: Ids, content: str, result: str = "") -> str:
    """A whole HTML document that opens from disk and fetches nothing; `result`: which folder
    it shows (a <meta name="condlab-result">: what a second `condlab report --out` compares)."""
    from .._version import __version__

    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="generator" content="{GENERATOR} {esc(__version__)}">'
            f'<meta name="{RESULT_META}" content="{esc(result)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{_asset('report.css')}</style></head><body>"
            f'<div class="clr" id="{ids.prefix}">{content}</div>'
            f"<script>{_asset('report.js')}</script></body></html>\n")
