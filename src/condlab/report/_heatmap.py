"""Cosine heat maps (the paper's eq. 5, Figs. 2-4) of recorded weights, one per epoch, behind a slider.

Each map is D(u, v) of a layer's rows at one snapshot, ordered by ``cosine_order`` from the count
of that snapshot (``count_orientations`` at its default thresholds, without the stability sweep:
the same count as the sweep table's), with each counted line outlined (arcs dashed). The map is
a small palette PNG, one pixel per pair of neurons, with the colours of condlab's plots
(``COSINE_CMAP``), scaled up by the browser without smoothing; the outlines are SVG on top.

Wide layers stay light: above MAX_ROWS rows a map shows MAX_ROWS of them, drawn by
``numpy.random.default_rng(0).choice(m, MAX_ROWS, replace=False)`` (``condlab inspect``'s rule,
``condlab.models.heatmap_rows``), and the count that orders and outlines them is the sample's, so a
frame costs the same at any width (counting 10^5 rows took 0.5 s a snapshot; a line of share
>= 5 %, the counter's minimum, holds about 13 of 256 sampled rows). The whole layer's count is
in the stored results (results.csv, analysis.json). Above MAX_FRAMES snapshots the slider shows
MAX_FRAMES of them, evenly spaced, always with the first, the last and the run's analysis epoch;
a run with many layers (a Tracker record of a large model) gets FRAME_BUDGET maps in all, at
least 2 snapshots a layer.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from functools import cache

import numpy as np

from ..analysis import Orientations, cosine_matrix, cosine_order, count_orientations, count_orientations_many
from ..models import heatmap_rows
from ._html import Ids, data_uri, esc

MAX_ROWS = 256    # a map is drawn 260 px wide: more rows than pixels would add bytes, not detail
MAX_FRAMES = 32
FRAME_BUDGET = 192  # maps of one run: a model with many layers gets fewer snapshots per layer
LEVELS = 101      # colours of the palette for D in [-1, 1]; one more, grey, for zero rows (NaN)


@cache
def _palette() -> np.ndarray:
    """(LEVELS + 1, 3) uint8: COSINE_CMAP at LEVELS points of [-1, 1], then its colour for NaN."""
    from ..plotting import COSINE_CMAP

    rgba = COSINE_CMAP(np.linspace(0.0, 1.0, LEVELS))
    bad = np.asarray(COSINE_CMAP.get_bad())[None, :]
    return (np.concatenate([rgba, bad])[:, :3] * 255).round().astype(np.uint8)


def colorbar() -> str:
    """The colour scale of every map, as a CSS gradient with its three labels."""
    stops = ", ".join(f"rgb({r},{g},{b})" for r, g, b in _palette()[:LEVELS:10])
    return (f'<div class="clr-cbar" style="background: linear-gradient(to right, {stops})"></div>'
            '<div class="clr-cbar-labels"><span>-1</span><span>D(u, v)</span><span>1</span></div>')


def png(D: np.ndarray) -> bytes:
    """(n, n) cosines in [-1, 1] (NaN allowed) -> an 8-bit palette PNG, one pixel per entry."""
    from PIL import Image

    index = np.full(D.shape, LEVELS, dtype=np.uint8)
    ok = np.isfinite(D)
    index[ok] = np.rint((D[ok] + 1.0) / 2.0 * (LEVELS - 1)).astype(np.uint8)
    image = Image.fromarray(index, mode="P")
    image.putpalette(_palette().tobytes())
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def frame_svg(W: np.ndarray, label: str = "", orientations: Orientations | None = None) -> tuple[str, str]:
    """(SVG of one map, the count in words) for weights W (m, k): sampled, ordered, lines outlined.

    `orientations`: the count of the sampled rows (`shown_rows(W)`), if already made."""
    if W.shape[0] == 0:
        return "<p class='clr-note'>no rows</p>", "no rows"
    sub = shown_rows(W)
    n = len(sub)
    o = orientations if orientations is not None else count_orientations(sub, band=False)
    order = cosine_order(sub, o)
    group = np.full(n, -1, dtype=np.int64)
    for k, c in enumerate(tuple(o.lines) + tuple(o.arcs)):
        group[np.asarray(c.members)] = k
    marks = []
    labels = group[order]
    starts = np.flatnonzero(np.diff(labels, prepend=-2) != 0)
    for a, b in zip(starts, list(starts[1:]) + [n], strict=True):
        k = int(labels[a])
        if k < 0:
            continue
        arc = k >= len(o.lines)
        c = (tuple(o.lines) + tuple(o.arcs))[k]
        what = (f"arc {k - len(o.lines) + 1}: {c.width_deg:.0f}° wide" if arc else f"line {k + 1}") + \
            f", {len(c.members)} neurons (share {c.share:.2f})"
        dash = ' stroke-dasharray="5 3"' if arc else ""
        marks.append(f'<rect x="{a}" y="{a}" width="{b - a}" height="{b - a}" fill="none" stroke="#000" '
                     f'stroke-width="2" vector-effect="non-scaling-stroke"{dash}>'
                     f"<title>{esc(what)}</title></rect>")
    count = f"{o.n_lines} line{'s' if o.n_lines != 1 else ''}" + (f", {o.n_arcs} arc(s)" if o.n_arcs else "")
    sampled = f" in a sample of {n} of {W.shape[0]} rows" if n < W.shape[0] else ""
    uri = data_uri(png(cosine_matrix(sub[order])), "image/png")
    svg = (f'<svg class="clr-hm" viewBox="0 0 {n} {n}" preserveAspectRatio="none" role="img" '
           f'aria-label="{esc(label or count)}"><image href="{uri}" width="{n}" height="{n}" '
           f'style="image-rendering: pixelated" preserveAspectRatio="none"/>{"".join(marks)}</svg>')
    return svg, count + sampled


def shown_rows(W: np.ndarray) -> np.ndarray:
    """The rows of W (m, k) that a map shows (`heatmap_rows`)."""
    return np.asarray(W)[heatmap_rows(W.shape[0], MAX_ROWS)]


def _frame_counts(frames: list[np.ndarray]) -> list[Orientations | None]:
    """The count of each frame's shown rows (None: a frame without rows), one batched fit."""
    shown = [i for i, W in enumerate(frames) if W.shape[0]]
    counts = dict(zip(shown, count_orientations_many([shown_rows(frames[i]) for i in shown]), strict=True))
    return [counts.get(i) for i in range(len(frames))]


def frame_epochs(epochs: Sequence[int], keep: Sequence[int] = (), layers: int = 1) -> list[int]:
    """The snapshot epochs a slider shows: all, or at most MAX_FRAMES (FRAME_BUDGET over all
    `layers`) evenly spaced, the first, the last and `keep` among them."""
    epochs = [int(e) for e in epochs]
    most = max(2 + len(keep), min(MAX_FRAMES, FRAME_BUDGET // max(layers, 1)))
    if len(epochs) <= most:
        return epochs
    picked = {epochs[int(i)] for i in np.linspace(0, len(epochs) - 1, most - len(keep)).round()}
    return sorted(picked | {int(e) for e in keep if e in epochs})


def viewer(ids: Ids, title: str, frames: list[tuple[int, np.ndarray, str]], start: int) -> str:
    """A slider over one layer's maps: frames (epoch, W, extra note); `start` is shown first."""
    parts, position = [], 0
    counts = _frame_counts([W for _, W, _ in frames])
    for i, (epoch, W, note) in enumerate(frames):
        svg, count = frame_svg(W, orientations=counts[i])
        label = f"epoch {epoch}: {count}" + (f" ({note})" if note else "")
        parts.append(f'<figure class="clr-frame" data-epoch="{epoch}" data-label="{esc(label)}"'
                     f'{"" if epoch == start else " hidden"}>{svg}</figure>')
        if epoch == start:
            position = i
    slider = (f'<input type="range" class="clr-slider" min="0" max="{len(frames) - 1}" value="{position}" '
              f'aria-label="snapshot epoch of {esc(title)}">')
    return (f'<div class="clr-viewer" id="{ids.new("maps")}"><h3>{esc(title)}</h3>{slider}'
            f'<div class="clr-label clr-note"></div><div class="clr-frames">{"".join(parts)}</div>'
            f"{colorbar()}</div>")
