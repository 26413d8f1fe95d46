"""The embedding principle: one-step splitting embedding of a narrow network into a wider one.

The talk (after Zhang, Zhang, Luo, Xu, "Embedding Principle of Loss Landscape of Deep Neural
Networks", NeurIPS 2021) states: the one-step splitting embedding T, θ_wide = T(θ_narr),
(i) preserves the output, f_θnarr = f_θwide, and (ii) preserves criticality,
∇R_S(θ_narr) = 0 ⇒ ∇R_S(θ_wide) = 0. T splits neuron j of hidden layer l into two: both
copies keep j's input weight (row j of W^[l], bias included); j's output weight (column j of
W^[l+1]) is split into α·col_j for the original and (1 − α)·col_j for the copy, which is
appended as the last neuron of the layer.

Why criticality survives: the copies compute the same activation, so ∂R/∂(row) of each
copy is its share (α or 1 − α) of the original row gradient, and ∂R/∂(column) of each copy
equals the original column gradient; every other gradient is unchanged.

``newton_refine`` brings a trained network to a critical point up to round-off (float64),
which is what (ii) needs to be tested on.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch
from torch.func import functional_call, grad, jacrev

from .training import FCNet


def split(net: FCNet, neuron: int, alpha: float, layer: int = 0) -> FCNet:
    """One-step splitting embedding: width of hidden layer `layer` (0-based) grows by one.

    The copy of `neuron` is appended last; output weights become α·a_j (original) and
    (1 − α)·a_j (copy). Works for two-layer and deep fc networks; residual layers are refused
    (their skip connection fixes the width). Any α (also outside [0, 1]) embeds.
    """
    arch = net.arch
    if not 0 <= layer < arch.depth:
        raise ValueError(f"layer {layer + 1} does not exist: this network has layers 1..{arch.depth}")
    if arch.skip(layer) or (layer + 1 < arch.depth and arch.skip(layer + 1)):
        raise ValueError("split: residual layers keep their width (skip connections); use arch=fc")
    weights = [w.detach().clone() for w in net.layers]
    W, nxt = weights[layer], weights[layer + 1]
    m = W.shape[0]
    if not 0 <= neuron < m:
        raise ValueError(f"neuron {neuron} does not exist: layer {layer + 1} has neurons 0..{m - 1}")
    weights[layer] = torch.cat([W, W[neuron:neuron + 1]], dim=0)
    col = nxt[:, neuron:neuron + 1]
    cols = nxt[:, :m].clone()
    cols[:, neuron:neuron + 1] = alpha * col
    parts = [cols, (1 - alpha) * col] + ([nxt[:, m:]] if nxt.shape[1] > m else [])
    weights[layer + 1] = torch.cat(parts, dim=1)
    new_arch = dataclasses.replace(arch, width=m + 1) if arch.depth == 1 else arch
    return FCNet(new_arch, weights)


def loss_fn(net: FCNet, x: torch.Tensor, y: torch.Tensor):
    """R_S(θ) = 1/(2n) Σ |f(x_i) − y_i|² as a function of the flat parameter vector θ (P,)."""
    names = [k for k, _ in net.named_parameters()]
    shapes = [p.shape for _, p in net.named_parameters()]
    sizes = [int(np.prod(s)) for s in shapes]

    def loss(theta: torch.Tensor) -> torch.Tensor:
        chunks = torch.split(theta, sizes)
        params = {k: c.reshape(s) for k, c, s in zip(names, chunks, shapes, strict=True)}
        f = functional_call(net, params, (x,))
        return ((f - y) ** 2).sum() / (2 * x.shape[0])

    return loss


def flat_params(net: FCNet) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()]).to(torch.float64)


def with_params(net: FCNet, theta: torch.Tensor) -> FCNet:
    """A copy of `net` with the flat parameters θ (layer shapes kept)."""
    chunks, out, i = [], theta.detach(), 0
    for p in net.parameters():
        chunks.append(out[i:i + p.numel()].reshape(p.shape))
        i += p.numel()
    return FCNet(net.arch, chunks)


def gradient_norm(net: FCNet, x: Any, y: Any) -> float:
    """‖∇R_S(θ)‖₂ in float64 on data (x, y)."""
    xt, yt = (torch.as_tensor(np.asarray(v), dtype=torch.float64) for v in (x, y))
    net64 = with_params(net, flat_params(net))
    return float(torch.linalg.norm(grad(loss_fn(net64, xt, yt))(flat_params(net64))))


def _lbfgs(loss, theta: torch.Tensor, iters: int) -> torch.Tensor:
    """L-BFGS with a strong-Wolfe line search: gets a converged run close to its critical point."""
    theta = theta.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([theta], lr=1, max_iter=iters, history_size=50, tolerance_grad=1e-15,
                            tolerance_change=0, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        value = loss(theta)
        value.backward()
        return value

    opt.step(closure)
    return theta.detach()


def newton_refine(net: FCNet, x: Any, y: Any, *, steps: int = 40, lbfgs_iters: int = 500,
                  tol: float = 1e-15) -> tuple[FCNet, list[float]]:
    """L-BFGS, then Newton steps θ ← θ − t·H⁺∇R with backtracking on ‖∇R‖, all in float64.

    H⁺ is the pseudo-inverse (condensed networks have flat directions). A step is halved until
    the gradient norm falls, so the iteration converges to a nearby critical point (a minimum
    or a saddle) to round-off. Returns the refined network and ‖∇R‖ after each Newton step.
    """
    xt, yt = (torch.as_tensor(np.asarray(v), dtype=torch.float64) for v in (x, y))
    net64 = with_params(net, flat_params(net))
    loss = loss_fn(net64, xt, yt)
    theta = _lbfgs(loss, flat_params(net64), lbfgs_iters) if lbfgs_iters else flat_params(net64)
    g = grad(loss)(theta)
    norms = [float(torch.linalg.norm(g))]
    for _ in range(steps):
        if norms[-1] < tol:
            break
        # reverse-over-reverse Hessian: forward mode (torch.func.hessian) loads deprecated jit code
        step = torch.linalg.pinv(jacrev(grad(loss))(theta), rtol=1e-13, hermitian=True) @ g
        for t in 0.5 ** np.arange(30):
            trial = theta - float(t) * step
            g_trial = grad(loss)(trial)
            if float(torch.linalg.norm(g_trial)) < norms[-1]:
                break
        else:
            break  # no step lowers the gradient: round-off reached
        theta, g = trial, g_trial
        norms.append(float(torch.linalg.norm(g)))
    return with_params(net64, theta), norms
