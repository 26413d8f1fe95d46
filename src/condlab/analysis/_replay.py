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

import math
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class History:
    """Residuals and layer inputs at the recorded epochs, for one layer of one run."""

    epochs: np.ndarray   # (S,) increasing, starting at 0
    inputs: np.ndarray   # (S, n, q) layer input x^[k-1] with the appended 1
    residuals: np.ndarray  # (S, n) e_i = f(x_i) - y_i (summed over outputs when d_out > 1)


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
    seed: int = 0,
) -> np.ndarray:
    """Run the leading-order dynamics of `n_neurons` test neurons to epoch `until`; -> W (K, q).

    Test neurons start like the network's (N(0, init_std^2) for w and a). Adam's eps defaults
    to 0 here so that the replay shows the optimizer's scale-free behaviour; pass the run's eps
    to include its effect.
    """
    gen = torch.Generator().manual_seed(seed)
    q = history.inputs.shape[2]
    w = torch.randn(n_neurons, q, generator=gen, dtype=torch.float64) * init_std
    a = torch.randn(n_neurons, 1, generator=gen, dtype=torch.float64) * init_std
    X = torch.as_tensor(history.inputs, dtype=torch.float64)
    E = torch.as_tensor(history.residuals, dtype=torch.float64)
    c_w = coefficient / math.factorial(p - 1)
    c_a = coefficient / math.factorial(p)
    step = _adam(betas, eps, lr) if optimizer == "adam" else _gd(lr)
    state: dict = {}
    slot = 0
    for t in range(until):
        while slot + 1 < len(history.epochs) and history.epochs[slot + 1] <= t:
            slot += 1
        x, e = X[slot], E[slot]
        proj = w @ x.T                                        # (K, n)
        weighted = e * proj.pow(p - 1) / x.shape[0]           # (K, n)
        grad_w = c_w * a * (weighted @ x)
        grad_a = c_a * (e * proj.pow(p)).sum(1, keepdim=True) / x.shape[0]
        w, a = step(state, t + 1, (w, grad_w), (a, grad_a))
    return w.numpy()


def _gd(lr: float):
    def step(state, t, *pairs):
        return tuple(p - lr * g for p, g in pairs)
    return step


def _adam(betas: tuple[float, float], eps: float, lr: float):
    b1, b2 = betas

    def step(state, t, *pairs):
        out = []
        for k, (param, grad) in enumerate(pairs):
            m, v = state.get(k, (torch.zeros_like(param), torch.zeros_like(param)))
            m = b1 * m + (1 - b1) * grad
            v = b2 * v + (1 - b2) * grad * grad
            state[k] = (m, v)
            denom = (v / (1 - b2**t)).sqrt() + eps
            update = (m / (1 - b1**t)) / denom.clamp_min(1e-300)
            out.append(param - lr * update)
        return tuple(out)
    return step
