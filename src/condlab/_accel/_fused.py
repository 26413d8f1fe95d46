"""Fused optimizer steps: PyTorch's own fused Adam/AdamW kernels on condlab's flat buffer.

``torch._fused_adam_`` (what ``torch.optim.Adam(fused=True)`` calls) updates parameters, both
moments and the weight decay in ONE pass over memory, where the plain tensor formulation
(``_optim.Adam``) makes nine. It takes one learning rate and one weight decay per call, so
the buffer is cut into contiguous segments that share them: one segment when every run
shares its hyper-parameters, otherwise one per run and layer at most (runs with equal
values that sit side by side merge), and one call per distinct (lr, weight decay) pair.

The kernel is PyTorch's: its numerics are ``torch.optim.Adam(fused=True)``'s, which agree
with the default implementation up to rounding (tests/test_optim.py and tests/test_fused.py
hold the trainer to 1e-9 of ``torch.optim`` in float64). Where the kernel is missing (torch
older than 2.4, or a device or dtype it does not cover), ``FusedAdam.plan`` returns None and
the optimizer keeps its plain tensor steps. On CPU the kernel never opens an OpenMP region: a
buffer of at most ``SERIAL_MAX`` elements is stepped with torch at one thread, a larger one in
one range per thread on condlab's pool (see there); an OpenMP region would leave torch's
worker threads spinning on the cores condlab's own threads need next.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from ._cpu import torch_in_ranges

Segments = dict[tuple[float, float], list[tuple[int, int]]]

# Up to this many elements the kernel runs on one thread; above, the buffer is cut into one
# range per thread, each stepped on condlab's pool with torch at one thread
# (condlab._accel._cpu.torch_in_ranges). Either way no OpenMP region opens: after one, torch's worker
# threads spin (libgomp) on the other cores, which condlab's own pool needs next (the split
# CPU step, condlab._accel._cpu_step; the wide step, condlab._accel._wide_step). Measured at the Fig. 3
# batch (22,464 float64 parameters), 2 threads, machine at load ~3: 300 epochs took 2.0 s of
# wall time and 1.75 s of CPU time with the region, 0.40 s and 0.35 s without it; the kernel
# alone: 34 us on one thread.
SERIAL_MAX = 1 << 18


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
        self._cache: dict[tuple[int, int], list] = {}

    @classmethod
    def plan(cls, params: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
             lr: torch.Tensor, weight_decay: torch.Tensor | None, *, decoupled: bool,
             betas: tuple[float, float], eps: float) -> FusedAdam | None:
        """A fused step for these buffers, or None when this torch cannot fuse them (use the plain step)."""
        kernel = getattr(torch, "_fused_adamw_" if decoupled else "_fused_adam_", None)
        if kernel is None or params.dtype not in (torch.float32, torch.float64):
            return None
        fused = cls(kernel, _segments(lr, weight_decay, params.numel()), params, exp_avg, exp_avg_sq,
                    betas, eps)
        return fused if fused._works(params) else None

    def _works(self, params: torch.Tensor) -> bool:
        # one step on scratch copies of a few elements: a kernel missing for this device or
        # dtype raises here, not in the middle of training
        probe = [params[:2].clone()]
        zeros = [torch.zeros_like(probe[0])]
        try:
            self.kernel(probe, [torch.ones_like(probe[0])], [zeros[0].clone()], [zeros[0].clone()], [],
                        [torch.ones((), dtype=torch.float32, device=params.device)], amsgrad=False,
                        lr=1e-3, beta1=self.betas[0], beta2=self.betas[1], weight_decay=0.0, eps=self.eps,
                        maximize=False, grad_scale=None, found_inf=None)
        except (RuntimeError, NotImplementedError):
            return False
        return True

    def step(self, grad: torch.Tensor, step_count: int) -> None:
        """Update params and both moments in place from `grad` (laid out like params)."""
        self.step_tensor.fill_(step_count)
        if grad.device.type != "cpu":
            self._step(grad, slice(0, grad.numel()))
        else:   # torch on one thread; a large buffer in ranges on condlab's pool (see SERIAL_MAX)
            torch_in_ranges(partial(self._step, grad), grad.numel(), SERIAL_MAX)

    def _step(self, grad: torch.Tensor, part: slice) -> None:
        for lr, wd, (params, grads, exp_avg, exp_avg_sq) in self._views(grad, part):
            self.kernel(params, grads, exp_avg, exp_avg_sq, [], [self.step_tensor] * len(params),
                        amsgrad=False, lr=lr, beta1=self.betas[0], beta2=self.betas[1], weight_decay=wd,
                        eps=self.eps, maximize=False, grad_scale=None, found_inf=None)

    def _views(self, grad: torch.Tensor, part: slice) -> list:
        """Per (lr, weight decay) group: views of params, grad and both moments on its segments
        inside `part`; made once per gradient buffer and part (the trainer passes the same ones)."""
        key = (part.start, part.stop)
        if self._grad is not grad:
            self._grad, self._cache = grad, {}
        if key not in self._cache:
            buffers = (self.params, grad, self.exp_avg, self.exp_avg_sq)
            self._cache[key] = [
                (lr, wd, [[buf[s:e] for s, e in cut] for buf in buffers])
                for lr, wd, ranges in self.groups
                if (cut := [(max(s, part.start), min(e, part.stop)) for s, e in ranges
                            if max(s, part.start) < min(e, part.stop)])]
        return self._cache[key]
