"""The count of a model's layers, without torch: what ``inspect``, the Tracker and its worker call.

``count_weights`` is ``count_orientations(W, **kwargs)`` for each matrix; without the band
(``band=False``), matrices of one shape (a model's heads, its repeated blocks) go through one
batched fit. It imports numpy and condlab.analysis only, so the Tracker's count worker
(``_count_worker``) starts without torch.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..analysis import Orientations, count_orientations, count_orientations_many

SMALL_ROWS = 4096  # below this many rows the count's products are small: one BLAS thread is faster
_BLAS: Any = None


def one_blas_thread():
    """A context in which numpy's BLAS uses one thread (threadpoolctl, made once).

    The count does many small matrix products; with several BLAS threads each one costs a
    thread hand-off, and the threads keep spinning afterwards, taking cores from whatever runs
    next (a training step, another count): 15-30x slower counts were measured on small layers."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


def count_weights(weights: list[Any], kwargs: dict[str, Any]) -> list[Orientations]:
    """Orientations of each matrix (m, k) of `weights` (arrays or tensors), counted with `kwargs`
    (``count_orientations``'s keywords)."""
    def threads(rows: list[int]):
        return one_blas_thread() if max(rows, default=0) < SMALL_ROWS else contextlib.nullcontext()

    knobs = {"band", "penalty", "negligible_mads", "min_share"}
    if kwargs.get("band", True) is False and set(kwargs) <= knobs:
        with threads([W.shape[0] for W in weights]):
            return count_orientations_many(list(weights), **{k: v for k, v in kwargs.items() if k != "band"})
    out = []
    for W in weights:
        with threads([W.shape[0]]):
            out.append(count_orientations(W, **kwargs))
    return out
