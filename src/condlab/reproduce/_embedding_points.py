"""The narrow critical point met at a plateau of `reproduce embedding`, and whether it is degenerate.

At a plateau the wide network is reduced to a narrow one (condlab.reduce); Newton steps from it
look for the nearby exact critical point θ_c of the narrow network (whatever its index: Newton,
not a minimizer). ``critical_point`` measures θ_c; ``degenerate`` and ``embedded`` judge it by
the thresholds they are given (the experiment's pre-registered ones), so that planted
measurements can be judged without training.

Why a degeneracy rule: from small initialization the first two plateaus of a tanh network are
trivial critical points - the best constant fit (every neuron silent: nothing to embed) and
the best linear fit (one neuron with w -> 0, a -> ∞, a·w fixed: a critical point at
infinity, which Newton cannot reach and whose Hessian is singular in the limit). A plateau
counts as non-degenerate only when Newton converges to a critical point with at least one
active neuron, at finite norm, whose Hessian restricted to the active neurons is non-singular.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.func import grad, jacrev

from .._embed import flat_params, loss_fn, newton_refine


def _t(values: Any) -> torch.Tensor:
    return torch.as_tensor(np.asarray(values), dtype=torch.float64)


def contributions(net) -> np.ndarray:
    """|a_j| · ‖(w_j, b_j)‖ per hidden neuron of a two-layer network: how much neuron j acts."""
    W = net.layers[0].detach().numpy()
    a = net.layers[1].detach().numpy()[:, :W.shape[0]]
    return np.abs(a).max(0) * np.linalg.norm(W, axis=1)


def active_neurons(net, share: float) -> np.ndarray:
    """Indices of neurons whose contribution is >= share x the largest (none when all are 0)."""
    c = contributions(net)
    top = float(c.max()) if c.size else 0.0
    return np.flatnonzero(c >= share * top) if top > 0 else np.array([], dtype=int)


def _active_params(net, active: np.ndarray) -> np.ndarray:
    """Positions in the flat parameter vector of the active neurons' (w, b, a) and the output bias."""
    m, cols = net.layers[0].shape
    out = net.layers[1].shape[0]
    rows = [j * cols + k for j in active for k in range(cols)]
    second = m * cols
    outs = [second + r * (m + 1) + j for r in range(out) for j in active]
    bias = [second + r * (m + 1) + m for r in range(out)] if net.layers[1].shape[1] == m + 1 else []
    return np.array(rows + outs + bias, dtype=int)


def hessian_ratio(net, x: Any, y: Any, active: np.ndarray) -> float:
    """min |eig| / max |eig| of the loss Hessian restricted to the active neurons (0: singular)."""
    if not len(active):
        return 0.0
    theta = flat_params(net)
    H = jacrev(grad(loss_fn(net, _t(x), _t(y))))(theta).numpy()
    idx = _active_params(net, active)
    eig = np.abs(np.linalg.eigvalsh(H[np.ix_(idx, idx)]))
    return float(eig.min() / eig.max()) if eig.max() > 0 else 0.0


def critical_point(narrow, x: Any, y: Any, *, steps: int, active_share: float) -> dict[str, Any]:
    """Newton from `narrow` (float64); the critical point's gradient, loss, norm, activity, Hessian."""
    refined, norms = newton_refine(narrow, x, y, steps=steps, lbfgs_iters=0)
    theta0, theta = flat_params(narrow), flat_params(refined)
    finite = bool(torch.isfinite(theta).all())
    active = active_neurons(refined, active_share) if finite else np.array([], dtype=int)
    with torch.no_grad():
        f = refined(_t(x)) if finite else None
    loss = float(((f - _t(y)) ** 2).sum() / (2 * len(x))) if finite else float("inf")
    return {"newton_grad": norms[-1], "newton_loss": loss, "active": int(len(active)),
            "norm": float(torch.linalg.norm(theta)) if finite else float("inf"),
            "moved": float(torch.linalg.norm(theta - theta0)) if finite else float("inf"),
            "hessian_ratio": hessian_ratio(refined, x, y, active) if finite else 0.0,
            "output": f.numpy()[:, 0].tolist() if finite else None}


def degenerate(point: dict[str, Any], *, tol: float, min_active: int, max_norm: float,
               min_ratio: float) -> str:
    """Why the critical point met is degenerate ("" when it is not), by the rule of the docstring."""
    if not point["newton_grad"] <= tol:
        return f"Newton did not reach a critical point (||grad R|| = {point['newton_grad']:.2g} > {tol:g})"
    if point["active"] < min_active:
        return f"{point['active']} active neuron(s) (< {min_active}): the best constant fit"
    if not point["norm"] <= max_norm:
        return f"critical point at ||θ|| = {point['norm']:.3g} > {max_norm:g}: (near) infinity"
    if not point["hessian_ratio"] >= min_ratio:
        return (f"singular Hessian on the active neurons (min/max |eig| = {point['hessian_ratio']:.2g} "
                f"< {min_ratio:g})")
    return ""


def embedded(point: dict[str, Any], plateau_loss: float, wide_output: Any, *, loss_match: float,
             output_match: float) -> str:
    """Why the plateau is not the critical point, embedded ("" when it is): loss and output gaps."""
    gap = abs(point["newton_loss"] - plateau_loss) / plateau_loss
    if not gap <= loss_match:
        return f"critical loss {point['newton_loss']:.4g} is {gap:.1%} off the plateau's {plateau_loss:.4g}"
    wide = np.asarray(wide_output, dtype=np.float64)
    dist = float(np.linalg.norm(np.asarray(point["output"]) - wide) / np.linalg.norm(wide))
    if not dist <= output_match:
        return f"critical output is {dist:.1%} (relative L2) off the wide network's (> {output_match:.0%})"
    return ""
