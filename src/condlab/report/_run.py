"""Report sections of run records: one run, a batch (``condlab train``), a Tracker record.

A run's page shows its loss curve with the initial-stage marker, a cosine heat map per hidden
layer with a slider over the recorded epochs, the predicted and measured lines of every
``condlab analyze`` result stored in the run (RUN/analysis/*/analysis.json; nothing is
re-analysed here), and the provenance. A batch shows its table of runs, their loss curves and
the details of its first MAX_RUNS runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from . import _html as h
from ._common import provenance, read_csv
from ._heatmap import MAX_ROWS, shown_rows, viewer

MAX_RUNS = 16        # runs of a batch shown in detail (all are in its table)
MANY_LAYERS = 4      # more hidden layers than this: a select shows one layer's maps at a time
LOSS_POINTS = 800    # a loss curve longer than this is drawn at evenly spaced epochs (markers kept)


def _external(run: Any) -> bool:
    return run.meta.get("architecture") == "external"


def loss_series(loss: np.ndarray, name: str = "", keep: tuple = ()) -> dict[str, Any]:
    """{name, x: epochs, y: loss} with at most LOSS_POINTS points (the epochs in `keep` included)."""
    loss = np.asarray(loss, dtype=np.float64)
    at = np.arange(len(loss))
    if len(loss) > LOSS_POINTS:
        kept = np.array([k for k in keep if k is not None and 0 <= k < len(loss)], dtype=np.int64)
        at = np.unique(np.concatenate([np.linspace(0, len(loss) - 1, LOSS_POINTS).round().astype(np.int64),
                                       kept]))
    return {"name": name, "x": at.tolist(), "y": h.finite(loss[at])}


def loss_chart(run: Any, xlabel: str = "epoch") -> str:
    """The loss curve (log scale) with the 70 % line and the epoch the initial stage ends."""
    from ..analysis import INITIAL_STAGE_SHARE

    loss = np.asarray(run.loss, dtype=np.float64)
    if not len(loss) or not np.isfinite(loss[0]):
        return "<p class='clr-note'>no loss recorded</p>"
    stage = run.initial_stage_epoch
    if stage is None and _external(run):  # a Tracker does not store it: condlab's rule on its loss
        from ..training import initial_stage_end

        stage = initial_stage_end(loss)
    vlines = [] if stage is None else [{"x": stage, "label": f"initial stage ends ({xlabel} {stage})"}]
    hlines = [{"y": INITIAL_STAGE_SHARE * loss[0], "label": "70 % of the initial loss"}] if loss[0] > 0 \
        else []
    note = ("<p class='clr-note'>initial stage: until the loss first falls to 70 % of its start"
            + ("; this run never got there" if stage is None else f", {xlabel} {stage}") + "</p>")
    return h.chart([loss_series(loss, keep=(stage,))], logy=bool(loss[0] > 0), xlabel=xlabel, ylabel="loss",
                   markers=False, vlines=vlines, hlines=hlines) + note


def _start_epoch(run: Any) -> int:
    """The epoch a slider opens at: the last snapshot inside the initial stage (condlab analyze's)."""
    if _external(run):
        return int(run.epochs[-1])
    from ..analysis import default_epoch

    return default_epoch(run)


def _mapped_layers(run: Any) -> list[str]:
    """The layers drawn: the hidden ones (every snapshot layer of a Tracker record)."""
    return run.names if _external(run) else [n for n in run.names if n != "output"]


def heatmap_viewers(ids: h.Ids, run: Any, prefix: str = "") -> list[str]:
    """One slider of cosine maps per hidden layer (every snapshot layer of a Tracker record)."""
    if not len(run.epochs) or not run.names:
        return ["<p class='clr-note'>no weight snapshots recorded</p>"]
    start = _start_epoch(run)
    return [viewer(ids, prefix + name, run.epochs, start, _layer_rows(run, name))
            for name in _mapped_layers(run)]


def _layer_rows(run: Any, name: str) -> Any:
    """epoch -> (the shown rows of layer `name`, its row count, a note on a thinned record)."""

    def rows(epoch: int) -> tuple[np.ndarray, int, str]:
        W = run.layer(name, epoch)
        thin = "" if run.is_full(epoch) or run.neurons is None else \
            f"the {W.shape[0]} recorded of {run.full_weights[name].shape[1]} neurons"
        return shown_rows(W), W.shape[0], thin

    return rows


def maps_note(opens_at: str) -> str:
    """How the maps are ordered, marked and sampled, and where each slider opens."""
    return ("<p class='clr-note'>Ordered by the count of each snapshot (count_orientations, default "
            "thresholds, no stability sweep); each counted line is outlined, arcs dashed. Layers of more "
            f"than {MAX_ROWS} rows show, and count, a seeded sample of {MAX_ROWS} rows (docs/report.md). "
            f"The slider opens at {opens_at}.</p>")


def heatmaps(ids: h.Ids, run: Any) -> str:
    """The heat-map section of a run page."""
    where = "the last snapshot" if _external(run) else "the last snapshot inside the initial stage"
    opens = f"{where} ({_start_epoch(run)})" if len(run.epochs) else where
    viewers, names = heatmap_viewers(ids, run), _mapped_layers(run)
    if len(viewers) > MANY_LAYERS and len(viewers) == len(names):  # one layer at a time, chosen
        return maps_note(opens) + h.switch(ids, "layer", list(zip(names, viewers, strict=True)))
    return maps_note(opens) + f"<div class='clr-viewers'>{''.join(viewers)}</div>"


def _analyses(path: Path | None) -> list[dict[str, Any]]:
    """Every analysis.json that `condlab analyze` wrote into the run, oldest first."""
    if path is None or not (path / "analysis").is_dir():
        return []
    found = sorted((path / "analysis").glob("*/analysis.json"), key=lambda p: p.stat().st_mtime)
    out = []
    for p in found:
        try:
            out.append({"name": p.parent.name, **json.loads(p.read_text())})
        except (OSError, json.JSONDecodeError):
            continue  # a damaged analysis is not the run's fault: leave it out, the others stay
    return out


ANGLE_COLUMNS = ["analysis", "layer", "epoch", "activation", "p", "measured lines", "within bound",
                 "prediction", "predicted lines", "angles (deg)", "mean angle (deg)", "best"]


def angles_table(ids: h.Ids, run: Any) -> str:
    """Predicted vs measured lines per layer, from the stored analyses (Sec. 5, Proposition 1)."""
    analyses = _analyses(run.path)
    if not analyses:
        where = run.path if run.path is not None else "RUN"
        return (f"<p class='clr-note'>No analysis stored in this run: `condlab analyze {h.esc(where)}` "
                "measures the lines and their angles to the predictions; this page then shows them.</p>")
    rows = []
    for a in analyses:
        for lay in a.get("layers", []):
            base = [a["name"], lay.get("layer"), lay.get("epoch"), lay.get("activation"), lay.get("p"),
                    lay.get("lines"), lay.get("within_bound")]
            preds = lay.get("predictions") or {"-": {}}
            for key, pred in preds.items():
                rows.append(base + [key, pred.get("n_lines"), pred.get("angles_deg"),
                                    pred.get("mean_angle_deg"), key == lay.get("best_prediction")])
    table_id = ids.new("angles")
    return (h.filter_box(table_id) + h.scroll_table(ANGLE_COLUMNS, rows, table_id)
            + "<p class='clr-note'>angles: from each measured line to the nearest predicted line.</p>")


def run_sections(ids: h.Ids, run: Any, with_provenance: bool = True) -> str:
    """Loss, heat maps, angles and provenance of one run (a loaded Run or one in memory)."""
    xlabel = "step" if _external(run) else "epoch"
    parts = [h.section("Loss", loss_chart(run, xlabel)), h.section("Cosine heat maps", heatmaps(ids, run))]
    if not _external(run):
        parts.append(h.section("Predicted vs measured lines", angles_table(ids, run)))
    if with_provenance:
        keys = ("model_class", "recorder", "every", "steps", "count_kwargs")
        spec = [(k, run.meta.get(k)) for k in keys] if _external(run) else \
            [("seed", run.spec.seed), ("init_std", run.spec.init_std), ("lr", run.spec.lr)]
        parts.append(h.section("Provenance", provenance(run.meta, run.config.to_dict(), tuple(spec))))
    return "".join(parts)


def run_title(run: Any) -> tuple[str, str]:
    """(title, one line: what the run is)."""
    name = run.path.name if run.path is not None else "run (in memory)"
    if _external(run):
        return name, f"Tracker record of {run.meta.get('model_class', 'a model')}, status {run.status}"
    m, d, t = run.config.model, run.config.data, run.config.train
    return name, (f"{run.config.name}: {m.arch} width {m.width} × depth {m.depth}, "
                  f"{', '.join(m.activations)}; n = {d.n}, d = {d.d}; {t.optimizer}, lr {run.spec.lr:g}, "
                  f"init std {run.spec.init_std:g}, seed {run.spec.seed}; {t.epochs} epochs; "
                  f"status {run.status}")


def run_body(ids: h.Ids, run: Any) -> str:
    """The page body of one run record (condlab's, or a Tracker's)."""
    title, sub = run_title(run)
    head = f"<h1>{h.esc(title)}</h1><p class='clr-sub'>{h.esc(sub)}</p>"
    if _external(run):
        return head + tracker_sections(ids, run) + run_sections(ids, run)
    return head + run_sections(ids, run)


def tracker_sections(ids: h.Ids, run: Any) -> str:
    """condensation.csv of a Tracker record: sortable table, a plot of a column against the step."""
    csv_path = None if run.path is None else run.path / "condensation.csv"
    if csv_path is None or not csv_path.is_file():
        return ""
    columns, rows = read_csv(csv_path)
    table_id = ids.new("layers")
    last = max((r[columns.index("step")] for r in rows), default=None) if "step" in columns else None
    plot = h.table_plot(ids, table_id, columns, "step", "lines", "layer") if "lines" in columns else ""
    body = (f"<p class='clr-note'>One row per measured step and layer (condensation.csv); the last step is "
            f"{last}. Filter e.g. <code>step={last}</code> for the per-layer table at the end.</p>"
            + h.filter_box(table_id, f"step={last}") + plot
            + h.scroll_table(columns, rows, table_id))
    return h.section("Per-layer condensation (Tracker)", body)


BATCH_COLUMNS = ["dir", "seed", "init_std", "lr", "weight_decay", "momentum", "dropout", "status",
                 "initial_stage_epoch", "final_loss"]


def batch_body(ids: h.Ids, folder: Path) -> str:
    """The page of a `condlab train` batch: its runs' table and loss curves, and the first runs in detail."""
    from .._outputs import read_json
    from ..records import load_run

    batch = read_json(folder / "batch.json")
    entries = batch.get("runs", [])
    table_id = ids.new("runs")
    rows = [[r.get(c) for c in BATCH_COLUMNS] for r in entries]
    runs = [load_run(folder / r["dir"]) for r in entries[:MAX_RUNS]]
    chart = h.chart([loss_series(r.loss, r.path.name) for r in runs[:20]], logy=True, xlabel="epoch",
                    ylabel="loss", markers=False)
    details = h.switch(ids, "run", [(r.path.name, run_sections(ids, r, with_provenance=False)) for r in runs])
    shown = "" if len(entries) <= MAX_RUNS else \
        f"<p class='clr-note'>the first {MAX_RUNS} of {len(entries)} runs in detail (all in the table)</p>"
    parts = [f"<h1>{h.esc(folder.name)}</h1><p class='clr-sub'>batch {h.esc(batch.get('name'))}: "
             f"{len(entries)} runs trained together, {h.esc(batch.get('optimizer'))}, "
             f"{batch.get('last_epoch')} epochs</p>",
             h.section("Runs", h.filter_box(table_id) + h.table(BATCH_COLUMNS, rows, table_id=table_id)),
             h.section("Loss curves", chart),
             h.section("One run in detail", shown + details),
             h.section("Provenance", provenance(batch, _read_config(folder)))]
    return "".join(parts)


def _read_config(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None

