"""``condlab analyze`` on runs of models condlab did not build (``condlab.Tracker`` records).

Such a run has weight snapshots of arbitrary layers (module paths, any shape) but no condlab
architecture, data or activation, so the Sec. 5 predictions, the replay and the 1-D pictures
cannot be made. What still works is the measurement: every snapshot layer is counted with
``count_orientations`` and reported like a condlab layer, with a note saying why nothing is
predicted.
"""

from __future__ import annotations

from ..records import Run
from ._orientations import cosine_order, count_orientations
from ._report import LayerReport

NOTE = "not a condlab network: layers counted; theory predictions need condlab's FC architecture"


def is_external(run: Run) -> bool:
    """True for a run recorded from a model condlab did not build (meta.json architecture)."""
    return run.meta.get("architecture") == "external"


def analyze_external(run: Run, epoch: int | None, layers: list[int] | None,
                     count_kwargs: dict | None) -> tuple[int, list[LayerReport], dict]:
    """Count every snapshot layer of an external run (0-based `layers` index its layer list).

    Returns the epoch, the layer reports and the heat-map orders, which ``analyze_run`` puts
    into its RunAnalysis (kept there so that this module does not import ``_run`` back).
    """
    names = list(run.weights)
    if not names:
        raise ValueError(f"'{run.path}' recorded metrics only (Tracker snapshots=False): its per-layer "
                         "counts are in condensation.csv; record with snapshots=True to analyze weights")
    epoch = int(run.epochs[-1]) if epoch is None else int(epoch)
    run.index(epoch)
    chosen = list(range(len(names))) if layers is None else layers
    bad = [k for k in chosen if not 0 <= k < len(names)]
    if bad:
        raise ValueError(f"layer {bad[0] + 1} does not exist: this run has layers 1..{len(names)} "
                         f"({', '.join(names[:6])}{' ...' if len(names) > 6 else ''})")
    reports, arrays = [], {}
    for k in chosen:
        W = run.layer(names[k], epoch)
        o = count_orientations(W, **(count_kwargs or {}))
        reports.append(LayerReport(names[k], epoch, "-", None, o, note=NOTE))
        arrays[f"order_{names[k]}"] = cosine_order(W, o)
    return epoch, reports, arrays
