"""One optimizer protocol for the batched trainer and the leading-order replay.

An optimizer updates ONE flat parameter buffer in place, from a gradient laid out like it,
in a single method (``step``): the hot loop's whole update, in plain torch (a fast path
registered for an exact optimizer class may take it over: condlab._accel). The update rules
are PyTorch's single-tensor ones, up to rounding: ``torch.optim.Adam`` (``weight_decay`` is
L2, added to the gradient), ``torch.optim.AdamW`` (decoupled: ``theta *= 1 - lr *
weight_decay`` before the moments), ``torch.optim.SGD`` (momentum with dampening 0, optional
Nesterov, L2 weight decay) and plain gradient descent (SGD without momentum).

Hyper-parameters that a sweep varies (lr, weight_decay, momentum) are tensors broadcastable
to the buffer: a 0-d tensor when every run shares the value, or one value per element (each
run's value expanded to its slice of the buffer, ``BatchedNet.per_run``). So a sweep over
weight decay or momentum trains as one batch, and ``stop`` can freeze a single run.

A new optimizer is one subclass with a ``name``, decorated with ``@register_optimizer``;
``train.optimizer`` names it, and ``uses`` says which per-run hyper-parameters it reads
(the config refuses the others). Steps allocate nothing: workspaces are made once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from .._accel import find

OPTIMIZERS: dict[str, type[Optimizer]] = {}


def register_optimizer(cls: type[Optimizer]) -> type[Optimizer]:
    """Class decorator: make `cls` available as ``train.optimizer = cls.name``."""
    OPTIMIZERS[cls.name] = cls
    return cls


def get_optimizer(name: str) -> type[Optimizer]:
    """The optimizer class registered as `name`, or a one-line error listing the accepted ones."""
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer '{name}' is not accepted: choose one of {', '.join(OPTIMIZERS)}")
    return OPTIMIZERS[name]


@dataclass(frozen=True)
class Hyper:
    """Hyper-parameters: tensors broadcastable to the parameter buffer, and shared floats."""

    lr: torch.Tensor
    weight_decay: torch.Tensor | None = None
    momentum: torch.Tensor | None = None
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    nesterov: bool = False


class Optimizer:
    """Base class: per-element lr and weight decay, a step counter, state save/restore."""

    name: ClassVar[str]
    # True for the Adam family: a step is about lr whatever the gradient's size, so at small
    # initialization the leading-order flow is sign descent (Sec. 5) rather than gradient flow.
    scale_free: ClassVar[bool] = False
    uses: ClassVar[tuple[str, ...]] = ("lr", "weight_decay")
    _state: ClassVar[tuple[str, ...]] = ()  # names of the per-element state buffers

    def __init__(self, params: torch.Tensor, hyper: Hyper):
        self.params = params
        self.lr = hyper.lr.to(params)
        self.weight_decay = _nonzero(hyper.weight_decay, params)
        self.step_count = 0

    @property
    def flow(self) -> str:
        """The leading-order flow this optimizer follows at small initialization."""
        return "sign" if self.scale_free else "gradient"

    def step(self, grad: torch.Tensor) -> None:
        """One update of ``params`` in place; `grad` (same layout) may be used as a workspace."""
        raise NotImplementedError

    def stop(self, where: torch.Tensor) -> None:
        """Freeze the elements where the bool mask `where` (layout of params) is true."""
        self.lr = _expanded(self.lr, self.params).masked_fill_(where, 0.0)
        for name in self._state:
            getattr(self, name).masked_fill_(where, 0.0)
        self._derive()

    def state_dict(self) -> dict:
        """Everything a step depends on beyond params and grad (for checkpoints)."""
        state = {name: getattr(self, name).clone() for name in self._state}
        return {"name": self.name, "step": self.step_count, "lr": self.lr.clone(), **state}

    def load_state_dict(self, state: dict) -> None:
        if state["name"] != self.name:
            raise ValueError(f"optimizer state of '{state['name']}' cannot be loaded into '{self.name}'")
        self.step_count = int(state["step"])
        self.lr = state["lr"].to(self.params).clone()
        for name in self._state:
            getattr(self, name).copy_(state[name])
        self._derive()

    def _derive(self) -> None:
        """Recompute tensors derived from the hyper-parameters (after stop or load)."""

    def _decay(self, grad: torch.Tensor) -> torch.Tensor:
        """L2 weight decay as torch.optim couples it: grad + weight_decay * params."""
        if self.weight_decay is not None:
            grad.addcmul_(self.params, self.weight_decay)
        return grad


@register_optimizer
class Adam(Optimizer):
    """torch.optim.Adam (no amsgrad): L2 weight decay, bias-corrected moments."""

    name = "adam"
    scale_free = True
    _state = ("exp_avg", "exp_avg_sq")
    decoupled = False

    def __init__(self, params: torch.Tensor, hyper: Hyper):
        super().__init__(params, hyper)
        self.beta1, self.beta2, self.eps = hyper.beta1, hyper.beta2, hyper.eps
        self.exp_avg = torch.zeros_like(params)
        self.exp_avg_sq = torch.zeros_like(params)
        self._denom = self._update = None   # workspaces, made on the first step
        self._derive()

    def _derive(self) -> None:
        self._shrink = None
        if self.decoupled and self.weight_decay is not None:
            self._shrink = 1 - self.lr * self.weight_decay
        # a registered fast step for this exact class and these buffers and hyper-parameters
        # (condlab._accel, "optimizer step": PyTorch's fused kernel), or None
        self._fast = find("optimizer step", type(self), self)

    def step(self, grad: torch.Tensor) -> None:
        self.step_count += 1
        if self._fast is not None:
            self._fast.step(grad, self.step_count)
            return
        if self._denom is None:
            self._denom, self._update = torch.zeros_like(self.params), torch.zeros_like(self.params)
        if self._shrink is not None:
            self.params.mul_(self._shrink)        # AdamW: decay before the moments see grad
        elif not self.decoupled:
            grad = self._decay(grad)
        self.exp_avg.lerp_(grad, 1 - self.beta1)
        self.exp_avg_sq.mul_(self.beta2).addcmul_(grad, grad, value=1 - self.beta2)
        bias1 = 1 - self.beta1**self.step_count
        bias2_sqrt = (1 - self.beta2**self.step_count) ** 0.5
        denom = torch.sqrt(self.exp_avg_sq, out=self._denom).div_(bias2_sqrt).add_(self.eps)
        update = torch.div(self.exp_avg, denom, out=self._update).mul_(self.lr)
        self.params.add_(update, alpha=-1 / bias1)


@register_optimizer
class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay, theta *= 1 - lr * weight_decay."""

    name = "adamw"
    decoupled = True


@register_optimizer
class SGD(Optimizer):
    """torch.optim.SGD with momentum (dampening 0, optional Nesterov) and L2 weight decay."""

    name = "sgd"
    uses = ("lr", "weight_decay", "momentum")
    _state = ("momentum_buffer",)

    def __init__(self, params: torch.Tensor, hyper: Hyper):
        super().__init__(params, hyper)
        self.momentum = _nonzero(hyper.momentum, params)
        self.nesterov = hyper.nesterov
        self.momentum_buffer = torch.zeros_like(params)

    def step(self, grad: torch.Tensor) -> None:
        first = self.step_count == 0   # torch starts the momentum buffer at the first gradient
        self.step_count += 1
        grad = self._decay(grad)
        direction = grad
        if self.momentum is not None:
            buf = self.momentum_buffer
            if first:
                buf.copy_(grad)
            else:
                buf.mul_(self.momentum).add_(grad)
            direction = grad.addcmul_(buf, self.momentum) if self.nesterov else buf
        self.params.addcmul_(direction, self.lr, value=-1)


@register_optimizer
class GD(Optimizer):
    """Plain gradient descent, theta <- theta - lr * (grad + weight_decay * theta)."""

    name = "gd"

    def step(self, grad: torch.Tensor) -> None:
        self.step_count += 1
        self.params.addcmul_(self._decay(grad), self.lr, value=-1)


def _nonzero(values: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | None:
    """None when every value is 0 (torch.optim skips the operation then), else on like's device."""
    if values is None or not bool(torch.as_tensor(values).ne(0).any()):
        return None
    return values.to(like)


def _expanded(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A private per-element copy of `values` (which may be a broadcast scalar)."""
    return values.expand_as(like).clone() if values.shape != like.shape else values.clone()
