"""Batched full-batch training: many independent runs of one architecture as one computation.

Each run r has its own seed, init std and learning rate; the runs share the data. The update
rules are PyTorch's: Adam exactly as ``torch.optim.Adam`` (no weight decay, no amsgrad), and
plain gradient descent. Per-run results equal training that run alone (tests/test_training.py).

Two traps of small initialization are measured and reported as warnings:

* Adam's ``eps`` can exceed the gradients (they scale like init_std**p), which silently turns
  Adam into momentum descent;
* in float32 an update smaller than half the spacing of float32 numbers near a weight is
  lost entirely (1e-8 on weights of 0.25 and up).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from ._models import BatchedNet, augment
from ._records import RunSpec

DIVERGENCE_CHECK_EVERY = 50


class TrainingWarning(UserWarning):
    """A run is set up in a way that silently changes what the optimizer does."""


@dataclass
class BatchOutcome:
    """Raw arrays of a batch (R runs, S snapshots, E epochs)."""

    epochs: np.ndarray                  # (S,) snapshot epochs
    snapshots: list[list[np.ndarray]]   # [layer][s] -> (R, rows, cols)
    loss: np.ndarray                    # (E + 1, R); NaN after a run diverged or stopped
    diverged_epoch: list[int | None]    # first epoch with a non-finite loss, per run
    last_epoch: int                     # last epoch reached (< E when interrupted)
    interrupted: bool


class Adam:
    """torch.optim.Adam's update on a BatchedNet's flat buffer with a per-run learning rate."""

    def __init__(self, net: BatchedNet, lr: torch.Tensor, beta1: float, beta2: float, eps: float):
        self.net, self.params, self.lr = net, net.flat, net.per_run(lr)
        self.beta1, self.beta2, self.eps = beta1, beta2, eps
        self.exp_avg = torch.zeros_like(self.params)
        self.exp_avg_sq = torch.zeros_like(self.params)
        self.denom = torch.zeros_like(self.params)   # workspaces: no allocation per step
        self.update = torch.zeros_like(self.params)
        self.step_count = 0

    def step(self, grad: torch.Tensor) -> None:
        self.step_count += 1
        self.exp_avg.lerp_(grad, 1 - self.beta1)
        self.exp_avg_sq.mul_(self.beta2).addcmul_(grad, grad, value=1 - self.beta2)
        bias1 = 1 - self.beta1**self.step_count
        bias2_sqrt = math.sqrt(1 - self.beta2**self.step_count)
        denom = torch.sqrt(self.exp_avg_sq, out=self.denom).div_(bias2_sqrt).add_(self.eps)
        update = torch.div(self.exp_avg, denom, out=self.update).mul_(self.lr)
        self.params.add_(update, alpha=-1 / bias1)

    def stop(self, run: int) -> None:
        for buffer in (self.lr, self.exp_avg, self.exp_avg_sq):
            for view in self.net.views(buffer):
                view[run] = 0.0


class GradientDescent:
    """theta <- theta - lr * grad, with a per-run learning rate."""

    def __init__(self, net: BatchedNet, lr: torch.Tensor):
        self.net, self.params, self.lr = net, net.flat, net.per_run(lr)

    def step(self, grad: torch.Tensor) -> None:
        self.params.addcmul_(grad, self.lr, value=-1)

    def stop(self, run: int) -> None:
        for view in self.net.views(self.lr):
            view[run] = 0.0


def check_adam_eps(grad: torch.Tensor, eps: float, specs: list[RunSpec]) -> None:
    """Warn when most of a run's first gradients are below Adam's eps."""
    below = (grad.abs() < eps).double().mean(dim=1)  # grad: (R, P) per-run rows
    for r in torch.nonzero(below > 0.5).flatten().tolist():
        warnings.warn(
            f"run {r} (seed {specs[r].seed}, init_std {specs[r].init_std:g}): "
            f"{below[r].item():.0%} of the first gradients are below Adam eps={eps:g}, so Adam "
            "acts like momentum descent; set train.eps smaller (e.g. 1e-20) or use float64",
            TrainingWarning,
            stacklevel=3,
        )


def check_float32_resolution(net: BatchedNet, specs: list[RunSpec], optimizer: str) -> bool:
    """Warn when a float32 Adam step (about lr) is below half the float32 spacing of the weights."""
    if net.flat.dtype != torch.float32 or optimizer != "adam":
        return False
    warned = False
    for name, w in zip(net.arch.names, net.weights, strict=True):
        largest = w.abs().amax(dim=(1, 2)).double().cpu()
        spacing = torch.tensor(np.spacing(largest.numpy().astype(np.float32)), dtype=torch.float64)
        for r, spec in enumerate(specs):
            if spec.lr < 0.5 * spacing[r].item():
                warnings.warn(
                    f"run {r}: lr={spec.lr:g} is below the float32 resolution of {name} "
                    f"(weights up to {largest[r].item():.3g}, spacing {spacing[r].item():.2g}): "
                    "its updates are lost; set train.dtype=float64",
                    TrainingWarning,
                    stacklevel=3,
                )
                warned = True
    return warned


def _first_bad(loss: torch.Tensor, start: int) -> dict[int, int]:
    """Map run -> first epoch (>= start) with a non-finite loss, for rows loss[start:]."""
    bad = ~torch.isfinite(loss[start:])
    runs = torch.nonzero(bad.any(dim=0)).flatten().tolist()
    return {r: start + int(torch.nonzero(bad[:, r])[0]) for r in runs}


def train_batch(
    net: BatchedNet,
    x: torch.Tensor,
    y: torch.Tensor,
    specs: list[RunSpec],
    *,
    optimizer: str,
    epochs: int,
    snapshot_at: list[int],
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    progress=None,
) -> BatchOutcome:
    """Train every run of `net` for `epochs` full-batch steps; x (n, d), y (n, d_out).

    A run whose loss turns NaN/inf is stopped where it happened (its later snapshots are
    dropped); KeyboardInterrupt ends the batch early and returns what was recorded.
    """
    runs = net.runs
    # materialized once: the data never change, and bmm is fastest on contiguous batches
    xb = augment(x).expand(runs, -1, -1).contiguous()
    yb = y.expand(runs, -1, -1).contiguous()
    lr = torch.tensor([s.lr for s in specs], dtype=net.flat.dtype, device=net.flat.device)
    opt = Adam(net, lr, beta1, beta2, eps) if optimizer == "adam" else GradientDescent(net, lr)
    loss = torch.full((epochs + 1, runs), float("nan"), dtype=net.flat.dtype, device=net.flat.device)
    wanted = set(snapshot_at)
    taken: list[tuple[int, torch.Tensor]] = []
    diverged: dict[int, int] = {}
    checked, epoch, interrupted = 0, 0, False
    check_float32_resolution(net, specs, optimizer)
    try:
        for epoch in range(epochs + 1):
            loss[epoch] = net.loss_and_grad(xb, yb)
            if epoch in wanted:
                taken.append((epoch, net.flat.detach().clone()))
            if epoch == 0 and optimizer == "adam":
                check_adam_eps(torch.cat([g.flatten(1) for g in net.grads], 1), eps, specs)
            if epoch % DIVERGENCE_CHECK_EVERY == 0 or epoch == epochs:
                checked = _stop_diverged(net, opt, loss, checked, epoch, diverged)
            if epoch == epochs:
                break
            opt.step(net.grad)
            if progress is not None:
                progress.update(1)
    except KeyboardInterrupt:
        interrupted = True
        epoch = max(epoch - 1, 0)  # the interrupted epoch may be half-done
        _stop_diverged(net, opt, loss, checked, epoch, diverged)
    return _outcome(net, loss, taken, diverged, epoch, interrupted, runs)


def _stop_diverged(net, opt, loss, checked: int, epoch: int, diverged: dict[int, int]) -> int:
    """Freeze runs whose loss went non-finite in loss[checked:epoch+1]; returns next start."""
    for run, bad_epoch in _first_bad(loss[: epoch + 1], checked).items():
        if run not in diverged:
            diverged[run] = bad_epoch
            for view in net.weights:
                view[run] = 0.0  # stop NaN arithmetic; the run's record ends at bad_epoch
            opt.stop(run)
    return epoch + 1


def _outcome(net, loss, taken, diverged, last_epoch, interrupted, runs) -> BatchOutcome:
    loss_np = loss.double().cpu().numpy()
    loss_np[last_epoch + 1:] = np.nan
    for run, bad_epoch in diverged.items():
        loss_np[bad_epoch:, run] = np.nan
    taken = [(e, flat) for e, flat in taken if e <= last_epoch]
    views = [net.views(flat) for _, flat in taken]
    layers = [[v[k].double().cpu().numpy() for v in views] for k in range(len(net.weights))]
    return BatchOutcome(
        epochs=np.array([e for e, _ in taken], dtype=np.int64),
        snapshots=layers,
        loss=loss_np,
        diverged_epoch=[diverged.get(r) for r in range(runs)],
        last_epoch=last_epoch,
        interrupted=interrupted,
    )


def initial_stage_end(loss: np.ndarray, fraction: float = 0.7) -> int | None:
    """First epoch where the loss falls to `fraction` of its initial value (Sec. 3), or None."""
    hit = np.nonzero(np.asarray(loss) <= fraction * loss[0])[0]
    return int(hit[0]) if hit.size else None
