"""The initial stage of a run (Sec. 4): until its loss first falls to INITIAL_STAGE_SHARE of its
start; the epoch ``condlab analyze`` measures by default (numpy only: the report reads it without
torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..records import Run

INITIAL_STAGE_SHARE = 0.7


def default_epoch(run: Run) -> int:
    """The last snapshot strictly inside the initial stage: loss > 70 % of loss at epoch 0.

    Snapshots after the first epoch whose loss fell to 70 % are never chosen, even when the
    loss rises again; a run whose loss never falls gives its last snapshot.
    """
    loss = np.asarray(run.loss, dtype=np.float64)
    end = len(loss)
    below = np.flatnonzero(~(loss > INITIAL_STAGE_SHARE * loss[0])) if len(loss) else []
    if len(below):
        end = int(below[0])  # first epoch at or below 70 % (or not finite)
    inside = run.epochs[run.epochs < end]
    return int(inside[-1]) if len(inside) else int(run.epochs[0])
