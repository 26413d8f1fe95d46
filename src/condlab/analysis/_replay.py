"""Leading-order replay: where the theory says neurons go, under the run's own optimizer and history.

The closed forms of Sec. 5 freeze the residual e and assume gradient flow. Two things break
that in practice (measured on the Fig. 3 setting, see docs/analysis.md):

* the residual rotates: for p = 1 the network first fits the linear part of the target, so
  sum_i e_i x_i shrinks and turns while the weights keep their history;
* Adam is not gradient flow: at small initialization its per-coordinate normalization makes
  the first steps sign descent, and coordinates whose gradient changes sign are damped.

The replay keeps the paper's leading-order model of one neuron (Assumption 2, eq. 7),

    dR/dw = a * sigma^(p)(0)/(p-1)! * (1/n) sum_i e_i(t) x_i(t) (w . x_i(t))^(p-1)
    dR/da =     sigma^(p)(0)/p!     * (1/n) sum_i e_i(t) (w . x_i(t))^p

but drives it with the residuals e(t) and layer inputs x(t) recomputed from the recorded
snapshots (held constant between snapshots), and updates an ensemble of test neurons with the
run's optimizer, learning rate and initialization scale. For a deeper layer, a stands for the
neuron's effective output weight (the factor (E^[k+1:L] a)_j of eq. 10), an approximation.
The test neurons' final orientations are grouped into lines like measured neurons.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch

from ..training import Hyper, get_optimizer


@dataclass(frozen=True)
class History:
    """Residuals and layer inputs at the recorded epochs, for one layer of one run."""

    epochs: np.ndarray   # (S,) increasing, starting at 0
    inputs: np.ndarray   # (S, n, q) layer input x^[k-1] with the appended 1
    residuals: np.ndarray  # (S, n, d_out) e_i = f(x_i) - y_i; (S, n) is read as d_out = 1


def replay_neurons(
    history: History,
    p: int,
    coefficient: float,
    *,
    optimizer: str,
    lr: float,
    init_std: float,
    until: int,
    n_neurons: int = 400,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 0.0,
    weight_decay: float = 0.0,
    momentum: float = 0.0,
    nesterov: bool = False,
    seed: int = 0,
) -> np.ndarray:
    """Run the leading-order dynamics of `n_neurons` test neurons to epoch `until`; -> W (K, q).

    Test neurons start like the network's (N(0, init_std^2) for w and a). The update is the
    trainer's own optimizer object (``condlab.training._optim``: the class `optimizer` names, on one
    flat buffer holding w and a). Adam's eps defaults to 0 here so that the replay shows the
    optimizer's scale-free behaviour (a coordinate whose gradient is exactly 0 then stays
    put instead of becoming 0/0); pass the run's eps to include its effect.
    """
    gen = torch.Generator().manual_seed(seed)
    q = history.inputs.shape[2]
    E = torch.as_tensor(history.residuals, dtype=torch.float64)
    E = E[..., None] if E.ndim == 2 else E                    # (S, n, d_out)
    k = E.shape[2]  # output weights are vectors when d_out > 1
    flat = torch.empty(n_neurons * (q + k), dtype=torch.float64)
    w, a = flat[: n_neurons * q].view(n_neurons, q), flat[n_neurons * q:].view(n_neurons, k)
    w.copy_(torch.randn(n_neurons, q, generator=gen, dtype=torch.float64) * init_std)
    a.copy_(torch.randn(n_neurons, k, generator=gen, dtype=torch.float64) * init_std)
    grad = torch.zeros_like(flat)
    grad_w, grad_a = grad[: n_neurons * q].view(n_neurons, q), grad[n_neurons * q:].view(n_neurons, k)
    scalar = functools.partial(torch.tensor, dtype=torch.float64)
    # eps = 0 exactly would turn a zero gradient into 0/0; the smallest normal number changes
    # no other step (sqrt(v) is far above it whenever v > 0)
    hyper = Hyper(lr=scalar(lr), weight_decay=scalar(weight_decay), momentum=scalar(momentum),
                  beta1=betas[0], beta2=betas[1], eps=max(eps, torch.finfo(torch.float64).tiny),
                  nesterov=nesterov)
    opt = get_optimizer(optimizer)(flat, hyper)
    X = torch.as_tensor(history.inputs, dtype=torch.float64)
    c_w = coefficient / math.factorial(p - 1)
    c_a = coefficient / math.factorial(p)
    slot = 0
    for t in range(until):
        while slot + 1 < len(history.epochs) and history.epochs[slot + 1] <= t:
            slot += 1
        x, e = X[slot], E[slot]
        proj = w @ x.T                                        # (K, n)
        weighted = (a @ e.T) * proj.pow(p - 1) / x.shape[0]   # (K, n): a . e_i, vector outputs
        grad_w.copy_(c_w * (weighted @ x))
        grad_a.copy_(c_a * (proj.pow(p) @ e) / x.shape[0])   # (K, d_out)
        opt.step(grad)
        if not bool(torch.isfinite(w).all()):
            break  # diverged: the caller reports it; more steps only spread inf/nan
    return w.numpy().copy()
