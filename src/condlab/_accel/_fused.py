"""Fast path "optimizer step": PyTorch's own fused Adam/AdamW kernels on condlab's flat buffer.

Registered for ``Adam`` and ``AdamW`` (exact classes), whose plain tensor steps
(``condlab.training``) are the reference. ``torch._fused_adam_`` (what
``torch.optim.Adam(fused=True)`` calls) updates parameters, both moments and the weight decay
in ONE pass over memory, where the plain tensor formulation makes nine. It takes one learning
rate and one weight decay per call, so the buffer is cut into contiguous segments that share
them: one segment when every run shares its hyper-parameters, otherwise one per run and layer
at most (runs with equal values that sit side by side merge), and one call per distinct (lr,
weight decay) pair.

The kernel is PyTorch's: its numerics are ``torch.optim.Adam(fused=True)``'s, which agree
with the plain step up to rounding (tests/test_accel_parity.py). ``torch._fused_adam_`` is a
private API: making the step probes it on a few scratch elements, so a kernel that is missing
(torch older than 2.4), renamed, or refuses its arguments raises there, and the registry
switches this fast path off with one warning. On CPU the kernel runs on one thread (below).
Gain (benchmarks/bench_wide.py, Adam;
benchmarks/bench_batched.py): docs/architecture.md, "Fast paths".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from ..training import Adam, AdamW
from ._registry import FastPath, register

if TYPE_CHECKING:
    from ..training import Optimizer

Segments = dict[tuple[float, float], list[tuple[int, int]]]

# On CPU the kernel runs with torch at ONE thread, so that no OpenMP region opens: after one,
# torch's worker threads spin (libgomp) on the other cores, which condlab's own pool needs next
# (the split CPU step, the wide step). Measured at the Fig. 3 batch (22,464 float64 parameters),
# 2 threads, machine at load ~3: 300 epochs took 2.0 s of wall time and 1.75 s of CPU time with
# the region, 0.40 s and 0.35 s without it; the kernel alone: 34 us on one thread. The buffer is
# not split over condlab's pool either: the kernel's vector body and its tail round float32
# differently, so a split would change bits with the thread count, to save at most ~0.5 ms of a
# wide step of >= 5 ms (m = 1e5).


def _segments(lr: torch.Tensor, weight_decay: torch.Tensor | None, size: int) -> Segments:
    """(lr, weight decay) -> the [start, end) ranges of the buffer that share them."""
    wd = torch.zeros((), dtype=lr.dtype) if weight_decay is None else weight_decay.cpu()
    lr, wd = lr.cpu().expand(size), wd.expand(size)
    change = torch.ones(size, dtype=torch.bool)
    if size > 1:
        change[1:] = (lr[1:] != lr[:-1]) | (wd[1:] != wd[:-1])
    starts = torch.nonzero(change).flatten().tolist()
    groups: Segments = {}
    for start, end in zip(starts, [*starts[1:], size], strict=True):
        key = (float(lr[start]), float(wd[start]))
        groups.setdefault(key, []).append((start, end))
    return groups


class FusedAdam:
    """One Adam or AdamW step of a whole buffer through ``torch._fused_adam(w)_``, per segment group."""

    def __init__(self, kernel: Callable, groups: Segments, params: torch.Tensor, exp_avg: torch.Tensor,
                 exp_avg_sq: torch.Tensor, betas: tuple[float, float], eps: float):
        self.kernel, self.betas, self.eps = kernel, betas, eps
        self.step_tensor = torch.zeros((), dtype=torch.float32, device=params.device)
        self.params, self.exp_avg, self.exp_avg_sq = params, exp_avg, exp_avg_sq
        self.groups = [(lr, wd, ranges) for (lr, wd), ranges in groups.items()]
        self._grad: torch.Tensor | None = None
        self._cache: list = []

    @classmethod
    def make(cls, opt: Optimizer) -> FusedAdam | None:
        """The fused step of an Adam/AdamW optimizer's buffers, or None for a dtype the kernel
        does not take; raises where the private kernel is missing or refuses a probe step."""
        if opt.params.dtype not in (torch.float32, torch.float64):
            return None
        kernel = torch._fused_adamw_ if opt.decoupled else torch._fused_adam_
        fused = cls(kernel, _segments(opt.lr, opt.weight_decay, opt.params.numel()), opt.params,
                    opt.exp_avg, opt.exp_avg_sq, (opt.beta1, opt.beta2), opt.eps)
        fused._probe(opt.params)
        return fused

    def _probe(self, params: torch.Tensor) -> None:
        # one step on scratch copies of a few elements: a kernel missing for this device or
        # dtype, or whose keywords changed, raises here, not in the middle of training
        probe = [params[:2].clone()]
        zeros = [torch.zeros_like(probe[0])]
        self.kernel(probe, [torch.ones_like(probe[0])], [zeros[0].clone()], [zeros[0].clone()], [],
                    [torch.ones((), dtype=torch.float32, device=params.device)], amsgrad=False,
                    lr=1e-3, beta1=self.betas[0], beta2=self.betas[1], weight_decay=0.0, eps=self.eps,
                    maximize=False, grad_scale=None, found_inf=None)

    def step(self, grad: torch.Tensor, step_count: int) -> None:
        """Update params and both moments in place from `grad` (laid out like params)."""
        self.step_tensor.fill_(step_count)
        threads = torch.get_num_threads()
        if grad.device.type == "cpu":
            torch.set_num_threads(1)   # no OpenMP region (see above)
        try:
            for lr, wd, (params, grads, exp_avg, exp_avg_sq) in self._views(grad):
                self.kernel(params, grads, exp_avg, exp_avg_sq, [], [self.step_tensor] * len(params),
                            amsgrad=False, lr=lr, beta1=self.betas[0], beta2=self.betas[1], weight_decay=wd,
                            eps=self.eps, maximize=False, grad_scale=None, found_inf=None)
        finally:
            torch.set_num_threads(threads)

    def _views(self, grad: torch.Tensor) -> list:
        """Per (lr, weight decay) group: views of params, grad and both moments on its segments;
        made once per gradient buffer (the trainer passes the same one)."""
        if self._grad is not grad:
            buffers = (self.params, grad, self.exp_avg, self.exp_avg_sq)
            self._grad = grad
            self._cache = [(lr, wd, [[buf[s:e] for s, e in ranges] for buf in buffers])
                           for lr, wd, ranges in self.groups]
        return self._cache


register(FastPath("fused Adam", "optimizer step", (Adam, AdamW), FusedAdam.make,
                  "benchmarks/bench_wide.py (Adam), benchmarks/bench_batched.py"))
