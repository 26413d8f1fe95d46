"""``condlab.train``: resolve a config into runs, train them as one batch, write the records."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from ._config import Config, ConfigError, snapshot_epochs
from ._data import make_dataset
from ._io import atomic_write_json, provenance
from ._models import Architecture, BatchedNet, init_weights
from ._records import Run, RunResult, RunSpec, write_run
from ._training import BatchOutcome, initial_stage_end, train_batch


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
    """Every (seed, init_std, lr) combination of the config, in a fixed order."""
    return [RunSpec(seed, std, lr) for seed in cfg.train.seeds
            for std in cfg.model.init_std for lr in cfg.train.lr]


def run_name(cfg: Config, spec: RunSpec) -> str:
    """Directory name of a run: the seed, plus whatever else the batch sweeps."""
    name = f"seed{spec.seed}"
    if len(cfg.model.init_std) > 1:
        name += f"-std{_number(spec.init_std)}"
    if len(cfg.train.lr) > 1:
        name += f"-lr{_number(spec.lr)}"
    return name


def _number(value: float) -> str:
    """Short form (%g) when it names the value exactly, else repr: distinct values, distinct names."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


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
    progress: bool | None = None,
) -> RunResult:
    """Train every run of `config` as one batched computation; write run directories to `out`.

    Returns the runs in memory either way. `progress` shows a bar (default: when stderr is a
    terminal). Runs that diverge or an interrupted batch are recorded with their status.
    """
    from ._guards import check_memory, check_writable

    cfg = _as_config(config)
    t = cfg.train
    specs = run_specs(cfg)
    if out is not None:
        check_writable(Path(out))  # before any training, not after it
    synthetic = cfg.data.source == "synthetic"
    if synthetic:  # sizes known before sampling: refuse what cannot fit before allocating it
        check_memory(cfg, cfg.data.n, cfg.data.d, cfg.model.d_out)
    dataset = make_dataset(cfg.data)
    if not synthetic:
        check_memory(cfg, *dataset.x.shape, dataset.y.shape[1])
    if dataset.y.shape[1] != cfg.model.d_out:
        raise ConfigError(f"model.d_out={cfg.model.d_out}, but data.source='{cfg.data.source}' "
                          f"has {dataset.y.shape[1]} outputs: set model.d_out={dataset.y.shape[1]}")
    arch = Architecture.from_config(cfg.model, dataset.config.d)
    device = resolve_device(t.device)
    dtype = getattr(torch, t.dtype)
    net = BatchedNet(arch, len(specs), dtype, device)
    for r, spec in enumerate(specs):
        net.load(r, init_weights(arch, spec.seed, spec.init_std))
    x = torch.as_tensor(dataset.x, dtype=dtype, device=device)
    y = torch.as_tensor(dataset.y, dtype=dtype, device=device)
    show = sys.stderr.isatty() if progress is None else progress
    start = time.perf_counter()
    with tqdm(total=t.epochs, disable=not show, unit="epoch", leave=False,
              desc=f"{cfg.name}: {len(specs)} runs", mininterval=0.5) as bar:
        outcome = train_batch(
            net, x, y, specs, optimizer=t.optimizer, epochs=t.epochs,
            snapshot_at=snapshot_epochs(t.snapshots, t.epochs), beta1=t.beta1, beta2=t.beta2,
            eps=t.eps, progress=bar,
        )
    seconds = time.perf_counter() - start
    common = {"batch_runs": len(specs), "device": str(device), "dtype": t.dtype,
              "optimizer": t.optimizer, "last_epoch": outcome.last_epoch,
              "seconds": seconds, "provenance": provenance()}
    data_cfg = dataclasses.asdict(dataset.config)
    runs = [_make_run(cfg, data_cfg, spec, r, outcome, dataset, common) for r, spec in enumerate(specs)]
    result = RunResult(cfg, runs, Path(out) if out is not None else None, seconds)
    if out is not None:
        _write_batch(result, cfg, common)
    return result


def _make_run(cfg: Config, data_cfg: dict, spec: RunSpec, r: int, outcome: BatchOutcome,
              dataset, common: dict) -> Run:
    raw = cfg.to_dict()
    raw["data"] = data_cfg
    raw["train"]["seeds"], raw["train"]["lr"] = [spec.seed], [spec.lr]
    raw["model"]["init_std"] = [spec.init_std]
    run_cfg = Config.from_dict(raw)
    bad = outcome.diverged_epoch[r]
    keep = outcome.epochs < bad if bad is not None else np.ones(len(outcome.epochs), bool)
    names = Architecture.from_config(cfg.model, cfg.data.d).names
    weights = {name: np.stack([s[r] for s in layer])[keep] if len(layer) else np.zeros((0,))
               for name, layer in zip(names, outcome.snapshots, strict=True)}
    loss = outcome.loss[:, r]
    status = "diverged" if bad is not None else ("interrupted" if outcome.interrupted else "complete")
    return Run(run_cfg, spec, outcome.epochs[keep], weights, loss, dataset.x, dataset.y,
               status=status, initial_stage_epoch=initial_stage_end(loss), diverged_epoch=bad,
               meta=dict(common))


def _write_batch(result: RunResult, cfg: Config, common: dict) -> None:
    out = result.out
    assert out is not None
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "config.json", cfg.to_dict())
    for spec, run in zip(run_specs(cfg), result.runs, strict=True):
        write_run(run, out / run_name(cfg, spec))
    atomic_write_json(out / "batch.json", {
        "name": cfg.name,
        "runs": [{"dir": run.path.name, "seed": run.spec.seed, "lr": run.spec.lr,
                  "init_std": run.spec.init_std, "status": run.status,
                  "initial_stage_epoch": run.initial_stage_epoch,
                  "diverged_epoch": run.diverged_epoch,
                  "final_loss": _finite(run.loss[common["last_epoch"]])} for run in result.runs],
        **common,
    })


def _finite(value: float) -> float | None:
    """JSON has no NaN: a diverged run's loss is recorded as null."""
    return float(value) if np.isfinite(value) else None
