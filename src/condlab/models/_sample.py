"""Which rows of a wide layer a heat map (eq. 5) shows: all, or a seeded sample (no torch, so the
report draws its maps without it; ``condlab inspect`` and ``condlab report`` share the rule)."""

from __future__ import annotations

import numpy as np

HEATMAP_ROWS = 512
HEATMAP_SEED = 0


def heatmap_rows(m: int, max_rows: int = HEATMAP_ROWS, seed: int = HEATMAP_SEED) -> np.ndarray:
    """Sorted row indices shown in a heat map: all of them, or a seeded sample of max_rows."""
    if m <= max_rows:
        return np.arange(m)
    return np.sort(np.random.default_rng(seed).choice(m, max_rows, replace=False))
