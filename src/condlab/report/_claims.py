"""Report sections of ``condlab reproduce`` results: one experiment folder, or a folder of several.

The verdict table lists every claim of claims.json (holds / fails / inconclusive, pairs as
holds/conclusive/all, reason, explained by); each claim links to its panel: the measurement of
every (data seed, init seed) pair and the diagnostic reruns. Below come the experiment's own
figures, its settings, and cosine heat maps of the first run of each batch it trained (at most
MAX_BATCHES; diagnostic reruns under variants/ are not drawn).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import _html as h
from ._common import provenance

MAX_BATCHES = 16
VERDICT_COLUMNS = ["claim", "statement", "expected", "verdict", "pairs", "reason", "explained by",
                   "other draws"]


def read_claims(folder: Path) -> dict[str, Any]:
    """An experiment's claims.json, or a one-line error naming it."""
    from .._outputs import read_json

    data = read_json(folder / "claims.json")
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise ValueError(f"'{folder / 'claims.json'}' has no list of claims: it is not written by "
                         "`condlab reproduce`")
    return data


def _pairs(claim: dict[str, Any]) -> str:
    counts = claim.get("counts") or {}
    outcomes = claim.get("outcomes", [])
    conclusive = counts.get("holds", 0) + counts.get("fails", 0)
    return f"{counts.get('holds', 0)}/{conclusive}/{len(outcomes)}"


def _explained(claim: dict[str, Any]) -> str:
    if claim.get("verdict") == "holds":
        return "-"
    return claim.get("explained_by") or ("unexplained" if claim.get("variants") else "not diagnosed")


def verdict_rows(ids: h.Ids, result: dict[str, Any], panels: dict[str, str],
                 anchors: dict[str, str]) -> list[list[Any]]:
    """One row per claim (a NOT RUN row for an experiment that did not run); fills `panels` (id -> html)."""
    provisional = " (provisional)" if result.get("provisional") else ""
    if result.get("status", "ran") != "ran":
        why = (result.get("notes") or ["-"])[0]
        return [["-", "-", "-", h.verdict("NOT RUN"), "-", why, "-", "-"]]
    rows = []
    for claim in result["claims"]:
        panel = ids.new("claim-" + claim["id"])
        panels[panel] = claim_panel(panel, claim, result, anchors)
        link = f"<a href='#{panel}' class='clr-claim' data-panel='{panel}'>{h.esc(claim['id'])}</a>"
        rows.append([(claim["id"], link), claim.get("statement"), h.fmt(claim.get("expected")),
                     h.verdict(claim.get("verdict", "?") + provisional), _pairs(claim),
                     claim.get("reason") or "-", _explained(claim), claim.get("draw_dependence") or "-"])
    return rows


def claim_panel(panel_id: str, claim: dict[str, Any], result: dict[str, Any], anchors: dict[str, str]) -> str:
    """A claim's panel: statement, expected, each pair's outcome and measurement, the variants, and
    links to the heat maps of the runs whose folder names a part of the claim's id (runs/tanh for
    fig3/tanh/layer1); `anchors` maps a run's label (tanh/data0/seed0) to its element id."""
    measured = claim.get("measured") or {}
    keys = list(measured)
    columns = ["data seed", "init seed", "outcome", "reason"] + keys
    rows = []
    for i, (pair, outcome) in enumerate(zip(claim.get("pairs", []), claim.get("outcomes", []), strict=False)):
        reasons = claim.get("reasons") or []
        values = [measured[k][i] if i < len(measured[k]) else None for k in keys]
        rows.append([pair[0], pair[1], h.verdict(outcome), reasons[i] if i < len(reasons) else "", *values])
    variants = claim.get("variants") or []
    keys = ["variant", "what", "verdict", "pairs", "reason"]
    vtable = h.table(keys, [[v.get(k) for k in keys] for v in variants], sortable=False) if variants else \
        "<p class='clr-note'>no diagnostic reruns (made for claims that do not hold, not with --quick)</p>"
    verdict = claim.get("verdict", "?")
    parts = claim["id"].split("/")
    links = [f"<a href='#{a}'>{h.esc(label)}</a>" for label, a in anchors.items()
             if label.split("/")[0] in parts]
    maps = f"<p>heat maps of its runs: {', '.join(links)}</p>" if links else ""
    return (f"<section class='clr-panel' id='{panel_id}' hidden><h3>{h.esc(claim['id'])} "
            f"<span class='{h.verdict_class(verdict)}'>{h.esc(verdict)}</span></h3>"
            f"<p>{h.esc(claim.get('statement'))}</p><p>expected: {h.esc(h.fmt(claim.get('expected')))}; "
            f"holds on {_pairs(claim)} (holds/conclusive/all pairs); "
            f"explained by: {h.esc(_explained(claim))}; other data draws: "
            f"{h.esc(claim.get('draw_dependence') or '-')}</p>"
            f"<p class='clr-note'>rule: {h.esc(result.get('verdict_rule', ''))}</p>"
            f"<div class='clr-scroll'>{h.table(columns, rows)}</div>{maps}"
            f"<h3>Diagnostic reruns</h3>{vtable}</section>")


def verdict_table(ids: h.Ids, results: list[dict[str, Any]], with_experiment: bool,
                  anchors: dict[str, str] | None = None) -> str:
    """The verdict table of one or several experiments, then every claim's (hidden) panel."""
    panels: dict[str, str] = {}
    rows, columns = [], (["experiment"] if with_experiment else []) + VERDICT_COLUMNS
    for result in results:
        for row in verdict_rows(ids, result, panels, anchors or {}):
            rows.append([result.get("experiment"), *row] if with_experiment else row)
    table_id = ids.new("verdicts")
    note = "<p class='clr-note'>Click a claim to see its panel: every (data, init) pair and the reruns.</p>"
    return (note + h.filter_box(table_id, "fails, or verdict=holds")
            + h.table(columns, rows, table_id=table_id)
            + "".join(panels.values()))


def _batches(folder: Path, claim_ids: list[str]) -> list[Path]:
    """Folders of the runs an experiment trained (batches, and runs outside a batch such as Tracker
    records), in the order of the claims that name their first folder (fig3: tanh, xtanh, ...)."""
    runs = folder / "runs"
    if not runs.is_dir():
        return []
    found = {p.parent for p in runs.rglob("batch.json")}
    found |= {p.parent for p in runs.rglob("meta.json") if not (p.parent.parent / "batch.json").exists()}
    parts = [c.split("/") for c in claim_ids]

    def rank(path: Path) -> tuple[int, str]:
        tag = path.relative_to(runs).parts[0]
        return next((i for i, p in enumerate(parts) if tag in p), len(parts)), str(path)

    return sorted(found, key=rank)


def run_maps(ids: h.Ids, folder: Path, claim_ids: list[str], anchors: dict[str, str]) -> str:
    """Heat maps with an epoch slider, and the loss, of the first run of each batch the experiment trained."""
    from ..records import RecordError, load_run
    from ._run import heatmap_viewers, loss_chart, maps_note

    batches = _batches(folder, claim_ids)
    parts = []
    for batch in batches[:MAX_BATCHES]:
        first = batch
        if (batch / "batch.json").is_file():
            entries = json.loads((batch / "batch.json").read_text()).get("runs", [])
            if not entries:
                continue
            first = batch / entries[0]["dir"]
        label = str(first.relative_to(folder / "runs"))
        try:
            run = load_run(first)
        except (RecordError, FileNotFoundError, ValueError) as err:  # not a weight record: say so, go on
            parts.append(f"<p class='clr-note'>{h.esc(label)}: {h.esc(err)}</p>")
            continue
        viewers = "".join(heatmap_viewers(ids, run, f"{label}: "))
        anchors[label] = ids.new("run-" + label)
        parts.append(f"<div class='clr-viewers' id='{anchors[label]}'>{viewers}"
                     f"<div class='clr-loss'>{loss_chart(run)}</div></div>")
    more = "" if len(batches) <= MAX_BATCHES else \
        f"<p class='clr-note'>the first {MAX_BATCHES} of {len(batches)} batches are drawn</p>"
    if not parts:
        return "<p class='clr-note'>no run records in this experiment</p>"
    return maps_note("the last snapshot inside each run's initial stage") + "".join(parts) + more


def experiment_sections(ids: h.Ids, result: dict[str, Any], folder: Path | None,
                        anchors: dict[str, str] | None = None) -> str:
    """Figures, settings, notes, run heat maps and provenance of one experiment."""
    figs = [] if folder is None else [folder / Path(f).name for f in result.get("figures", [])]
    parts = [h.figures(figs) or "<p class='clr-note'>no figures</p>"]
    settings = result.get("settings") or {}
    parts.append(h.details("settings", h.table(["key", "value"], [[k, h.fmt(v)] for k, v in settings.items()],
                                               sortable=False), open_=True))
    for title, items in (("choices (where the documents are ambiguous)", result.get("choices")),
                         ("notes", result.get("notes"))):
        if items:
            parts.append(f"<h3>{title}</h3><ul>{''.join(f'<li>{h.esc(i)}</li>' for i in items)}</ul>")
    if folder is not None:
        claim_ids = [c["id"] for c in result.get("claims", [])]
        maps = run_maps(ids, folder, claim_ids, {} if anchors is None else anchors)
        parts.append("<h3>Cosine heat maps of the runs</h3>" + maps)
    prov = result.get("provenance") or {}
    seeds = [("init seeds", result.get("init_seeds", result.get("seeds"))),
             ("data seeds", result.get("data_seeds")), ("seconds", result.get("seconds")),
             ("counting thresholds", result.get("counting_thresholds"))]
    parts.append("<h3>Provenance</h3>" + provenance({"provenance": prov}, None, tuple(seeds)))
    return "".join(parts)


def _badges(result: dict[str, Any]) -> str:
    status = result.get("status", "ran")
    flags = [status] + (["provisional (--quick)"] if result.get("provisional") else [])
    if status == "ran":
        flags.append("all claims hold" if result.get("all_hold") else "some claims do not hold")
    return "".join(f"<span class='clr-badge'>{h.esc(f)}</span>" for f in flags)


def experiment_body(ids: h.Ids, result: dict[str, Any], folder: Path | None) -> str:
    """The page body of one `condlab reproduce NAME` result."""
    head = (f"<h1>{h.esc(result.get('experiment'))}: {h.esc(result.get('source'))}</h1>"
            f"<p class='clr-sub'>{_badges(result)}</p>")
    anchors: dict[str, str] = {}  # the runs' heat maps first: the claims' panels link to them
    sections = experiment_sections(ids, result, folder, anchors)
    return (head + h.section("Verdicts", verdict_table(ids, [result], False, anchors))
            + h.section("Figures and runs", sections))


def collection_body(ids: h.Ids, folder: Path, experiments: list[Path]) -> str:
    """The page of a folder of experiments (`reproduce all`, or runs/reproduce/latest)."""
    results = [read_claims(f) for f in experiments]
    names = ", ".join(r.get("experiment", "?") for r in results)
    head = (f"<h1>{h.esc(folder.name)}: {len(results)} experiment{'s' if len(results) != 1 else ''}</h1>"
            f"<p class='clr-sub'>{h.esc(names)}</p>")
    pick = h.switch(ids, "experiment", [
        (r.get("experiment", "?"), f"<h3>{h.esc(r.get('experiment'))}: {h.esc(r.get('source'))} "
                                   f"{_badges(r)}</h3>{experiment_sections(ids, r, f)}")
        for r, f in zip(results, experiments, strict=True)])
    return (head + h.section("Verdicts", verdict_table(ids, results, with_experiment=len(results) > 1))
            + h.section("Figures and runs", pick))
