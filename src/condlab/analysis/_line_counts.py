"""Line counts of many layers (sweep summaries, trackers): the count and nothing else.

``count_lines(W)`` is ``count_orientations(W, sweep=()).n_lines`` computed by the same code
(the same clustering, gap rule and null model on the same arrays, so the same integer), but
without building what a count does not need: the clusters' members, means and directions,
the scattered and negligible rows, the parameters. tests/test_line_counts.py holds it to
``count_orientations`` on planted, random and trained layers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from condlab.analysis._cosine import DEFAULT_CHUNK
from condlab.analysis._orientations import (
    AMPLITUDE_RATIO,
    COS_THRESHOLD,
    MIN_SHARE,
    _min_count,
    _prepare,
    _structures,
)


def count_lines(
    W: Any,
    *,
    cos_threshold: float = COS_THRESHOLD,
    amplitude_ratio: float = AMPLITUDE_RATIO,
    min_share: float = MIN_SHARE,
    chunk: int = DEFAULT_CHUNK,
) -> int:
    """Condensed lines of W (m, k): ``count_orientations(W, sweep=(), ...).n_lines``, cheaper."""
    order, U = _prepare(W, cos_threshold, amplitude_ratio)[4:]
    lines, _ = _structures(U, cos_threshold, _min_count(min_share, len(order)), chunk)
    return len(lines)


def count_lines_many(layers: Iterable[Any], **count_kwargs: Any) -> list[int]:
    """``count_lines`` of each (m, k) layer of `layers` (a list, or an (R, m, k) array)."""
    return [count_lines(W, **count_kwargs) for W in layers]
