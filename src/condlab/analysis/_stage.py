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
    return int(default_epochs(run.epochs, np.asarray(run.loss)[:, None])[0])


def stage_ends(loss: np.ndarray) -> np.ndarray:
    """The first epoch at or below 70 % of epoch 0's loss (or not finite), per run; loss (E, R)
    -> (R,) int, E for a run whose loss never fell that far in these E epochs (Sec. 4)."""
    loss = np.asarray(loss, dtype=np.float64)
    below = ~(loss > INITIAL_STAGE_SHARE * loss[:1])
    return np.where(below.any(axis=0), below.argmax(axis=0), len(loss))


def default_epochs(epochs: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """``default_epoch`` of every run of a batch: snapshot epochs (S,) ascending, loss (E, R) ->
    (R,) int: the last snapshot before the run's stage end, the first snapshot where none is."""
    epochs = np.asarray(epochs)
    before = np.searchsorted(epochs, stage_ends(loss), side="left") - 1
    return epochs[np.maximum(before, 0)]
