"""``condlab.inspect``: the condensation of every layer of any PyTorch model, as one table.

Per layer (see ``condlab.models._layers`` for what a layer is) the input weights W (m, k) go through
``count_orientations`` (O(m) memory, no m×m matrix) and give one row:

    layer, kind, rows (m), cols (k), lines, directions, share_1..share_3 (largest condensed
    lines, as shares of all m rows), condensed_share (all condensed lines), effective_neurons,
    effective_fraction, stable, set_aside (negligible rows), scattered, note (how the adapter
    read the layer, or why its heads were not split; empty when there is nothing to say)

**Effective number of neurons.** Active rows (not set aside) fall into groups: each condensed
line is one group, each scattered row a group of its own. With p_g = |g| / m_active,

    effective_neurons = exp(-Σ_g p_g ln p_g)          (exp of the Shannon entropy)

so a layer whose rows all lie on one line has 1, a layer without condensation has m_active,
and two equal lines give 2. ``effective_fraction`` = effective_neurons / m_active. (The talk's
"model rank" needs the trained function, not a checkpoint, so it is not reported here.)

Heat maps (eq. 5) of a layer with more than HEATMAP_ROWS rows show a sample: HEATMAP_ROWS rows
drawn without replacement by ``numpy.random.default_rng(HEATMAP_SEED)``, shown in the order
``cosine_order`` gives the full layer; the sampled row indices are stored in inspect.json.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor, nn

from ..analysis import Orientations, cosine_order
from ..records import atomic_write_json, atomic_write_text, provenance
from ._counts import count_weights
from ._layers import LayerMatrix, LayerSet, extract_layers
from ._sample import HEATMAP_ROWS, HEATMAP_SEED, heatmap_rows

TOP_SHARES = 3
COLUMNS = ["layer", "kind", "rows", "cols", "lines", "directions"] + \
    [f"share_{i + 1}" for i in range(TOP_SHARES)] + \
    ["condensed_share", "effective_neurons", "effective_fraction", "stable", "set_aside", "scattered", "note"]


def _pandas():
    try:
        import pandas
    except ImportError:
        raise ImportError("condlab.inspect returns a pandas DataFrame: install pandas "
                          "(pip install pandas)") from None
    return pandas


def effective_neurons(o: Orientations) -> float:
    """exp(entropy) of the group shares of active rows: condensed lines + scattered singletons."""
    m_active = o.params["m_active"]
    if m_active == 0:
        return 0.0
    sizes = [len(c.members) for c in o.lines] + [1] * len(o.scattered)
    p = np.asarray(sizes, dtype=np.float64) / m_active
    return float(math.exp(-np.sum(p * np.log(p))))


def layer_row(name: str, kind: str, o: Orientations, shape: tuple[int, int],
              note: str = "") -> dict[str, Any]:
    """One table row for a counted layer (see the module docstring for the columns)."""
    shares = [c.share for c in o.lines[:TOP_SHARES]]
    shares += [0.0] * (TOP_SHARES - len(shares))
    n_eff = effective_neurons(o)
    m_active = o.params["m_active"]
    return {
        "layer": name, "kind": kind, "rows": shape[0], "cols": shape[1],
        "lines": o.n_lines, "directions": o.n_directions,
        **{f"share_{i + 1}": round(s, 6) for i, s in enumerate(shares)},
        "condensed_share": round(sum(c.share for c in o.lines), 6),
        "effective_neurons": round(n_eff, 4),
        "effective_fraction": round(n_eff / m_active, 6) if m_active else 0.0,
        "stable": bool(o.stable), "set_aside": len(o.negligible), "scattered": len(o.scattered),
        "note": note,
    }


@dataclass
class InspectReport:
    """The table, plus what made it: matrices, orientations, skipped modules, notes."""

    table: Any  # pandas.DataFrame with COLUMNS
    layers: list[LayerMatrix]
    orientations: dict[str, Orientations]
    skipped: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    count_kwargs: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"layers": self.table.to_dict(orient="records"), "skipped": self.skipped,
                "notes": self.notes, "count_kwargs": self.count_kwargs,
                "effective_neurons": "exp(-sum p_g ln p_g) over condensed lines and scattered rows "
                                     "(p_g = group size / active rows)"}


def count_layers(layers: list[LayerMatrix], kwargs: dict[str, Any]) -> list[Orientations]:
    """``count_orientations(lay.weight, **kwargs)`` for each layer (``_counts.count_weights``)."""
    return count_weights([lay.weight for lay in layers], kwargs)


def measure_layers(found: LayerSet, count_kwargs: dict[str, Any] | None = None) -> InspectReport:
    """Count orientations of every matrix the adapter found; one table row each."""
    pd = _pandas()
    kwargs = dict(count_kwargs or {})
    rows, orient = [], {}
    for lay, o in zip(found.layers, count_layers(found.layers, kwargs), strict=True):
        orient[lay.name] = o
        rows.append(layer_row(lay.name, lay.kind, o, lay.shape, lay.note))
    table = pd.DataFrame(rows, columns=COLUMNS)
    table.attrs["skipped"] = [{"layer": s.name, "reason": s.reason} for s in found.skipped]
    return InspectReport(table, found.layers, orient, table.attrs["skipped"], list(found.notes), kwargs)


Source = nn.Module | Mapping[str, Tensor] | str | Path


def inspect_model(model: Source, *, layers: str | list[str] | None = None, heads: int | None = None,
                  count_kwargs: dict[str, Any] | None = None, config: Any = None) -> InspectReport:
    """The full report for a module, state_dict or checkpoint path (``inspect`` returns its table).

    A path (file or ``save_pretrained`` folder) is read by ``_safe_load.load_source`` (safe
    loading only); its config.json, if any, gives the head counts.
    """
    if isinstance(model, str | Path):
        from ..records import load_source

        model, config = load_source(model)
    return measure_layers(extract_layers(model, layers=layers, heads=heads, config=config), count_kwargs)


def inspect(model: Source, layers: str | list[str] | None = None, *, heads: int | None = None,
            **count_kwargs: Any):
    """Per-layer condensation of a model as a pandas DataFrame (Zhou et al. 2022, eq. 5).

    `model`: an nn.Module, a state_dict, or the path of a checkpoint file or Hugging Face
    ``save_pretrained`` folder. Rows are the adapter's layers (``condlab.models._layers``), per
    attention head where the heads are known; columns as in ``condlab.models._inspect``; skipped
    modules with the reason are in ``table.attrs["skipped"]``. `count_kwargs` go to
    ``count_orientations`` (penalty, negligible_mads, min_share).
    """
    return inspect_model(model, layers=layers, heads=heads, count_kwargs=count_kwargs).table


def heatmap_matrix(W: Any, o: Orientations, max_rows: int = HEATMAP_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """(rows shown in display order, W[rows]) for an eq. 5 heat map of a possibly large layer."""
    from ..analysis import as_matrix

    W = as_matrix(W)
    order = cosine_order(W, o)
    sample = heatmap_rows(W.shape[0], max_rows)
    shown = order[np.isin(order, sample)] if len(sample) < W.shape[0] else order
    return shown, W[shown]


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def write_report(report: InspectReport, out: str | Path, *, figures: bool = True,
                 source: str = "", settings: dict | None = None, overwrite: bool = False) -> list[Path]:
    """Write inspect.csv, inspect.json and (figures) cosine_LAYER.png into `out`.

    The one output-folder rule (``condlab._outputs``): a folder holding an inspect result of other
    `settings` (default: the `source`) is refused unless `overwrite`, any other result always."""
    from .._outputs import check_same_result

    out = Path(out)
    settings = {"source": source} if settings is None else settings
    check_same_result(out / "inspect.json", settings, overwrite, "inspect")
    written: list[Path] = []
    shown_rows: dict[str, list[int]] = {}
    if figures:
        from ..plotting import cosine_heatmap, save_figure

        for lay in report.layers:
            o = report.orientations[lay.name]
            shown, W = heatmap_matrix(lay.weight, o)
            sampled = len(shown) < lay.shape[0]
            if sampled:
                shown_rows[lay.name] = [int(i) for i in shown]
            title = (f"{lay.name}: {o.n_lines} lines" + (f" ({len(shown)} of {lay.shape[0]} rows)"
                                                           if sampled else ""))
            written += save_figure(cosine_heatmap(W, np.arange(len(shown)), title=title),
                                   out / f"cosine_{_safe_name(lay.name)}", formats=("png",))
    atomic_write_text(out / "inspect.csv", report.table.to_csv(index=False))
    parquet = write_parquet(report.table, out / "inspect.parquet")
    atomic_write_json(out / "inspect.json", {
        "source": source, **report.to_dict(), "settings": settings,
        "heatmap": {"max_rows": HEATMAP_ROWS, "seed": HEATMAP_SEED, "sampled_rows": shown_rows,
                    "sampling": "numpy.random.default_rng(seed).choice(m, max_rows, replace=False)"},
        "provenance": provenance()})
    return [out / "inspect.csv", out / "inspect.json", *parquet, *written]


def write_parquet(table: Any, path: Path) -> list[Path]:
    """`table` as Parquet beside its CSV when pyarrow is installed (atomically); [] without it."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return []
    import io

    from ..records import atomic_write_bytes

    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    atomic_write_bytes(path, buffer.getvalue())
    return [path]


def external_run_figures(run: Any, analysis: Any, out: str | Path) -> list[Path]:
    """Heat maps (sampled like write_report's) and the loss curve of an analysed Tracker run."""
    from ..plotting import cosine_heatmap, loss_plot, save_figure

    out, written = Path(out), []
    for report in analysis.layers:
        W = run.layer(report.layer, analysis.epoch)
        shown, sub = heatmap_matrix(W, report.orientations)
        title = f"{report.layer}: {report.orientations.n_lines} lines, step {analysis.epoch}" + (
            f" ({len(shown)} of {W.shape[0]} rows)" if len(shown) < W.shape[0] else "")
        written += save_figure(cosine_heatmap(sub, np.arange(len(shown)), title=title),
                               out / f"cosine_{_safe_name(report.layer)}", formats=("png",))
    written += save_figure(loss_plot(run.loss, snapshot_epoch=analysis.epoch, title="training loss"),
                           out / "loss", formats=("png",))
    return written
