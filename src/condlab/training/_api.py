"""``condlab.train``: resolve a config into runs, train them as one batch, write the records."""

from __future__ import annotations

import copy
import dataclasses
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from ..records import (
    Run,
    RunResult,
    RunSpec,
    SnapshotRecorder,
    atomic_write_json,
    provenance,
    thinned_neurons,
    write_runs,
)
from ._checkpoint import (
    StoppedAfterBatch,
    StopRequests,
    checkpoint_path,
    read_checkpoint,
    restore_checkpoint,
    write_checkpoint,
)
from ._config import Config, ConfigError, snapshot_epochs
from ._data import make_dataset
from ._dropout import Dropout
from ._models import Architecture, BatchedNet, init_weights
from ._optim import Optimizer
from ._trainer import BatchOutcome, initial_stage_end, make_optimizer, train_batch


def resolve_device(name: str) -> torch.device:
    """'cpu', 'cuda', 'cuda:N' or 'auto' (CUDA when present) -> a torch.device, or a clear error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"device '{name}' is not accepted: use cpu, cuda, cuda:N or auto") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device '{name}' is not available here (no CUDA device); use cpu or auto")
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"device '{name}' is not accepted: use cpu, cuda, cuda:N or auto")
    return device


def run_specs(cfg: Config) -> list[RunSpec]:
    """Every (seed, init_std, lr, weight_decay, momentum, dropout) combination, in a fixed order."""
    t, m = cfg.train, cfg.model
    return [RunSpec(seed, std, lr, wd, mu, q) for seed in t.seeds for std in m.init_std for lr in t.lr
            for wd in t.weight_decay for mu in t.momentum for q in m.dropout]


# (RunSpec field, config list it comes from, name prefix): a field appears in the directory
# name when its list has several values, so distinct settings never share a name
_SWEPT = (("init_std", "model.init_std", "std"), ("lr", "train.lr", "lr"),
          ("weight_decay", "train.weight_decay", "wd"), ("momentum", "train.momentum", "mom"),
          ("dropout", "model.dropout", "drop"))


def run_name(cfg: Config, spec: RunSpec) -> str:
    """Directory name of a run: the seed, plus whatever else the batch sweeps."""
    name = f"seed{spec.seed}"
    for field, key, prefix in _SWEPT:
        section, option = key.split(".")
        if len(getattr(getattr(cfg, section), option)) > 1:
            name += f"-{prefix}{_short(getattr(spec, field))}"
    return name


def _short(value: float) -> str:
    """'%g' when it identifies the value exactly, else the shortest exact repr."""
    text = f"{value:g}"
    return text if float(text) == value else repr(value)


def _as_config(config: Config | dict | str | Path) -> Config:
    if isinstance(config, Config):
        return Config.from_dict(config.to_dict())  # validated copy
    if isinstance(config, dict):
        return Config.from_dict(config)
    if isinstance(config, str | Path):
        return Config.from_file(config)
    raise TypeError(f"config must be a Config, a dict or a path, not {type(config).__name__}")


def train(
    config: Config | dict[str, Any] | str | Path,
    *,
    out: str | Path | None = None,
    progress: Any = None,
    runs: list[RunSpec] | None = None,
    overwrite: bool = False,
) -> RunResult:
    """Train every run of `config` as one batched computation; write run directories to `out`.

    Returns the runs in memory either way. `progress` shows a bar (default: when stderr is a
    terminal), or is an object whose ``update(1)`` is called after each epoch (a sweep's bar).
    Runs that diverge or an interrupted batch (SIGINT, SIGTERM) are recorded with
    their status; a signal that arrives as the batch ends (after the trainer's last look) lets
    the complete batch be written, then raises ``StoppedAfterBatch`` (a KeyboardInterrupt whose
    ``result`` is the batch), so the caller stops too.
    With `out`, a checkpoint is kept there every ``train.checkpoint_seconds``
    until the batch completes, so a killed batch can be continued with ``resume(out)``.
    `runs` trains just these runs (default: every combination, ``run_specs``; not with `out`,
    whose directory names and checkpoint stand for every combination): how a sweep batches.
    An `out` that already holds files is refused (as ``condlab train --out`` does), unless
    `overwrite` (then the run folders of an earlier batch there are replaced or removed).
    """
    from .._outputs import check_fresh_out, remove_stale_runs

    cfg = _as_config(config)
    if runs is not None and out is not None:
        raise ValueError("train(runs=...) trains a subset of a config's runs and writes no records: "
                         "leave out `out` and write each run with write_run")
    if out is not None:  # before any training, not after it; never over results already there
        check_fresh_out(Path(out), overwrite, api=True)
    result = _run_batch(cfg, Path(out) if out is not None else None, progress, None, runs)
    if out is not None and overwrite:
        remove_stale_runs(Path(out), {run.path.name for run in result.runs})
    return result


def resume(out: str | Path, *, progress: bool | None = None) -> RunResult:
    """Continue the interrupted or killed batch whose checkpoint is in folder `out`.

    The records written equal those of the uninterrupted batch (bit for bit in float64 on CPU).
    """
    saved = read_checkpoint(out)
    return _run_batch(Config.from_dict(saved["config"]), Path(out), progress, saved)


@dataclass
class _Batch:
    """Everything one batch trains: its runs, data, network, optimizer and dropout."""

    cfg: Config
    specs: list[RunSpec]
    dataset: Any
    net: BatchedNet
    opt: Optimizer
    dropout: Dropout | None
    x: torch.Tensor
    y: torch.Tensor


def _build(cfg: Config, runs: list[RunSpec] | None = None) -> _Batch:
    from .._guards import check_memory

    t = cfg.train
    specs = run_specs(cfg) if runs is None else list(runs)
    sized = cfg if runs is None else _with_run_count(cfg, len(specs))
    synthetic = cfg.data.source == "synthetic"
    if synthetic:  # sizes known before sampling: refuse what cannot fit before allocating it
        check_memory(sized, cfg.data.n, cfg.data.d, cfg.model.d_out)
    dataset = make_dataset(cfg.data)
    if not synthetic:
        check_memory(sized, *dataset.x.shape, dataset.y.shape[1])
    if dataset.y.shape[1] != cfg.model.d_out:
        raise ConfigError(f"model.d_out={cfg.model.d_out}, but data.source='{cfg.data.source}' "
                          f"has {dataset.y.shape[1]} outputs: set model.d_out={dataset.y.shape[1]}")
    arch = Architecture.from_config(cfg.model, dataset.config.d)
    device, dtype = resolve_device(t.device), getattr(torch, t.dtype)
    net = BatchedNet(arch, len(specs), dtype, device)
    for r, spec in enumerate(specs):
        net.load(r, init_weights(arch, spec.seed, spec.init_std))
    opt = make_optimizer(t.optimizer, net, specs, beta1=t.beta1, beta2=t.beta2, eps=t.eps,
                         nesterov=t.nesterov)
    dropout = Dropout.of([s.dropout for s in specs], [s.seed for s in specs], dtype, device)
    x = torch.as_tensor(dataset.x, dtype=dtype, device=device)
    y = torch.as_tensor(dataset.y, dtype=dtype, device=device)
    _check_finite(cfg, dataset, x, y)
    return _Batch(cfg, specs, dataset, net, opt, dropout, x, y)


def _check_finite(cfg: Config, dataset: Any, x: torch.Tensor, y: torch.Tensor) -> None:
    """Data or targets that overflow (or are NaN) in the training dtype are named as such, before
    training: otherwise the loss is inf at once and the run reads "diverged at epoch 0"."""
    for what, host, tensor in (("inputs", dataset.x, x), ("targets", dataset.y, y)):
        if bool(torch.isfinite(tensor).all()):
            continue
        source = f"data.target={cfg.data.target!r}" if what == "targets" and cfg.data.source == "synthetic" \
            else f"data.source={cfg.data.source!r}"
        if np.isfinite(np.asarray(host, dtype=np.float64)).all():
            big = float(np.abs(np.asarray(host, dtype=np.float64)).max())
            raise ConfigError(f"{source}: the {what} overflow {cfg.train.dtype} (largest |value| {big:.3g}): "
                              "use train.dtype=float64 or a smaller target")
        raise ConfigError(f"{source}: the {what} hold NaN or inf values (an overflow or a pole in the "
                          "data range): change the target or data.low/data.high")


def _with_run_count(cfg: Config, runs: int) -> Config:
    """A copy of cfg whose per-run lists make `runs` runs, for the memory estimate of a subset."""
    sized = copy.deepcopy(cfg)
    sized.train.seeds = list(range(runs))
    sized.model.init_std, sized.train.lr = sized.model.init_std[:1], sized.train.lr[:1]
    sized.train.weight_decay, sized.train.momentum = sized.train.weight_decay[:1], sized.train.momentum[:1]
    sized.model.dropout = sized.model.dropout[:1]
    return sized


def _run_batch(cfg: Config, out: Path | None, progress: Any, saved: dict | None,
               runs: list[RunSpec] | None = None) -> RunResult:
    t, b = cfg.train, _build(cfg, runs)
    outer = progress if hasattr(progress, "update") else None  # a sweep's bar counts our epochs
    recorder = SnapshotRecorder(snapshot_epochs(t.snapshots, t.epochs), t.epochs,
                                thinned_neurons(b.net.arch.width, t.snapshot_neurons))
    state, before, resumed_at = None, 0.0, []
    if saved is not None:
        state = restore_checkpoint(saved, b.net, b.opt, b.dropout, recorder)
        before, resumed_at = saved["seconds"], saved["resumed_at"] + [state.epoch]
    show = sys.stderr.isatty() if progress is None else progress
    writer = provenance()  # before the clock starts: it is not training
    start = time.perf_counter()

    def save(loop_state, optimizer, drop) -> None:
        write_checkpoint(checkpoint_path(out), cfg.to_dict(), b.net.flat, optimizer.state_dict(),
                         drop.state_dict() if drop is not None else None, loop_state,
                         before + time.perf_counter() - start, resumed_at, writer)

    with StopRequests() as stop, tqdm(total=t.epochs, initial=state.epoch if state else 0,
                                      disable=not show or outer is not None, unit="epoch", leave=False,
                                      desc=f"{cfg.name}: {len(b.specs)} runs", mininterval=0.5) as bar:
        outcome = train_batch(
            b.net, b.x, b.y, b.specs, optimizer=b.opt, epochs=t.epochs, dropout=b.dropout, state=state,
            snapshot_at=snapshot_epochs(t.snapshots, t.epochs), eps=t.eps, progress=outer or bar,
            checkpoint=save if out is not None else None, checkpoint_seconds=t.checkpoint_seconds,
            should_stop=stop, recorder=recorder,
        )
    seconds = before + time.perf_counter() - start
    common = {"batch_runs": len(b.specs), "device": str(b.net.flat.device), "dtype": t.dtype,
              "optimizer": t.optimizer, "last_epoch": outcome.last_epoch,
              "seconds": seconds, "provenance": writer}
    if resumed_at:
        common["resumed_at"] = resumed_at
    runs = [_make_run(cfg, spec, r, outcome, b.dataset, common) for r, spec in enumerate(b.specs)]
    result = RunResult(cfg, runs, out, seconds)
    if out is not None:
        _write_batch(result, cfg, common)
        if not outcome.interrupted:   # complete: nothing left to resume
            checkpoint_path(out).unlink(missing_ok=True)
    if stop.requested is not None and not outcome.interrupted:
        # the signal came after the trainer's last look (in the batch's last epoch, or as it
        # ended): the batch is complete (and written), and whoever called -- a sweep, reproduce,
        # the user's script -- must stop as a signal during the batch would have made it
        raise StoppedAfterBatch(f"stopped by {signal.Signals(stop.requested).name} as the batch ended"
                                + (f"; its records are complete in {out}" if out is not None else ""), result)
    return result


def run_config(cfg: Config, data, spec: RunSpec) -> Config:
    """The config of one run of a batch: `cfg` with `data` (the data set's own DataConfig) and
    the run's single values of the per-run keys, every list its own copy.

    Equals ``Config.from_dict`` of the edited ``cfg.to_dict()`` (tested), at a fraction of its
    cost: nothing is re-checked that the batch's config passed (a run's values are among its).
    """
    return Config(name=cfg.name, data=_copied(data),
                  model=_copied(cfg.model, init_std=[spec.init_std], dropout=[spec.dropout]),
                  train=_copied(cfg.train, seeds=[spec.seed], lr=[spec.lr],
                                weight_decay=[spec.weight_decay], momentum=[spec.momentum]))


def _copied(section: Any, **changes: Any) -> Any:
    """dataclasses.replace(section, **changes) with copies of the lists and dicts it keeps."""
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if f.name not in changes and isinstance(value, list | dict):
            changes[f.name] = copy.deepcopy(value)
    return dataclasses.replace(section, **changes)


def _make_run(cfg: Config, spec: RunSpec, r: int, outcome: BatchOutcome, dataset, common: dict) -> Run:
    """Run r of a finished batch (its snapshots are views into the batch's arrays)."""
    run_cfg = run_config(cfg, dataset.config, spec)
    bad = outcome.diverged_epoch[r]
    arch = Architecture.from_config(cfg.model, cfg.data.d)
    snaps = outcome.snapshots
    epochs, weights = _run_slice(arch, snaps.epochs, snaps.layers, r, bad, snaps.neurons)
    full_epochs, full = _run_slice(arch, snaps.full_epochs, snaps.full_layers, r, bad, None)
    loss = outcome.loss[:, r]
    status = "diverged" if bad is not None else ("interrupted" if outcome.interrupted else "complete")
    return Run(run_cfg, spec, epochs, weights, loss, dataset.x, dataset.y,
               status=status, initial_stage_epoch=initial_stage_end(loss), diverged_epoch=bad,
               meta=dict(common), neurons=snaps.neurons, full_epochs=full_epochs, full_weights=full)


def _run_slice(arch: Architecture, epochs: np.ndarray, layers: list[np.ndarray], r: int,
               bad: int | None, neurons: np.ndarray | None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Run r's snapshots (views, no copy) of a batch's (R, S, rows, cols) arrays; a diverged
    run keeps the epochs before `bad`."""
    if not layers:  # interrupted before the first snapshot
        shapes = [(len(neurons) if neurons is not None and k < arch.depth else rows, cols)
                  for k, (rows, cols) in enumerate(arch.shapes)]
        return epochs, {name: np.zeros((0, *shape)) for name, shape in zip(arch.names, shapes, strict=True)}
    if bad is None:
        return epochs, {name: layer[r] for name, layer in zip(arch.names, layers, strict=True)}
    keep = epochs < bad
    return epochs[keep], {name: layer[r][keep] for name, layer in zip(arch.names, layers, strict=True)}


def _write_batch(result: RunResult, cfg: Config, common: dict) -> None:
    out = result.out
    assert out is not None
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "config.json", cfg.to_dict())
    write_runs(result.runs, [out / run_name(cfg, spec) for spec in run_specs(cfg)])
    atomic_write_json(out / "batch.json", {
        "name": cfg.name,
        "runs": [{"dir": run.path.name, **run.spec.to_dict(), "status": run.status,
                  "initial_stage_epoch": run.initial_stage_epoch,
                  "diverged_epoch": run.diverged_epoch,
                  "final_loss": _finite(run.loss[common["last_epoch"]])} for run in result.runs],
        **common,
    })


def _finite(value: float) -> float | None:
    """JSON has no NaN: a diverged run's loss is recorded as null."""
    return float(value) if np.isfinite(value) else None
