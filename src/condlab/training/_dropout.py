"""Dropout on hidden layers for a batch of runs: nn.Dropout's training-mode semantics, per run.

Each hidden unit's output is zeroed with probability q (the run's ``model.dropout``) and the
kept ones are scaled by 1/(1-q), as ``torch.nn.Dropout`` does in training mode. The mask is
applied to the activation's output sigma(z), before a residual connection adds the layer's
input (``condlab.training._arch``), and is drawn afresh at every training step. Dropout is used only
for the gradient: the recorded loss, the snapshots and every analysis use the network
without dropout (evaluation mode).

Masks are reproducible and independent of the other runs of the batch: run r draws them from
its own generator, ``torch.Generator(device).manual_seed(dropout_seed(seed_r))`` with
``dropout_seed(seed) = seed + 2**32`` (so they do not replay the stream that drew the
initial weights). At every step, for each hidden layer in order, a run with q > 0 draws
``u = torch.rand((n, m), generator=g_r, dtype=dtype)`` and keeps the units where u >= q.
Runs with q = 0 draw nothing. The masks depend on the dtype and device (their random streams).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

SEED_OFFSET = 2**32


def dropout_seed(seed: int) -> int:
    """Seed of a run's dropout generator (documented above)."""
    return int(seed) + SEED_OFFSET


class Dropout:
    """Per-run dropout masks for R runs: q (R,), one generator per run, mask workspaces."""

    def __init__(self, q: Sequence[float], seeds: Sequence[int], dtype: torch.dtype, device: torch.device):
        self.q = [float(v) for v in q]
        self.active = [r for r, v in enumerate(self.q) if v > 0]
        self.generators = [torch.Generator(device).manual_seed(dropout_seed(s)) for s in seeds]
        self._q = torch.tensor(self.q, dtype=dtype, device=device)[:, None, None]
        self._scale = 1 / (1 - self._q)
        self._work: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}

    @staticmethod
    def of(q: Sequence[float], seeds: Sequence[int], dtype: torch.dtype,
           device: torch.device) -> Dropout | None:
        """A Dropout, or None when no run drops anything (then training skips it entirely)."""
        return Dropout(q, seeds, dtype, device) if any(v > 0 for v in q) else None

    def masks(self, layer: int, like: torch.Tensor) -> torch.Tensor:
        """Draw the next masks of hidden layer `layer` for every run: (R, n, m) of 0 and 1/(1-q)."""
        key = (layer, tuple(like.shape), like.dtype, like.device)
        if key not in self._work:   # uniforms start at 1: runs with q = 0 keep every unit
            self._work[key] = (torch.ones_like(like), torch.empty_like(like))
        uniform, mask = self._work[key]
        for r in self.active:
            uniform[r].uniform_(0, 1, generator=self.generators[r])
        return torch.ge(uniform, self._q, out=mask).mul_(self._scale)

    def apply(self, layer: int, h: torch.Tensor, slope: torch.Tensor) -> None:
        """Mask a hidden layer's output h and its slope sigma'(z) in place (both (R, n, m))."""
        mask = self.masks(layer, h)
        h.mul_(mask)
        slope.mul_(mask)

    def state_dict(self) -> list[torch.Tensor]:
        """The generators' states (for checkpoints)."""
        return [g.get_state() for g in self.generators]

    def load_state_dict(self, states: Sequence[torch.Tensor]) -> None:
        for g, state in zip(self.generators, states, strict=True):
            g.set_state(state)
