"""Cosine heat maps (the paper's eq. 5, Figs. 2-4) of recorded weights, one per epoch, behind a slider.

Each map is D(u, v) of a layer's rows at one snapshot, ordered by ``cosine_order`` from the count
of that snapshot (``count_orientations`` at its default thresholds, without the stability sweep:
the same count as the sweep table's), with each counted line outlined (arcs dashed). The map is
a small palette PNG, one pixel per pair of neurons, in the colours of condlab's plots
(``condlab.plotting.cosine_colors``, what ``COSINE_CMAP`` samples; no matplotlib), scaled up by
the browser without smoothing; the outlines are SVG on top.

Wide layers stay light: above MAX_ROWS rows a map shows MAX_ROWS of them, drawn by
``numpy.random.default_rng(0).choice(m, MAX_ROWS, replace=False)`` (``condlab inspect``'s rule,
``condlab.models.heatmap_rows``), and the count that orders and outlines them is the sample's, so a
frame costs the same at any width (counting 10^5 rows took 0.5 s a snapshot; a line of share
>= 5 %, the counter's minimum, holds about 13 of 256 sampled rows). The whole layer's count is
in the stored results (results.csv, analysis.json).

A page draws at most PAGE_FRAMES maps, which is what its count costs: each of its s sliders shows
at most min(MAX_FRAMES, PAGE_FRAMES // s) snapshots (at least MIN_FRAMES), evenly spaced, always
with the first, the last and the slider's opening epoch. Sliders are placed as marks while the
page is built (`viewer`) and drawn at the end (`draw_sliders`), every frame of the page counted
in one batched fit (a layer's count does not depend on the others of its stack).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from ..analysis import Orientations, cosine_matrix, cosine_order, count_orientations_many
from ..models import heatmap_rows
from ._html import Ids, data_uri, esc

MAX_ROWS = 256    # a map is drawn 260 px wide: more rows than pixels would add bytes, not detail
MAX_FRAMES = 32    # snapshots a slider shows, at most
PAGE_FRAMES = 48   # maps of one page, all its sliders together: what the page's count costs
MIN_FRAMES = 3     # snapshots a slider shows, at least: the first, the opening one, the last
LEVELS = 101      # colours of the palette for D in [-1, 1]; one more, grey, for zero rows (NaN)


@cache
def _palette() -> np.ndarray:
    """(LEVELS + 1, 3) uint8: condlab's cosine colours at LEVELS points of [-1, 1], then NaN's grey."""
    from ..plotting import cosine_colors

    D = np.concatenate([np.linspace(-1.0, 1.0, LEVELS), [np.nan]])
    return (cosine_colors(D) * 255).round().astype(np.uint8)


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


def frame_svg(sub: np.ndarray, m: int, o: Orientations | None) -> tuple[str, str]:
    """(SVG of one map, the count in words) for the shown rows `sub` (`shown_rows`) of a layer of
    m rows and their count `o`: ordered, lines outlined."""
    n = len(sub)
    if n == 0 or o is None:
        return "<p class='clr-note'>no rows</p>", "no rows"
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
    sampled = f" in a sample of {n} of {m} rows" if n < m else ""
    uri = data_uri(png(cosine_matrix(sub[order])), "image/png")
    svg = (f'<svg class="clr-hm" viewBox="0 0 {n} {n}" preserveAspectRatio="none" role="img" '
           f'aria-label="{esc(count)}"><image href="{uri}" width="{n}" height="{n}" '
           f'style="image-rendering: pixelated" preserveAspectRatio="none"/>{"".join(marks)}</svg>')
    return svg, count + sampled


def shown_rows(W: np.ndarray) -> np.ndarray:
    """The rows of W (m, k) that a map shows (`heatmap_rows`)."""
    return np.asarray(W)[heatmap_rows(W.shape[0], MAX_ROWS)]


def frames_per_slider(sliders: int) -> int:
    """Snapshots each slider of a page with `sliders` sliders shows, at most (PAGE_FRAMES in all)."""
    return max(MIN_FRAMES, min(MAX_FRAMES, PAGE_FRAMES // max(sliders, 1)))


def frame_epochs(epochs: Sequence[int], keep: Sequence[int] = (), most: int = MAX_FRAMES) -> list[int]:
    """The snapshot epochs a slider shows: all, or at most `most` evenly spaced, the first, the
    last and `keep` among them."""
    epochs = [int(e) for e in epochs]
    inner = {int(e) for e in keep if int(e) in epochs[1:-1]}  # the ends are always shown
    most = max(most, 2 + len(inner))
    if len(epochs) <= most:
        return epochs
    picked = {epochs[int(i)] for i in np.linspace(0, len(epochs) - 1, most - len(inner)).round()}
    return sorted(picked | inner)


@dataclass
class Slider:
    """One layer's maps, waiting for the page to be built: `rows(epoch)` gives (its shown rows, the
    layer's row count, a note) at one of `epochs`; the slider opens at `start`."""

    ident: str
    title: str
    epochs: list[int]
    start: int
    rows: Callable[[int], tuple[np.ndarray, int, str]]


MARK = re.compile(r"<!--clr-slider:([\w-]+)-->")


def viewer(ids: Ids, title: str, epochs: Sequence[int], start: int,
           rows: Callable[[int], tuple[np.ndarray, int, str]]) -> str:
    """A slider over one layer's maps, as a mark in the page that `draw_sliders` replaces."""
    slider = Slider(ids.new("maps"), title, [int(e) for e in epochs], int(start), rows)
    ids.pending.append(slider)
    return f"<!--clr-slider:{slider.ident}-->"


def draw_sliders(ids: Ids, content: str) -> str:
    """`content` with each slider's mark replaced by its maps: frames_per_slider of the page's
    sliders each, every frame of the page counted in one batched fit."""
    sliders, ids.pending = ids.pending, []
    if not sliders:
        return content
    most = frames_per_slider(len(sliders))
    frames = [[(e, *s.rows(e)) for e in frame_epochs(s.epochs, (s.start,), most)] for s in sliders]
    counts = iter(_frame_counts([sub for shown in frames for _, sub, _, _ in shown]))
    html = {s.ident: _slider_html(s, shown, [next(counts) for _ in shown])
            for s, shown in zip(sliders, frames, strict=True)}
    return MARK.sub(lambda m: html[m.group(1)], content)


def _frame_counts(frames: list[np.ndarray]) -> list[Orientations | None]:
    """The count of each frame's shown rows (None: a frame without rows), one batched fit."""
    shown = [i for i, W in enumerate(frames) if W.shape[0]]
    counts = dict(zip(shown, count_orientations_many([frames[i] for i in shown]), strict=True))
    return [counts.get(i) for i in range(len(frames))]


def _slider_html(s: Slider, frames: list[tuple[int, np.ndarray, int, str]],
                 counts: list[Orientations | None]) -> str:
    """The slider's HTML: frames (epoch, shown rows, the layer's rows, note) and their counts."""
    parts, position = [], 0
    for i, ((epoch, sub, m, note), o) in enumerate(zip(frames, counts, strict=True)):
        svg, count = frame_svg(sub, m, o)
        label = f"epoch {epoch}: {count}" + (f" ({note})" if note else "")
        parts.append(f'<figure class="clr-frame" data-epoch="{epoch}" data-label="{esc(label)}"'
                     f'{"" if epoch == s.start else " hidden"}>{svg}</figure>')
        if epoch == s.start:
            position = i
    slider = (f'<input type="range" class="clr-slider" min="0" max="{len(frames) - 1}" value="{position}" '
              f'aria-label="snapshot epoch of {esc(s.title)}">')
    return (f'<div class="clr-viewer" id="{s.ident}"><h3>{esc(s.title)}</h3>{slider}'
            f'<div class="clr-label clr-note"></div><div class="clr-frames">{"".join(parts)}</div>'
            f"{colorbar()}</div>")
