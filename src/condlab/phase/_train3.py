"""Train three-layer ReLU networks of the phase diagram to convergence: full-batch GD, a stable step.

Network (see _three.py): f(x) = (1/alpha) sum_k a_k relu((W2 relu(W1 x~))_k), x~ = (x, 1), both hidden
layers of width m, loss R = (1/2n) sum_i (f(x_i) - y_i)^2, float64. With the antisymmetric
initialization (ASI) the network is the sum of two copies with the same W1, W2 and negated a, so
f = 0 at the start; each copy has its own parameters (2 x (2m + m^2 + m) weights).

Step size, as in the two-layer trainer: eta = c / (lambda_max(G) + B), c halved (per run) whenever
the loss rises. G = (1/n) J J^T is the exact n x n Gram matrix of the tangent kernel (the Gauss-Newton
part of the Hessian has the same top eigenvalue); per layer

    n alpha^2 G = h2^T h2  +  (q^T q) o (h1^T h1)  +  (p^T p) o (x~ x~^T),
    q_ki = a_k relu'(z2_ki),   p_ji = relu'(z1_ji) (W2^T q)_ji,

summed over the copies. B bounds the residual part (1/n) sum_i e_i Hess f_i, which for ReLU has only
the cross-layer blocks (a, W2), (a, W1), (W2, W1); with c_i = |e_i| / (n alpha):
    (a, W2): block-diagonal over k,   <= max_k sum_i c_i relu'(z2_ki) ||h1_i||
    (a, W1):                          <= sum_i c_i ||x~_i|| ||W2||_2
    (W2, W1): block-diagonal over j,  <= max_j sum_i c_i relu'(z1_ji) ||x~_i|| ||q_i||
and B is their sum (the max over copies). ||W2||_2 <= ||W2(0)||_2 + sum_t eta_t ||grad W2||_F (the path
length, which bounds ||W2 - W2(0)||_F without a pass over W2), ||W2(0)||_2 from an SVD when m <= 256,
else 30 power iterations times 1.1 (an estimate, not a bound; c halving is the backstop). Only ReLU
is supported: other activations add sigma'' terms this bound omits.

The weight changes are accumulated in their own buffers (dW += -eta g), as in the two-layer trainer.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ._three import Scales3
from ._train import AUTHORS_X, AUTHORS_Y

EXACT_NORM_MAX_M = 256  # ||W2(0)||_2 by SVD up to this width, by power iteration above


@dataclass
class Phase3Run:
    """One training run: per layer RD = ||theta(T) - theta(0)|| / ||theta(0)|| over the first copy."""

    rd_w1: float                # first hidden layer, weight and bias
    rd_w2: float                # second hidden layer (m x m)
    rd_a: float                 # output layer
    loss: float
    steps: int
    converged: bool
    status: str                 # "complete", "diverged" or "interrupted"
    time: float                 # sum of the step sizes
    curve: dict[str, np.ndarray] = field(default_factory=dict)
    neurons: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class Phase3Batch:
    runs: list[Phase3Run]
    seconds: float
    interrupted: bool = False


def init_params3(m: int, scales: list[Scales3], seeds: list[int],
                 asi: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """W1 (B, m, 2), W2 (B, m, m), a (B, m) with B = R x copies (copy 2 under ASI: a negated).

    Run r draws W1, W2, a (in that order) as standard normals from torch.Generator seeded
    `seeds[r]`, scaled by beta1, beta2, beta3: one seed gives the same network up to scale everywhere.
    """
    w1s, w2s, as_ = [], [], []
    for s, seed in zip(scales, seeds, strict=True):
        gen = torch.Generator().manual_seed(int(seed))
        w1 = torch.randn(m, 2, generator=gen, dtype=torch.float64) * s.beta1
        w2 = torch.randn(m, m, generator=gen, dtype=torch.float64) * s.beta2
        a = torch.randn(m, generator=gen, dtype=torch.float64) * s.beta3
        copies = [(w1, w2, a), (w1, w2, -a)] if asi else [(w1, w2, a)]
        for c1, c2, c3 in copies:
            w1s.append(c1)
            w2s.append(c2)
            as_.append(c3)
    return torch.stack(w1s), torch.stack(w2s), torch.stack(as_)


def spectral_norm(w: torch.Tensor) -> torch.Tensor:
    """||W||_2 of each (m, m) matrix of w (B, m, m): exact up to EXACT_NORM_MAX_M, else estimated."""
    if w.shape[-1] <= EXACT_NORM_MAX_M:
        return torch.linalg.matrix_norm(w, ord=2)
    v = torch.ones(w.shape[0], w.shape[-1], 1, dtype=w.dtype)
    for _ in range(30):
        v = torch.bmm(w.transpose(1, 2), torch.bmm(w, v))
        v = v / v.norm(dim=1, keepdim=True).clamp_min(1e-300)
    return 1.1 * torch.bmm(w, v).norm(dim=(1, 2))


class _State3:
    """Runs still training. Per net (B = R x C): W1, W2, a, their changes, norms at the start.
    Per run (R): alpha, c, previous loss, time, index into the input order."""

    def __init__(self, w1, w2, a, alpha: torch.Tensor, c: float, copies: int):
        self.w1, self.w2, self.a = w1, w2, a
        self.dw1, self.dw2, self.da = torch.zeros_like(w1), torch.zeros_like(w2), torch.zeros_like(a)
        self.n1, self.n2, self.na = w1.norm(dim=(1, 2)), w2.norm(dim=(1, 2)), a.norm(dim=1)
        self.w2norm0 = spectral_norm(w2[::copies]).repeat_interleave(copies)  # ASI copies share W2(0)
        self.path2 = torch.zeros_like(self.n2)   # sum of eta ||grad W2||_F >= ||W2 - W2(0)||_F
        self.w1_0, self.w2_out0 = w1.clone(), w2.norm(dim=1)  # W1(0); column norms of W2(0)
        self.copies = copies
        self.alpha = alpha
        self.c = torch.full_like(alpha, c)
        self.prev_loss = torch.full_like(alpha, math.inf)
        self.time = torch.zeros_like(alpha)
        self.index = torch.arange(len(alpha))

    def keep(self, mask: torch.Tensor) -> None:
        per_net = mask.repeat_interleave(self.copies)
        for name in ("w1", "w2", "a", "dw1", "dw2", "da", "n1", "n2", "na", "w2norm0", "path2", "w1_0",
                     "w2_out0"):
            setattr(self, name, getattr(self, name)[per_net])
        for name in ("alpha", "c", "prev_loss", "time", "index"):
            setattr(self, name, getattr(self, name)[mask])

    def step(self, eta: torch.Tensor, grads: list) -> None:
        """One GD step. The W2 gradient comes as its factors (d2, h1), g2 = d2^T h1: W2 and its change
        are updated by one fused baddbmm each, never materializing the (B, m, m) gradient."""
        e = -eta.repeat_interleave(self.copies)
        g1, (d2, h1, g2norm), ga = grads
        for w, d, g, shape in ((self.w1, self.dw1, g1, (-1, 1, 1)), (self.a, self.da, ga, (-1, 1))):
            w.addcmul_(g, e.view(shape))
            d.addcmul_(g, e.view(shape))
        step2 = (d2 * e.view(-1, 1, 1)).transpose(1, 2)   # (B, m, n)
        self.w2.baddbmm_(step2, h1)
        self.dw2.baddbmm_(step2, h1)
        self.path2 += eta.repeat_interleave(self.copies) * g2norm
        self.time += eta


def loss_grad_bound3(st: _State3, xt: torch.Tensor, yt: torch.Tensor):
    """Loss (R,), gradients [W1 (B, m, 2), W2 as (d2, h1, ||g2||_F), a (B, m)], Hessian bound (R,).

    Activations are laid out (B, n, m), neurons contiguous: the two products with W2 then read it in
    the order BLAS streams fastest (W2 h1 as bmm(W2, h1^T-view), W2^T q as q W2; 2-7x faster here than
    (B, m, n) operands). The W2 gradient is d2^T h1 with d2, h1 (B, n, m), kept as its factors."""
    n, cp = xt.shape[0], st.copies
    z1 = torch.matmul(xt, st.w1.transpose(1, 2))                     # (B, n, m)
    s1 = (z1 > 0).to(z1.dtype)
    h1 = z1 * s1
    z2 = torch.bmm(st.w2, h1.transpose(1, 2)).transpose(1, 2)        # (B, n, m)
    s2 = (z2 > 0).to(z2.dtype)
    h2 = z2 * s2
    g = torch.bmm(h2, st.a[:, :, None])[..., 0]                      # (B, n)
    alpha = st.alpha[:, None]
    f = g.view(-1, cp, n).sum(1) / alpha                            # (R, n)
    e = f - yt
    loss = 0.5 * (e * e).mean(dim=1)
    es = (e / (n * alpha)).repeat_interleave(cp, dim=0)             # (B, n): e_i / (n alpha)
    ga = torch.bmm(es[:, None, :], h2)[:, 0]                         # (B, m)
    q = s2 * st.a[:, None, :]                                        # (B, n, m): a_k relu'(z2_ki)
    d2 = q * es[:, :, None]                                          # (B, n, m): g2 = d2^T h1
    p = torch.bmm(q, st.w2) * s1                                     # (B, n, m): (W2^T q_i) relu'(z1_i)
    g1 = torch.matmul((p * es[:, :, None]).transpose(1, 2), xt)      # (B, m, 2)
    hh = torch.bmm(h1, h1.transpose(1, 2))                           # (B, n, n)
    gram = (torch.bmm(h2, h2.transpose(1, 2)) + torch.bmm(q, q.transpose(1, 2)) * hh
            + torch.bmm(p, p.transpose(1, 2)) * (xt @ xt.T))
    inv = (1.0 / (n * st.alpha**2)).repeat_interleave(cp)
    gram = (gram * inv[:, None, None]).view(-1, cp, n, n).sum(1)      # (R, n, n)
    ci = es.abs()                                                    # (B, n)
    xn = xt.norm(dim=1)                                              # (n,)
    g2norm = (torch.bmm(d2, d2.transpose(1, 2)) * hh).sum((1, 2)).clamp_min(0).sqrt()
    w2norm = st.w2norm0 + st.path2                                   # >= ||W2||_2, no pass over W2
    b_a2 = torch.bmm((ci * hh.diagonal(dim1=1, dim2=2).sqrt())[:, None, :], s2)[:, 0].amax(1)
    b_a1 = (ci * xn).sum(1) * w2norm
    b_21 = torch.bmm((ci * xn * q.norm(dim=2))[:, None, :], s1)[:, 0].amax(1)
    res = (b_a2 + b_a1 + b_21).view(-1, cp).amax(1)
    bound = torch.linalg.eigvalsh(gram)[:, -1] + res
    return loss, [g1, (d2, h1, g2norm), ga], bound.clamp_min(1e-300)


def train3_to_convergence(
    m: int,
    scales: list[Scales3],
    seeds: list[int],
    *,
    x: tuple[float, ...] = AUTHORS_X,
    y: tuple[float, ...] = AUTHORS_Y,
    asi: bool = True,
    tol: float = 1e-6,
    max_steps: int = 20_000,
    c: float = 1.0,
    progress=None,
) -> Phase3Batch:
    """Train R three-layer runs of width m until R < tol or `max_steps`; one Phase3Run each.

    x, y: the 1-D training set (n points). Runs that converge leave the batch.
    """
    start = time.perf_counter()
    if len(scales) != len(seeds):
        raise ValueError(f"{len(scales)} scales for {len(seeds)} seeds: give one of each per run")
    xt = torch.tensor([[v, 1.0] for v in x], dtype=torch.float64)
    yt = torch.tensor(y, dtype=torch.float64)
    alpha = torch.tensor([s.alpha for s in scales], dtype=torch.float64)
    st = _State3(*init_params3(m, scales, seeds, asi), alpha, c, 2 if asi else 1)
    results: list[Phase3Run | None] = [None] * len(scales)
    hist = torch.full((max_steps + 1, len(scales), 2), float("nan"), dtype=torch.float64)
    interrupted = False
    try:
        for step in range(max_steps + 1):
            loss, grads, bound = loss_grad_bound3(st, xt, yt)
            hist[step, st.index, 0] = loss
            hist[step, st.index, 1] = st.time
            done = (loss < tol) | ~torch.isfinite(loss) | (step == max_steps)
            if done.any():
                _finish3(st, done, loss, step, tol, hist, results)
                if bool(done.all()):
                    break
                per_net = (~done).repeat_interleave(st.copies)
                loss, bound = loss[~done], bound[~done]
                g1, (d2, h1, g2norm), ga = grads
                grads = [g1[per_net], (d2[per_net], h1[per_net], g2norm[per_net]), ga[per_net]]
                st.keep(~done)
            st.c = torch.where(loss > st.prev_loss, st.c * 0.5, st.c)  # the loss rose: halve c
            st.prev_loss = loss
            st.step(st.c / bound, grads)
            if progress is not None:
                progress.update(1)
    except KeyboardInterrupt:
        interrupted = True
    runs = [r if r is not None else _empty3() for r in results]
    return Phase3Batch(runs, time.perf_counter() - start, interrupted)


def _finish3(st: _State3, done, loss, step: int, tol: float, hist, results) -> None:
    """Record the runs in `done` (a mask over the active runs); RD over each run's first copy."""
    for j in torch.nonzero(done).flatten().tolist():
        r, b = int(st.index[j]), j * st.copies
        lv = float(loss[j])
        curve = hist[: step + 1, r].numpy()
        results[r] = Phase3Run(
            float(st.dw1[b].norm() / st.n1[b]), float(st.dw2[b].norm() / st.n2[b]),
            float(st.da[b].norm() / st.na[b]), lv, step, bool(lv < tol),
            "complete" if math.isfinite(lv) else "diverged", float(st.time[j]),
            curve={"step": np.arange(step + 1), "loss": curve[:, 0].copy(), "time": curve[:, 1].copy()},
            neurons={"w1": st.w1[b].numpy().copy(), "w1_0": st.w1_0[b].numpy().copy(),
                     "a": st.a[b].numpy().copy(), "w2_out": st.w2[b].norm(dim=0).numpy().copy(),
                     "w2_in": st.w2[b].norm(dim=1).numpy().copy(),
                     "w2_out_0": st.w2_out0[b].numpy().copy()},
        )


def _empty3() -> Phase3Run:
    return Phase3Run(math.nan, math.nan, math.nan, math.nan, 0, False, "interrupted", 0.0)
