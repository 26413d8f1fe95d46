"""Train the phase diagram's networks to convergence: full-batch GD with a stable step, any depth.

One loop for both depths (descend): each step takes eta = c / bound, where the network's bound is
at least the top eigenvalue of the loss's Hessian (gradient descent is stable while
eta < 2 / lambda_max), and halves c (per run) whenever the loss rises. At small initialization this
step is orders of magnitude larger than a fixed learning rate would dare, which is why runs converge
in hundreds to thousands of steps at every width. A run leaves its batch when it converges, so a
batch costs what its slowest run costs only on that run's share of the work. The weight changes are
accumulated in their own buffers (dw += -eta g) next to the weights: RD reaches 1e-15 at large
gamma', below the rounding of w - w0. Everything in float64.

The networks, their gradients and bounds: _net2.TwoLayer (any activation), _net3.ThreeLayer (ReLU).
This loop is the reference. A fast path registered for the exact network class may take it over
(condlab._accel, "phase step": for two-layer ReLU, the diagram's default, a compiled one-pass step
that trains the runs of a batch in a thread pool; tests/test_accel_parity.py holds it equal to
this loop); CONDLAB_REFERENCE=1 switches it off.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from .._accel import find
from ._net2 import TwoLayer
from ._net3 import ThreeLayer
from ._param import Scales, Scales3
from ._runs import PhaseBatch, PhaseRun, Runs, interrupted_run

AUTHORS_X = (-0.5, 0.0, 0.5)   # the authors' 3 training points (phasediagram_twolayerNN)
AUTHORS_Y = (-0.5, 0.0, 1.0)


def converge(
    net: type[Runs],
    m: int,
    scales: list[Any],
    seeds: list[int],
    *,
    x: tuple[float, ...] = AUTHORS_X,
    y: tuple[float, ...] = AUTHORS_Y,
    activation: str = "relu",
    asi: bool = True,
    tol: float = 1e-6,
    max_steps: int = 20_000,
    c: float = 1.0,
    progress=None,
) -> PhaseBatch:
    """Train R runs of the network `net` at width m (R = len(scales), one seed each) until R < tol or
    `max_steps`; one PhaseRun each. x, y: the 1-D training set (n points); asi: the antisymmetric
    initialization (two copies, output weights negated, so f = 0 at the start)."""
    start = time.perf_counter()
    xt, yt, alpha = _inputs(x, y, scales, seeds)
    st = net.start(m, scales, seeds, asi=asi, alpha=alpha, c=c, activation=activation)
    fast = find("phase step", type(st), st, len(x))  # its train() does what descend() does
    results, interrupted = (descend if fast is None else fast.train)(st, xt, yt, tol, max_steps, progress)
    runs = [r if r is not None else interrupted_run(net.LAYERS) for r in results]
    return PhaseBatch(runs, time.perf_counter() - start, interrupted)


def train_to_convergence(m: int, scales: list[Scales], seeds: list[int], **settings: Any) -> PhaseBatch:
    """Two-layer runs to convergence (converge's settings): RD(theta_w) (weight and bias), RD(theta_a)."""
    return converge(TwoLayer, m, scales, seeds, **settings)


def train3_to_convergence(m: int, scales: list[Scales3], seeds: list[int], **settings: Any) -> PhaseBatch:
    """Three-layer ReLU runs to convergence (converge's settings): the RD of W1 (with bias), W2, a."""
    return converge(ThreeLayer, m, scales, seeds, **settings)


def _inputs(x, y, scales, seeds) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x~ = (x, 1) (n, 2), y (n,) and each run's alpha (R,)."""
    if len(scales) != len(seeds):
        raise ValueError(f"{len(scales)} scales for {len(seeds)} seeds: give one of each per run")
    xt = torch.tensor([[v, 1.0] for v in x], dtype=torch.float64)
    yt = torch.tensor(y, dtype=torch.float64)
    return xt, yt, torch.tensor([s.alpha for s in scales], dtype=torch.float64)


def descend(st: Runs, xt: torch.Tensor, yt: torch.Tensor, tol: float, max_steps: int,
            progress) -> tuple[list[PhaseRun | None], bool]:
    """Gradient descent on every run of `st` until its loss < tol, it diverges or `max_steps`:
    each run's PhaseRun in input order (None where Ctrl-C stopped it), and whether Ctrl-C did."""
    results: list[PhaseRun | None] = [None] * len(st.index)
    hist = torch.full((max_steps + 1, len(st.index), 2), float("nan"), dtype=torch.float64)
    try:
        for step in range(max_steps + 1):
            loss, grads, bound = st.loss_grad_bound(xt, yt)
            hist[step, st.index, 0] = loss
            hist[step, st.index, 1] = st.time
            done = (loss < tol) | ~torch.isfinite(loss) | (step == max_steps)
            if done.any():
                for j in torch.nonzero(done).flatten().tolist():
                    r = int(st.index[j])
                    results[r] = st.record(j, float(loss[j]), step, tol, hist[: step + 1, r].numpy())
                if bool(done.all()):
                    break
                loss, bound = loss[~done], bound[~done]
                grads = st.keep(~done, grads)
            st.c = torch.where(loss > st.prev_loss, st.c * 0.5, st.c)  # the loss rose: halve c
            st.prev_loss = loss
            st.step(st.c / bound, grads)
            if progress is not None:
                progress.update(1)
    except KeyboardInterrupt:
        return results, True
    return results, False

