"""Line counts of many layers (sweep summaries, trackers): the count and nothing else.

``count_lines(W)`` is ``count_orientations(W, band=False).n_lines``, and ``count_lines_many``
counts a list or stack of layers the same way: the same batched implementation
(analysis/_counting.py), one call per group of same-shape layers, so a sweep's 512 layers are
fitted together. The result of a layer does not depend on the other layers counted with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

import numpy as np

from condlab.analysis._counting import MIN_SHARE, NEGLIGIBLE_MADS, PENALTY, shape_groups, structures
from condlab.analysis._orientations import _check

# From about this many layers per call a layer costs what it costs in a large stack (Xeon-2,
# thread time per layer: 1.87 ms at 8, 0.99 at 16, 0.80 at 32, 0.67 at 128, 0.62-0.70 at 256-512),
# so a stack is split over threads only into parts of at least this many: a sweep of small
# batches (8 layers each) counted each batch on two threads, more CPU and GIL than one thread.
LAYERS_PER_CALL = 32


def count_lines(
    W: Any, *, penalty: float = PENALTY, negligible_mads: float = NEGLIGIBLE_MADS,
    min_share: float = MIN_SHARE,
) -> int:
    """Condensed lines of W (m, k): ``count_orientations(W, band=False, ...).n_lines``."""
    return count_lines_many([W], penalty=penalty, negligible_mads=negligible_mads, min_share=min_share)[0]


def count_lines_many(
    layers: Iterable[Any],
    *,
    penalty: float = PENALTY,
    negligible_mads: float = NEGLIGIBLE_MADS,
    min_share: float = MIN_SHARE,
    threads: int = 1,
) -> list[int]:
    """``[count_lines(W) for W in layers]`` for a stack (B, m, k) or a list of (m, k) layers.

    Same-shape layers are counted in one batched call, split into at most `threads` contiguous
    ranges of at least LAYERS_PER_CALL layers on condlab's thread pool (numpy releases the GIL in
    its array work; a smaller part costs more per layer than a second thread saves).
    """
    _check(penalty, negligible_mads, min_share)
    if int(threads) < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    items = layers if isinstance(layers, np.ndarray) or hasattr(layers, "detach") else list(layers)
    counts = [0] * len(items)
    for index, stack in shape_groups(items):
        found = _count_stack(stack, penalty, negligible_mads, min_share, int(threads))
        for i, c in zip(index.tolist(), found.tolist(), strict=True):
            counts[i] = int(c)
    return counts


def _count_stack(stack: np.ndarray, penalty: float, mads: float, min_share: float,
                 threads: int) -> np.ndarray:
    """Line counts (B,) of a float64 stack (B, m, k), on `threads` threads."""
    out = np.zeros(len(stack), dtype=np.int64)
    if len(stack) == 0:
        return out

    def part(sl: slice) -> None:
        n = sl.stop - sl.start
        out[sl] = structures(stack[sl], np.full(n, penalty), np.full(n, mads), min_share).n_lines

    threads = min(threads, len(stack) // LAYERS_PER_CALL)
    if threads <= 1:
        part(slice(0, len(stack)))
        return out
    from condlab._accel import in_parallel, split_ranges  # the training steps' pool (imports torch)

    in_parallel([partial(part, sl) for sl in split_ranges(len(stack), threads)])
    return out
