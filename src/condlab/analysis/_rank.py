"""Model rank: the numerical rank of DF(θ), the Jacobian of the outputs on inputs x w.r.t. θ.

The talk (Zhang, "The condensation phenomenon of deep neural networks") defines the model
rank ``r_θ = rank DF(θ) = dim span{∂_θi F(θ)(·)}``, the effective degrees of freedom at θ.
On a finite input set x (n points) condlab evaluates the (n·d_out, P) matrix
``J[i, k] = ∂ f(x_i) / ∂ θ_k`` with ``torch.func.jacrev`` (any ``nn.Module``) in float64
and counts its singular values above a tolerance.

Tolerance rules (``rtol``), all relative to the largest singular value σ_max:

* ``rtol=None`` (default): ``tol = σ_max · max(n·d_out, P) · eps(dtype)``, the rule of
  ``numpy.linalg.matrix_rank`` (float64: eps = 2.2e-16); the rank of exact arithmetic up
  to round-off, so exactly condensed neurons count once.
* ``rtol=r``: ``tol = r · σ_max``, for ranks "up to a stated accuracy" (e.g. 1e-8, 1e-4);
  ``ModelRank.rank_at(r)`` re-counts from the kept spectrum without recomputing J.

The spectrum is kept (``singular_values``) so any other rule can be applied later. A rank
is never larger than min(n·d_out, P): on too few inputs it measures the data, not the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, jacrev


@dataclass(frozen=True)
class ModelRank:
    """Numerical rank of DF(θ) on a set of inputs, with its singular-value spectrum."""

    rank: int
    singular_values: np.ndarray          # (min(n·d_out, P),), descending
    tol: float
    rule: str
    n_params: int
    n_outputs: int                       # n · d_out rows of J

    def rank_at(self, rtol: float) -> int:
        """Rank under the rule ``σ > rtol · σ_max`` (from the kept spectrum)."""
        s = self.singular_values
        return int((s > rtol * s[0]).sum()) if s.size and s[0] > 0 else 0

    def to_dict(self, rtols: tuple[float, ...] = (1e-8, 1e-4)) -> dict[str, Any]:
        return {"rank": self.rank, "rule": self.rule, "tol": self.tol, "n_params": self.n_params,
                "n_outputs": self.n_outputs,
                "rank_at": {f"{r:g}": self.rank_at(r) for r in rtols},
                "singular_values": [float(v) for v in self.singular_values]}


def _as_module(net_or_run: Any, epoch: int | None, dtype: torch.dtype) -> nn.Module:
    """An nn.Module from a module, or from a Run at `epoch` (default: its last snapshot)."""
    if isinstance(net_or_run, nn.Module):
        return net_or_run
    if hasattr(net_or_run, "network") and hasattr(net_or_run, "epochs"):
        chosen = int(net_or_run.epochs[-1]) if epoch is None else int(epoch)
        return net_or_run.network(chosen, dtype=dtype)
    raise TypeError(f"model_rank needs an nn.Module or a condlab Run, not {type(net_or_run).__name__}")


def jacobian(net: nn.Module, x: Any, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """DF(θ) on inputs x: (n·d_out, P), parameters in ``named_parameters`` order, flattened."""
    params = {k: v.detach().to(dtype) for k, v in net.named_parameters()}
    xt = torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x).to(dtype)

    def outputs(p: dict[str, torch.Tensor]) -> torch.Tensor:
        return functional_call(net, p, (xt,)).reshape(-1)

    jac = jacrev(outputs)(params)
    return torch.cat([j.reshape(j.shape[0], -1) for j in jac.values()], dim=1)


def rank_from_singular_values(s: np.ndarray, shape: tuple[int, int], eps: float,
                              rtol: float | None = None) -> tuple[int, float, str]:
    """(rank, tol, rule text) for a descending spectrum `s` of a matrix of `shape`."""
    top = float(s[0]) if s.size else 0.0
    if rtol is None:
        tol, rule = top * max(shape) * eps, f"sigma > sigma_max * max(shape) * eps ({eps:.3g})"
    else:
        tol, rule = top * rtol, f"sigma > {rtol:g} * sigma_max"
    return int((s > tol).sum()) if top > 0 else 0, tol, rule


def model_rank(net_or_run: Any, x: Any = None, *, epoch: int | None = None, rtol: float | None = None,
               dtype: torch.dtype = torch.float64) -> ModelRank:
    """Numerical rank of DF(θ) (the talk's model rank r_θ) on inputs x (n, d).

    `net_or_run`: any ``nn.Module`` mapping (n, d) -> (n, d_out), or a condlab ``Run`` (then
    `epoch` picks the snapshot, default the last, and x defaults to its training inputs).
    Tolerance: see the module docstring (default: numpy's matrix_rank rule in float64).
    """
    if x is None:
        if not hasattr(net_or_run, "x"):
            raise ValueError("model_rank needs inputs x for a plain nn.Module")
        x = net_or_run.x
    net = _as_module(net_or_run, epoch, dtype)
    J = jacobian(net, x, dtype)
    s = torch.linalg.svdvals(J).numpy()
    rank, tol, rule = rank_from_singular_values(s, tuple(J.shape), torch.finfo(dtype).eps, rtol)
    return ModelRank(rank, s, tol, rule, J.shape[1], J.shape[0])


@dataclass(frozen=True)
class RankTrace:
    """Model rank and condensation counts at every snapshot of a run (one layer counted)."""

    epochs: np.ndarray                                   # (S,)
    rank: np.ndarray                                     # (S,) default rule
    rank_at: dict[float, np.ndarray] = field(default_factory=dict)   # rtol -> (S,)
    lines: np.ndarray | None = None                      # (S,) condensed lines of layer1
    directions: np.ndarray | None = None                 # (S,)
    n_params: int = 0
    loss: np.ndarray | None = None                       # (S,)

    def to_dict(self) -> dict[str, Any]:
        return {"epochs": self.epochs.tolist(), "rank": self.rank.tolist(),
                "rank_at": {f"{k:g}": v.tolist() for k, v in self.rank_at.items()},
                "lines": None if self.lines is None else self.lines.tolist(),
                "directions": None if self.directions is None else self.directions.tolist(),
                "n_params": self.n_params,
                "loss": None if self.loss is None else self.loss.tolist()}


def rank_over_snapshots(run: Any, x: Any = None, *, epochs: list[int] | None = None,
                        rtols: tuple[float, ...] = (1e-8, 1e-4), count: bool = True) -> RankTrace:
    """Model rank (default rule and each rtol) and layer-1 line count at every recorded epoch."""
    from ._orientations import count_orientations

    chosen = [int(e) for e in (run.epochs if epochs is None else epochs)]
    ranks, at, lines, dirs = [], {r: [] for r in rtols}, [], []
    n_params = 0
    for e in chosen:
        mr = model_rank(run, x, epoch=e)
        n_params = mr.n_params
        ranks.append(mr.rank)
        for r in rtols:
            at[r].append(mr.rank_at(r))
        if count:
            o = count_orientations(run.layer("layer1", e))
            lines.append(o.n_lines)
            dirs.append(o.n_directions)
    return RankTrace(np.array(chosen), np.array(ranks), {r: np.array(v) for r, v in at.items()},
                     np.array(lines) if count else None, np.array(dirs) if count else None,
                     n_params, np.asarray(run.loss)[chosen])
