"""Batched full-batch training: many independent runs of one architecture as one computation.

Each run r has its own seed, init std, learning rate, weight decay, momentum and dropout; the
runs share the data. The update rules are PyTorch's (``condlab.training._optim``: adam, adamw, sgd,
gd). Per-run results equal training that run alone (tests/test_training.py, tests/test_optim.py).

Two traps of small initialization are measured and reported as warnings:

* Adam's ``eps`` can exceed the gradients (they scale like init_std**p), which silently turns
  Adam into momentum descent;
* in float32 an update smaller than half the spacing of float32 numbers near a weight is
  lost entirely (1e-8 on weights of 0.25 and up).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from ..records import BatchSnapshots, RunSpec, SnapshotRecorder
from ._dropout import Dropout
from ._models import BatchedNet, augment
from ._optim import Hyper, Optimizer, get_optimizer

DIVERGENCE_CHECK_EVERY = 50


class TrainingWarning(UserWarning):
    """A run is set up in a way that silently changes what the optimizer does."""


@dataclass
class BatchOutcome:
    """Raw arrays of a batch (R runs, S snapshots, E epochs)."""

    epochs: np.ndarray                  # (S,) snapshot epochs
    snapshots: BatchSnapshots           # [layer] -> (R, S, rows, cols), training dtype
    loss: np.ndarray                    # (last_epoch + 1, R); NaN after a run diverged
    diverged_epoch: list[int | None]    # first epoch with a non-finite loss, per run
    last_epoch: int                     # last epoch reached (< E when interrupted)
    interrupted: bool


def make_optimizer(name: str, net: BatchedNet, specs: list[RunSpec], *, beta1: float = 0.9,
                   beta2: float = 0.999, eps: float = 1e-8, nesterov: bool = False) -> Optimizer:
    """The optimizer `name` on net.flat, with each run's lr, weight decay and momentum."""
    def per_run(field: str) -> torch.Tensor:
        values = torch.tensor([getattr(s, field) for s in specs], dtype=net.flat.dtype)
        if bool((values == values[0]).all()):   # shared: a broadcast scalar saves a buffer
            return values[0].to(net.flat.device)
        return net.per_run(values.to(net.flat.device))

    hyper = Hyper(lr=per_run("lr"), weight_decay=per_run("weight_decay"), momentum=per_run("momentum"),
                  beta1=beta1, beta2=beta2, eps=eps, nesterov=nesterov)
    return get_optimizer(name)(net.flat, hyper)


def check_adam_eps(grad: torch.Tensor, eps: float, specs: list[RunSpec]) -> None:
    """Warn when most of a run's first gradients are below Adam's eps."""
    below = (grad.abs() < eps).double().mean(dim=1)  # grad: (R, P) per-run rows
    for r in torch.nonzero(below > 0.5).flatten().tolist():
        warnings.warn(
            f"run {r} (seed {specs[r].seed}, init_std {specs[r].init_std:g}): "
            f"{below[r].item():.0%} of the first gradients are below Adam eps={eps:g}, so Adam "
            "acts like momentum descent; set train.eps smaller (e.g. 1e-20): float64 does not help, "
            "eps is an absolute floor on the step's denominator",
            TrainingWarning,
            stacklevel=3,
        )


def check_float32_resolution(net: BatchedNet, specs: list[RunSpec], optimizer: Optimizer) -> bool:
    """Warn when a float32 Adam-like step (about lr) is below half the float32 spacing of the weights."""
    if net.flat.dtype != torch.float32 or not optimizer.scale_free:
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


@dataclass
class LoopState:
    """Where a batch's training stands between two epochs (what a checkpoint saves with the
    parameters, the optimizer state and the dropout generators)."""

    epoch: int                                # next epoch whose loss is computed; params = theta_epoch
    loss: torch.Tensor                        # (E + 1, R); rows >= epoch not yet computed
    recorder: SnapshotRecorder                # the snapshots so far (thinned as recorded)
    diverged: dict[int, int] = field(default_factory=dict)   # run -> first non-finite epoch
    checked: int = 0                          # loss rows before this were checked for divergence

    @classmethod
    def start(cls, net: BatchedNet, epochs: int, recorder: SnapshotRecorder) -> LoopState:
        nan = torch.full((epochs + 1, net.runs), float("nan"), dtype=net.flat.dtype, device=net.flat.device)
        return cls(0, nan, recorder)


Checkpoint = Callable[[LoopState, Optimizer, "Dropout | None"], None]


def train_batch(
    net: BatchedNet,
    x: torch.Tensor,
    y: torch.Tensor,
    specs: list[RunSpec],
    *,
    optimizer: str | Optimizer,
    epochs: int,
    snapshot_at: list[int],
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    nesterov: bool = False,
    dropout: Dropout | None = None,
    state: LoopState | None = None,
    checkpoint: Checkpoint | None = None,
    checkpoint_seconds: float = 0.0,
    should_stop: Callable[[], bool] | None = None,
    progress=None,
    recorder: SnapshotRecorder | None = None,
) -> BatchOutcome:
    """Train every run of `net` for `epochs` full-batch steps; x (n, d), y (n, d_out).

    `optimizer` is a name (built from each run's lr, weight decay and momentum in `specs`) or
    an Optimizer on net.flat; dropout masks come from each run's ``spec.dropout`` unless
    `dropout` is given. `state` (with the optimizer's and dropout's own states already
    loaded) continues an earlier call. `checkpoint` is called between epochs every
    `checkpoint_seconds` and when `should_stop()` turns true, which ends the batch cleanly;
    a run whose loss turns NaN/inf is stopped where it happened (its later snapshots are
    dropped); a KeyboardInterrupt ends the batch and returns what was recorded.
    `recorder` assembles the record's snapshots (default: every layer in full); each snapshot
    goes into it when taken, so thinned snapshots are thin in memory too (not with `state`,
    which holds its own recorder).
    """
    runs, fresh = net.runs, state is None
    # materialized once: the data never change, and bmm is fastest on contiguous batches
    xb = augment(x).expand(runs, -1, -1).contiguous()
    yb = y.expand(runs, -1, -1).contiguous()
    opt = optimizer if isinstance(optimizer, Optimizer) else make_optimizer(
        optimizer, net, specs, beta1=beta1, beta2=beta2, eps=eps, nesterov=nesterov)
    if dropout is None:
        dropout = Dropout.of([s.dropout for s in specs], [s.seed for s in specs], net.flat.dtype,
                             net.flat.device)
    if state is None:
        state = LoopState.start(net, epochs, recorder if recorder is not None else
                                SnapshotRecorder(snapshot_at, epochs))
    wanted, interrupted, epoch = set(snapshot_at), False, state.epoch
    if fresh:
        check_float32_resolution(net, specs, opt)
    next_save = time.monotonic() + checkpoint_seconds
    try:
        for epoch in range(state.epoch, epochs + 1):
            _loss_and_grad(net, xb, yb, dropout, state.loss, epoch)
            if epoch in wanted:
                state.recorder.take(epoch, net.weights)  # copied (thinned) into the record now
            if epoch == 0 and opt.scale_free:
                check_adam_eps(torch.cat([g.flatten(1) for g in net.grads], 1), eps, specs)
            if epoch % DIVERGENCE_CHECK_EVERY == 0 or epoch == epochs:
                _stop_diverged(net, opt, state, epoch)
            if epoch == epochs:
                break
            opt.step(net.grad)
            state.epoch = epoch + 1
            if progress is not None:
                progress.update(1)
            stop = should_stop is not None and should_stop()
            due = checkpoint_seconds > 0 and time.monotonic() >= next_save
            if checkpoint is not None and (stop or due):
                checkpoint(state, opt, dropout)
                next_save = time.monotonic() + checkpoint_seconds
            if stop:   # clean: the checkpoint above holds the uninterrupted trajectory
                interrupted = True
                _stop_diverged(net, opt, state, epoch)
                break
    except KeyboardInterrupt:
        interrupted = True
        epoch = max(epoch - 1, 0)  # the interrupted epoch may be half-done
        _stop_diverged(net, opt, state, epoch)
    return _outcome(net, state, epoch, interrupted)


def _loss_and_grad(net: BatchedNet, xb, yb, dropout: Dropout | None, loss: torch.Tensor, epoch: int) -> None:
    """Record the loss at `epoch` (without dropout: eq. 3 for the recorded weights) and the gradient."""
    if dropout is None:
        loss[epoch] = net.loss_and_grad(xb, yb)
    else:
        loss[epoch] = net.loss(xb, yb)
        net.loss_and_grad(xb, yb, dropout)


def _stop_diverged(net: BatchedNet, opt: Optimizer, state: LoopState, epoch: int) -> None:
    """Freeze runs whose loss went non-finite in loss[checked:epoch+1]."""
    for run, bad_epoch in _first_bad(state.loss[: epoch + 1], state.checked).items():
        if run not in state.diverged:
            state.diverged[run] = bad_epoch
            for view in net.weights:
                view[run] = 0.0  # stop NaN arithmetic; the run's record ends at bad_epoch
            opt.stop(net.run_mask(run))
    state.checked = epoch + 1


def _outcome(net: BatchedNet, state: LoopState, last_epoch: int, interrupted: bool) -> BatchOutcome:
    """The epochs that ran (0..last_epoch): loss rows, snapshots, divergence."""
    loss_np = state.loss[: last_epoch + 1].double().cpu().numpy()
    for run, bad_epoch in state.diverged.items():
        loss_np[bad_epoch:, run] = np.nan
    snapshots = state.recorder.result(last_epoch)
    return BatchOutcome(
        epochs=snapshots.epochs,
        snapshots=snapshots,
        loss=loss_np,
        diverged_epoch=[state.diverged.get(r) for r in range(net.runs)],
        last_epoch=last_epoch,
        interrupted=interrupted,
    )


def initial_stage_end(loss: np.ndarray, fraction: float = 0.7) -> int | None:
    """First epoch where the loss falls to `fraction` of its initial value (Sec. 3), or None."""
    hit = np.nonzero(np.asarray(loss) <= fraction * loss[0])[0]
    return int(hit[0]) if hit.size else None
