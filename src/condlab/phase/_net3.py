"""The three-layer network of the phase diagram: its weights, loss, gradients and step bound.

Network (see _param.py): f(x) = (1/alpha) sum_k a_k relu((W2 relu(W1 x~))_k), x~ = (x, 1), both hidden
layers of width m, loss R = (1/2n) sum_i (f(x_i) - y_i)^2, float64. With the antisymmetric
initialization (ASI) the network is the sum of two copies with the same W1, W2 and negated a, so
f = 0 at the start; each copy has its own parameters (2 x (2m + m^2 + m) weights).

Step bound (the trainer's step is eta = c / (lambda_max(G) + B), _train.py). G = (1/n) J J^T is
the exact n x n Gram matrix of the tangent kernel (the Gauss-Newton part of the Hessian has the same
top eigenvalue); per layer

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
"""

from __future__ import annotations

import numpy as np
import torch

from ._param import Scales3
from ._runs import Runs

EXACT_NORM_MAX_M = 256  # ||W2(0)||_2 by SVD up to this width, by power iteration above


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


class ThreeLayer(Runs):
    """The three-layer runs still training. Per net (B = R x C copies): W1, W2, a, their changes,
    norms at the start; per run (R): what Runs keeps."""

    LAYERS = ("w1", "w2", "a")  # RD of W1 (with bias), W2, the output layer a

    def __init__(self, w1, w2, a, alpha: torch.Tensor, c: float, copies: int):
        super().__init__(alpha, c)
        self.w1, self.w2, self.a = w1, w2, a
        self.dw1, self.dw2, self.da = torch.zeros_like(w1), torch.zeros_like(w2), torch.zeros_like(a)
        self.n1, self.n2, self.na = w1.norm(dim=(1, 2)), w2.norm(dim=(1, 2)), a.norm(dim=1)
        self.w2norm0 = spectral_norm(w2[::copies]).repeat_interleave(copies)  # ASI copies share W2(0)
        self.path2 = torch.zeros_like(self.n2)   # sum of eta ||grad W2||_F >= ||W2 - W2(0)||_F
        self.w1_0, self.w2_out0 = w1.clone(), w2.norm(dim=1)  # W1(0); column norms of W2(0)
        self.copies = copies

    @classmethod
    def start(cls, m: int, scales: list[Scales3], seeds: list[int], *, asi: bool, alpha: torch.Tensor,
              c: float, activation: str) -> ThreeLayer:
        """The runs at their initialization (init_params3); ReLU only."""
        if activation != "relu":
            raise ValueError(f"activation '{activation}' is not accepted for three layers: only relu "
                             "(the step's Hessian bound omits sigma'' terms)")
        return cls(*init_params3(m, scales, seeds, asi), alpha, c, 2 if asi else 1)

    def keep(self, mask: torch.Tensor, grads: list) -> list:
        super().keep(mask, grads)
        per_net = mask.repeat_interleave(self.copies)
        for name in ("w1", "w2", "a", "dw1", "dw2", "da", "n1", "n2", "na", "w2norm0", "path2", "w1_0",
                     "w2_out0"):
            setattr(self, name, getattr(self, name)[per_net])
        g1, (d2, h1, g2norm), ga = grads
        return [g1[per_net], (d2[per_net], h1[per_net], g2norm[per_net]), ga[per_net]]

    def loss_grad_bound(self, xt: torch.Tensor, yt: torch.Tensor):
        return loss_grad_bound3(self, xt, yt)

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

    def rd(self, j: int) -> dict[str, float]:
        """RD of each layer of active run j, over its first copy."""
        b = j * self.copies
        return {"w1": float(self.dw1[b].norm() / self.n1[b]), "w2": float(self.dw2[b].norm() / self.n2[b]),
                "a": float(self.da[b].norm() / self.na[b])}

    def neurons(self, j: int) -> dict[str, np.ndarray]:
        """First copy: W1 and W1(0) (m, 2), a (m), column / row norms of W2 and column norms of W2(0)."""
        b = j * self.copies
        return {"w1": self.w1[b].numpy().copy(), "w1_0": self.w1_0[b].numpy().copy(),
                "a": self.a[b].numpy().copy(), "w2_out": self.w2[b].norm(dim=0).numpy().copy(),
                "w2_in": self.w2[b].norm(dim=1).numpy().copy(), "w2_out_0": self.w2_out0[b].numpy().copy()}


def loss_grad_bound3(st: ThreeLayer, xt: torch.Tensor, yt: torch.Tensor):
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
