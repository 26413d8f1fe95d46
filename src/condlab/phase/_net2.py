"""The two-layer network of the phase diagram: its weights, loss, gradients and step bound.

Network (JMLR 2021): f(x) = (1/alpha) sum_k a_k sigma(w_k . x~), x~ = (x, 1), so w_k = (weight, bias).
Loss R = (1/2n) sum_i (f(x_i) - y_i)^2. Everything in float64.

Step bound (the trainer's step is eta = c / bound, _train.py). Gradient descent is stable while
eta < 2 / lambda_max(Hessian). The Hessian is the Gauss-Newton part (1/n) J^T J plus the residual
part (1/n) sum_i e_i Hess f_i. The top eigenvalue of the first equals that of the n x n Gram matrix
G = (1/n) J J^T (exact, cheap: n is tiny); the second is block-diagonal over neurons, so its norm is
at most the largest block norm, bounded per neuron by ||v_k|| + |a_k| ||C_k||
(v_k = (1/n alpha) sum_i e_i sigma'(z_ki) x~_i; C_k the sigma'' term, zero for ReLU).
"""

from __future__ import annotations

import numpy as np
import torch

from ..activations import autograd_grad, get_activation
from ._param import Scales
from ._runs import Runs

MAX_NEURONS_SAVED = 10_000     # final (theta, A) of at most this many neurons per run are kept


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


class TwoLayer(Runs):
    """The two-layer runs still training: a (R, M), w (R, 2, M) (rows: weight, bias; neurons
    contiguous, as the hot loop reads them), their accumulated changes and initial values; the first
    m neurons are the first copy (all of them without ASI)."""

    LAYERS = ("w", "a")  # RD(theta_w) of w = (weight, bias), RD(theta_a)

    def __init__(self, a: torch.Tensor, w: torch.Tensor, alpha: torch.Tensor, c: float, *, m: int,
                 activation: str = "relu"):
        super().__init__(alpha, c)
        self.a, self.w = a, w
        self.da, self.dw = torch.zeros_like(a), torch.zeros_like(w)
        self.a0, self.w0 = a.clone(), w.clone()
        self.m, self.act = m, _activation(activation)

    @classmethod
    def start(cls, m: int, scales: list[Scales], seeds: list[int], *, asi: bool, alpha: torch.Tensor,
              c: float, activation: str) -> TwoLayer:
        """The runs at their initialization (init_params)."""
        a, w = init_params(m, scales, seeds, asi)
        return cls(a, w.transpose(1, 2).contiguous(), alpha, c, m=m, activation=activation)

    def keep(self, mask: torch.Tensor, grads: list[torch.Tensor]) -> list[torch.Tensor]:
        super().keep(mask, grads)
        for name in ("a", "w", "da", "dw", "a0", "w0"):
            setattr(self, name, getattr(self, name)[mask])
        return [g[mask] for g in grads]

    def loss_grad_bound(self, xt: torch.Tensor, yt: torch.Tensor):
        return _loss_grad_bound(self, xt, yt, *self.act)

    def step(self, eta: torch.Tensor, grads: list[torch.Tensor]) -> None:
        ga, gw = grads
        ea, ew = -eta[:, None], -eta[:, None, None]   # gw: (R, 2, M) like w; fused multiply-adds
        self.a.addcmul_(ga, ea)
        self.da.addcmul_(ga, ea)
        self.w.addcmul_(gw, ew)
        self.dw.addcmul_(gw, ew)
        self.time += eta

    def rd(self, j: int) -> dict[str, float]:
        """RD(theta_w) (weight and bias) and RD(theta_a) of active run j over the first copy."""
        first = slice(0, self.m)
        return {"w": float(self.dw[j, :, first].norm() / self.w0[j, :, first].norm()),
                "a": float(self.da[j, first].norm() / self.a0[j, first].norm())}

    def neurons(self, j: int) -> dict[str, np.ndarray]:
        """The final a, w, b of (up to MAX_NEURONS_SAVED of) run j's first neurons."""
        keep = min(self.m, MAX_NEURONS_SAVED)
        return {"a": self.a[j, :keep].numpy().copy(), "w": self.w[j, 0, :keep].numpy().copy(),
                "b": self.w[j, 1, :keep].numpy().copy()}


def _loss_grad_bound(st: TwoLayer, xt, yt, sig, dsig, d2sig):
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


def orientation_amplitude(neurons: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(theta, A) of each neuron, as in the JMLR scatters: theta = the angle of (w, b) in (-pi, pi],
    A = |a| ||(w, b)|| (the neuron's output amplitude on inputs of norm 1)."""
    theta = np.arctan2(neurons["b"], neurons["w"])
    amp = np.abs(neurons["a"]) * np.hypot(neurons["w"], neurons["b"])
    return theta, amp
