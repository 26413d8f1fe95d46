"""condlab's colour map for cosines D(u, v) in [-1, 1], from five anchor colours (numpy only).

A diverging map, linear in RGB between its anchors: deep blue at D = -1 (opposite directions),
light blue at -0.5, near-white at 0 (orthogonal), light red at 0.5, deep red at 1 (one
direction); NaN (a row of zero weights, whose direction is undefined) is grey. The figures
(``COSINE_CMAP``, matplotlib) and the report's palette PNGs (no matplotlib) both sample it here.
"""

from __future__ import annotations

import numpy as np

#: (D, RGB 0-255) anchors of the map, D from -1 to 1
COSINE_ANCHORS = ((-1.0, (33, 64, 140)), (-0.5, (115, 161, 217)), (0.0, (245, 245, 245)),
                  (0.5, (230, 140, 115)), (1.0, (153, 20, 33)))
BAD_GREY = (140, 140, 140)  # NaN: a zero row


def cosine_colors(D: np.ndarray) -> np.ndarray:
    """(..., 3) RGB in [0, 1] of cosines D in [-1, 1] (clipped; NaN: BAD_GREY)."""
    D = np.asarray(D, dtype=np.float64)
    at = np.array([a for a, _ in COSINE_ANCHORS])
    rgb = np.array([c for _, c in COSINE_ANCHORS], dtype=np.float64) / 255.0
    x = np.clip(np.nan_to_num(D, nan=0.0), -1.0, 1.0)
    out = np.stack([np.interp(x, at, rgb[:, i]) for i in range(3)], axis=-1)
    out[np.isnan(D)] = np.array(BAD_GREY) / 255.0
    return out
