"""What a phase trainer keeps per run, for either depth: the runs still training and their outcomes.

A network of the diagram (_net2.TwoLayer, _net3.ThreeLayer) subclasses Runs with its weights and
implements the protocol the trainer (_train.converge, its loop descend) calls:

    LAYERS                             the layers whose RD a run records
    start(m, scales, seeds, ...)       the runs at their initialization (a classmethod)
    loss_grad_bound(xt, yt) -> loss (R,), gradients, step bound (R,)
    step(eta (R,), gradients)          one GD step, accumulating the changes in their own buffers
    keep(mask (R,), gradients)         drop the runs that left the batch -> their gradients, kept
    rd(j) -> {layer: RD}               ||theta(T) - theta(0)|| / ||theta(0)|| over the first copy
    neurons(j) -> {name: array}        what a run saves of its final neurons
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class PhaseRun:
    """The outcome of one training run (RD over the first copy's neurons when ASI is on)."""

    rd: dict[str, float]        # per layer: {"w", "a"} (two layers) or {"w1", "w2", "a"} (three)
    loss: float                 # R at the last step
    steps: int                  # GD steps taken
    converged: bool             # loss < tol (False: stopped at the step budget, or diverged)
    status: str                 # "complete", "diverged" (non-finite loss) or "interrupted"
    time: float                 # gradient-flow time reached: the sum of the step sizes
    curve: dict[str, np.ndarray] = field(default_factory=dict)    # step, time, loss per step
    neurons: dict[str, np.ndarray] = field(default_factory=dict)  # final weights of saved neurons

    # one layer's RD by the name of its column (rd_w1 is the three-layer W1's, ...)
    rd_w = property(lambda self: self.rd["w"])
    rd_w1 = property(lambda self: self.rd["w1"])
    rd_w2 = property(lambda self: self.rd["w2"])
    rd_a = property(lambda self: self.rd["a"])


@dataclass
class PhaseBatch:
    """All runs of one call, in input order; `interrupted` when Ctrl-C ended it (nothing usable)."""

    runs: list[PhaseRun]
    seconds: float
    interrupted: bool = False


class Runs:
    """The runs still training, per run (R): output divisor alpha, step factor c (halved when the
    loss rises), previous loss, time (the sum of the step sizes), index into the input order."""

    LAYERS: tuple[str, ...] = ()

    def __init__(self, alpha: torch.Tensor, c: float):
        self.alpha = alpha
        self.c = torch.full_like(alpha, c)
        self.prev_loss = torch.full_like(alpha, math.inf)
        self.time = torch.zeros_like(alpha)
        self.index = torch.arange(len(alpha))

    def keep(self, mask: torch.Tensor, grads: list) -> list:
        """Keep the runs in `mask`; a subclass keeps its weights and returns the kept gradients."""
        for name in ("alpha", "c", "prev_loss", "time", "index"):
            setattr(self, name, getattr(self, name)[mask])
        return grads

    def record(self, j: int, lv: float, step: int, tol: float, curve: np.ndarray) -> PhaseRun:
        """The PhaseRun of active run j that stopped at `step` with loss lv; curve (step + 1, 2): loss, t."""
        return PhaseRun(
            self.rd(j), lv, step, bool(lv < tol), "complete" if math.isfinite(lv) else "diverged",
            float(self.time[j]),
            curve={"step": np.arange(step + 1), "loss": curve[:, 0].copy(), "time": curve[:, 1].copy()},
            neurons=self.neurons(j))

    def rd(self, j: int) -> dict[str, float]:
        raise NotImplementedError

    def neurons(self, j: int) -> dict[str, np.ndarray]:
        raise NotImplementedError


def interrupted_run(layers: tuple[str, ...]) -> PhaseRun:
    """The place of a run that Ctrl-C stopped before it finished."""
    return PhaseRun({layer: math.nan for layer in layers}, math.nan, 0, False, "interrupted", 0.0)


Phase3Run = PhaseRun  # the three-layer names (a run records the RD of w1, w2 and a)
Phase3Batch = PhaseBatch
