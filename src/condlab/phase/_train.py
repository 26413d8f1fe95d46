"""Train two-layer networks of the phase diagram to convergence: full-batch GD with a stable step.

Network (JMLR 2021): f(x) = (1/alpha) sum_k a_k sigma(w_k . x~), x~ = (x, 1), so w_k = (weight, bias).
Loss R = (1/2n) sum_i (f(x_i) - y_i)^2. Everything in float64.

Step size. Gradient descent is stable while eta < 2 / lambda_max(Hessian). The Hessian is the
Gauss-Newton part (1/n) J^T J plus the residual part (1/n) sum_i e_i Hess f_i. The top eigenvalue of
the first equals that of the n x n Gram matrix G = (1/n) J J^T (exact, cheap: n is tiny); the second
is block-diagonal over neurons, so its norm is at most the largest block norm, bounded per neuron by
||v_k|| + |a_k| ||C_k|| (v_k = (1/n alpha) sum_i e_i sigma'(z_ki) x~_i; C_k the sigma'' term, zero for
ReLU). We take eta = c / (lambda_max(G) + max_k block bound) and halve c (per run) whenever the
loss rises. At small initialization this step is orders of magnitude larger than a fixed learning
rate would dare, which is why runs converge in hundreds to thousands of steps at every width.

The weight change is accumulated in its own buffer (dw += -eta g) next to the weights: RD(theta_w)
reaches 1e-15 at large gamma', below the rounding of w - w0.

Two implementations of the same step: for ReLU (the diagram's default) a compiled one-pass step
(_relu_fused, numba; 4-5x fewer seconds per run-step at m = 10^5), runs of a batch in a thread pool;
for other activations, or without numba, the batched torch loop over _loss_grad_bound below, which
is also the reference the compiled step is tested against (tests/test_phase_fused.py).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import numpy as np
import torch

from ..activations import autograd_grad, get_activation
from ._param import Scales

AUTHORS_X = (-0.5, 0.0, 0.5)   # the authors' 3 training points (phasediagram_twolayerNN)
AUTHORS_Y = (-0.5, 0.0, 1.0)
MAX_NEURONS_SAVED = 10_000     # final (theta, A) of at most this many neurons per run are kept


@dataclass
class PhaseRun:
    """The outcome of one training run (RD over the first copy's neurons when ASI is on)."""

    rd_w: float                 # ||w(T) - w(0)|| / ||w(0)||, w = (weight, bias) of every neuron
    rd_a: float                 # ||a(T) - a(0)|| / ||a(0)||
    loss: float                 # R at the last step
    steps: int                  # GD steps taken
    converged: bool             # loss < tol (False: stopped at the step budget, or diverged)
    status: str                 # "complete" or "diverged" (non-finite loss)
    time: float                 # gradient-flow time reached: the sum of the step sizes
    curve: dict[str, np.ndarray] = field(default_factory=dict)    # step, time, loss per step
    neurons: dict[str, np.ndarray] = field(default_factory=dict)  # final a, w, b of saved neurons


@dataclass
class PhaseBatch:
    """All runs of one call, in input order; `interrupted` when Ctrl-C ended it (nothing usable)."""

    runs: list[PhaseRun]
    seconds: float
    interrupted: bool = False


def _activation(name: str):
    """sigma, sigma', sigma'' (None for ReLU, whose sigma'' vanishes almost everywhere)."""
    if name == "relu":
        return torch.relu, lambda z: (z > 0).to(z.dtype), None
    act = get_activation(name)
    return act.fn, act.grad, autograd_grad(act.grad)


def init_params(m: int, scales: list[Scales], seeds: list[int],
                asi: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """a (R, M), w (R, M, 2) with M = 2m under ASI (copy 2: the same w, output weights negated).

    Run r draws standard normals from torch.Generator seeded `seeds[r]` and scales them by its
    beta1 (a) and beta2 (w): one seed gives the same neurons up to scale at every grid point.
    """
    a_list, w_list = [], []
    for s, seed in zip(scales, seeds, strict=True):
        gen = torch.Generator().manual_seed(int(seed))
        a = torch.randn(m, generator=gen, dtype=torch.float64) * s.beta1
        w = torch.randn(m, 2, generator=gen, dtype=torch.float64) * s.beta2
        if asi:
            a, w = torch.cat([a, -a]), torch.cat([w, w])
        a_list.append(a)
        w_list.append(w)
    return torch.stack(a_list), torch.stack(w_list)


def train_to_convergence(
    m: int,
    scales: list[Scales],
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
    """Train R runs of width m (R = len(scales)) until R < tol or `max_steps`; returns one PhaseRun each.

    x, y: the 1-D training set (n points). Runs that converge leave the batch (it shrinks), so a
    batch costs what its slowest run costs only on that run's share of the work.
    """
    import time

    start = time.perf_counter()
    if len(scales) != len(seeds):
        raise ValueError(f"{len(scales)} scales for {len(seeds)} seeds: give one of each per run")
    xt = torch.tensor([[v, 1.0] for v in x], dtype=torch.float64)           # (n, 2)
    yt = torch.tensor(y, dtype=torch.float64)                                # (n,)
    sig, dsig, d2sig = _activation(activation)
    a, w = init_params(m, scales, seeds, asi)
    alpha = torch.tensor([s.alpha for s in scales], dtype=torch.float64)
    st = _State(a, w.transpose(1, 2).contiguous(), alpha, c)
    if activation == "relu" and _fused() is not None and len(x) <= _fused().MAX_POINTS:
        results, interrupted = _train_fused(st, xt, yt, m, tol, max_steps, progress)
        runs = [r if r is not None else _empty() for r in results]
        return PhaseBatch(runs, time.perf_counter() - start, interrupted)
    results: list[PhaseRun | None] = [None] * len(scales)
    hist = torch.full((max_steps + 1, len(scales), 2), float("nan"), dtype=torch.float64)
    interrupted = False
    try:
        for step in range(max_steps + 1):
            loss, grads, bound = _loss_grad_bound(st, xt, yt, sig, dsig, d2sig)
            hist[step, st.index, 0] = loss
            hist[step, st.index, 1] = st.time
            done = (loss < tol) | ~torch.isfinite(loss) | (step == max_steps)
            if done.any():
                _finish(st, done, loss, step, m, tol, hist, results)
                if bool(done.all()):
                    break
                loss, grads, bound = loss[~done], [g[~done] for g in grads], bound[~done]
                st.keep(~done)
            st.c = torch.where(loss > st.prev_loss, st.c * 0.5, st.c)  # the loss rose: halve c
            st.prev_loss = loss
            st.step(st.c / bound, grads)
            if progress is not None:
                progress.update(1)
    except KeyboardInterrupt:
        interrupted = True
    runs = [r if r is not None else _empty() for r in results]
    return PhaseBatch(runs, time.perf_counter() - start, interrupted)


class _State:
    """The runs still training: a (R, M), w (R, 2, M) (rows: weight, bias; neurons contiguous, as the
    hot loop reads them), accumulated changes, initial values, step factors."""

    def __init__(self, a: torch.Tensor, w: torch.Tensor, alpha: torch.Tensor, c: float):
        self.a, self.w = a, w
        self.da, self.dw = torch.zeros_like(a), torch.zeros_like(w)
        self.a0, self.w0 = a.clone(), w.clone()
        self.alpha = alpha
        self.c = torch.full_like(alpha, c)
        self.prev_loss = torch.full_like(alpha, math.inf)
        self.time = torch.zeros_like(alpha)
        self.index = torch.arange(a.shape[0])

    def keep(self, mask: torch.Tensor) -> None:
        for name in ("a", "w", "da", "dw", "a0", "w0", "alpha", "c", "prev_loss", "time", "index"):
            setattr(self, name, getattr(self, name)[mask])

    def step(self, eta: torch.Tensor, grads: list[torch.Tensor]) -> None:
        ga, gw = grads
        ea, ew = -eta[:, None], -eta[:, None, None]   # gw: (R, 2, M) like w; fused multiply-adds
        self.a.addcmul_(ga, ea)
        self.da.addcmul_(ga, ea)
        self.w.addcmul_(gw, ew)
        self.dw.addcmul_(gw, ew)
        self.time += eta


def _loss_grad_bound(st: _State, xt, yt, sig, dsig, d2sig):
    """Loss (R,), gradients [(R, M), (R, 2, M)] and the Hessian bound (R,) of the current weights.

    Layout (R, n, M): every pass over the big arrays runs along contiguous neurons.
    """
    n = xt.shape[0]
    z = torch.addcmul(st.w[:, 1:2, :], xt[:, 0][None, :, None], st.w[:, 0:1, :])   # (R, n, M)
    s, sp = sig(z), dsig(z)
    alpha = st.alpha[:, None]
    f = torch.bmm(s, st.a[:, :, None])[..., 0] / alpha            # (R, n)
    e = f - yt
    loss = 0.5 * (e * e).mean(dim=1)
    scale = 1.0 / (n * alpha)                                      # (R, 1)
    es = e * scale                                                 # scale folded into the small factor
    ga = torch.bmm(es[:, None, :], s)[:, 0]                        # (R, M)
    ex = torch.stack([es * xt[:, 0], es], dim=1)                   # (R, 2, n): e_i x~_i / (n alpha)
    v = torch.bmm(ex, sp)                                          # (R, 2, M): residual block vectors
    gw = v * st.a[:, None, :]
    spa = sp * st.a[:, None, :]
    gram = (torch.bmm(s, s.transpose(1, 2)) + torch.bmm(spa, spa.transpose(1, 2)) * (xt @ xt.T)) \
        * (scale / alpha)[..., None]                               # (R, n, n) = (1/n) J J^T
    block = torch.hypot(v[:, 0], v[:, 1])                          # (R, M)
    if d2sig is not None:
        curv = torch.bmm(((xt * xt).sum(1) * 1.0).expand(len(e), n)[:, None, :] * e.abs()[:, None, :],
                         d2sig(z).abs())[:, 0]                     # (R, M): sum_i |e_i s''_ki| |x~_i|^2
        block = block + st.a.abs() * curv * scale
    bound = torch.linalg.eigvalsh(gram)[:, -1] + block.amax(dim=1)
    return loss, [ga, gw], bound.clamp_min(1e-300)


def _finish(st: _State, done, loss, step: int, m: int, tol: float, hist, results) -> None:
    """Record the runs in `done` (a mask over the active runs)."""
    for j in torch.nonzero(done).flatten().tolist():
        r = int(st.index[j])
        results[r] = _record(st, j, float(loss[j]), step, m, tol, hist[: step + 1, r].numpy())


def _record(st: _State, j: int, lv: float, step: int, m: int, tol: float, curve: np.ndarray) -> PhaseRun:
    """The PhaseRun of active run j that stopped at `step` with loss lv; curve (step + 1, 2): loss, t."""
    first = slice(0, m)  # the first copy's neurons (all of them without ASI)
    rd_w = float(st.dw[j, :, first].norm() / st.w0[j, :, first].norm())
    rd_a = float(st.da[j, first].norm() / st.a0[j, first].norm())
    keep = min(m, MAX_NEURONS_SAVED)
    return PhaseRun(
        rd_w, rd_a, lv, step, bool(lv < tol), "complete" if math.isfinite(lv) else "diverged",
        float(st.time[j]),
        curve={"step": np.arange(step + 1), "loss": curve[:, 0].copy(), "time": curve[:, 1].copy()},
        neurons={"a": st.a[j, :keep].numpy().copy(), "w": st.w[j, 0, :keep].numpy().copy(),
                 "b": st.w[j, 1, :keep].numpy().copy()},
    )


def _fused():
    """The compiled ReLU step (condlab._accel._relu_fused), or None where numba is missing."""
    try:
        from .._accel import _relu_fused
    except ImportError:
        return None
    return _relu_fused


def _train_fused(st: _State, xt, yt, m: int, tol: float, max_steps: int, progress):
    """train_to_convergence's loop for ReLU through the compiled one-pass step: each run on its own
    (they are independent) in a pool of torch.get_num_threads() threads; same result as the loop
    over _loss_grad_bound up to rounding (tests/test_phase_fused.py)."""
    from concurrent.futures import ThreadPoolExecutor, wait

    fz = _fused()
    x, y = xt[:, 0].numpy().copy(), yt.numpy().copy()
    n_runs, width = st.a.shape
    advance = fz.kernels(len(x))[0]  # generated here; numba compiles it at its first call
    results: list[PhaseRun | None] = [None] * n_runs
    steps = [0] * n_runs
    stop = threading.Event()
    chunk = max(1, 20_000_000 // (width * len(x)))  # about 0.05-0.2 s between checks for Ctrl-C

    def one(j: int) -> None:
        weights = [st.a[j].numpy(), st.w[j, 0].numpy(), st.w[j, 1].numpy(),
                   st.da[j].numpy(), st.dw[j, 0].numpy(), st.dw[j, 1].numpy()]
        hist = np.full((max_steps + 1, 2), np.nan)  # per run: a batch of small widths has many runs
        sums = fz.new_sums(len(x))
        fz.forward(weights, x, sums)
        state = np.array([float(st.c[j]), math.inf, 0.0])
        step, done = 0, False
        while not done and not stop.is_set():
            step, done = advance(*weights, x, y, float(st.alpha[j]), state, *sums, hist, step,
                                 max_steps, tol, chunk)
            steps[j] = step
        if done:
            st.time[j] = state[fz.TIME]
            results[j] = _record(st, j, float(hist[step, 0]), step, m, tol, hist[: step + 1])

    interrupted = False
    with ThreadPoolExecutor(max(1, min(n_runs, torch.get_num_threads()))) as pool:
        futures = [pool.submit(one, j) for j in range(n_runs)]
        shown = 0
        try:
            while wait(futures, timeout=0.2)[1]:
                shown = _show(progress, max(steps), shown)
        except KeyboardInterrupt:
            stop.set()
            interrupted = True
        wait(futures)
    _show(progress, max(steps), shown)
    for fut in futures:
        fut.result()  # re-raise a worker's error
    return results, interrupted


def _show(progress, now: int, shown: int) -> int:
    """Progress in steps of the slowest run, as the batched loop reports it."""
    if progress is not None and now > shown:
        progress.update(now - shown)
    return max(now, shown)


def _empty() -> PhaseRun:
    return PhaseRun(math.nan, math.nan, math.nan, 0, False, "interrupted", 0.0)


def orientation_amplitude(neurons: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(theta, A) of each neuron, as in the JMLR scatters: theta = the angle of (w, b) in (-pi, pi],
    A = |a| ||(w, b)|| (the neuron's output amplitude on inputs of norm 1)."""
    theta = np.arctan2(neurons["b"], neurons["w"])
    amp = np.abs(neurons["a"]) * np.hypot(neurons["w"], neurons["b"])
    return theta, amp
