"""Seeded synthetic training sets for the paper's experiments.

Inputs are sampled uniformly from the box [low, high]^d (Sec. 4.1). Targets:

* ``sine_sum``: f*(x) = sum_k A sin(w x_k + phi)   (Fig. 3: A=3.5, w=5, phi=1; Fig. 4: 4, 12, 1)
* ``fig5``:     f*(x) = sin(3x) + sin(6x)/2          (Figs. 5-6, d = 1)
* an expression in x1..xd (or x when d = 1), parsed safely (no eval).

With ``randomize=True`` the box and (A, w, phi) are drawn from the data seed, the paper's
"sampling range and target function chosen randomly".
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from ._checks import target_variables
from ._config import ConfigError, DataConfig


@dataclass(frozen=True)
class Dataset:
    """Training inputs x (n, d) and targets y (n, d_out) in float64, with the resolved config."""

    x: np.ndarray
    y: np.ndarray
    config: DataConfig


def _randomized(cfg: DataConfig, rng: np.random.Generator) -> DataConfig:
    # Ranges and frequencies of the order the paper uses; recorded in the resolved config.
    low = float(rng.uniform(-5.0, -1.0))
    high = float(low + rng.uniform(2.0, 6.0))
    return replace(
        cfg,
        low=low,
        high=high,
        amplitude=float(rng.uniform(1.0, 5.0)),
        frequency=float(rng.uniform(1.0, 12.0)),
        phase=float(rng.uniform(-np.pi, np.pi)),
        randomize=False,
    )


def target_values(cfg: DataConfig, x: np.ndarray) -> np.ndarray:
    """Evaluate the target on x (n, d) -> (n, 1), float64; a list of targets -> (n, len(list))."""
    if isinstance(cfg.target, list):  # one output per expression (d_out > 1)
        return np.concatenate([target_values(replace(cfg, target=t), x) for t in cfg.target], axis=1)
    if cfg.target == "sine_sum":
        return (cfg.amplitude * np.sin(cfg.frequency * x + cfg.phase)).sum(1, keepdims=True)
    if cfg.target == "fig5":
        if x.shape[1] != 1:
            raise ConfigError(f"data.target='fig5' is one-dimensional, but data.d={x.shape[1]}")
        return np.sin(3 * x) + np.sin(6 * x) / 2
    from ..activations import expression_to_torch, parse_expression

    names = target_variables(x.shape[1])
    fn = expression_to_torch(parse_expression(cfg.target, names), names)
    cols = [torch.from_numpy(x[:, 0])] * 2 if x.shape[1] == 1 else list(torch.from_numpy(x).T)
    out = torch.as_tensor(fn(*cols), dtype=torch.float64).expand(x.shape[0])
    return out.numpy().reshape(-1, 1).copy()


def _real(cfg: DataConfig) -> Dataset:
    """A real data set: inputs in [0, 1], one-hot targets (n, classes) for the MSE loss."""
    from ._datasets import data_root, load_digits_standin, load_mnist

    limit = cfg.limit or None
    if cfg.source == "mnist":
        x, labels = load_mnist(data_root(cfg.data_dir or None), "train", limit)
    else:
        x, labels = load_digits_standin()
        x, labels = x[:limit], labels[:limit]
    y = np.eye(int(labels.max()) + 1)[labels]
    return Dataset(x=x.astype(np.float64), y=y, config=replace(cfg, d=x.shape[1], n=len(x)))


def make_dataset(cfg: DataConfig) -> Dataset:
    """Sample the training set for a data config (seeded, reproducible across machines)."""
    if cfg.source != "synthetic":
        return _real(cfg)
    rng = np.random.default_rng(cfg.seed)
    if cfg.randomize:
        cfg = _randomized(cfg, rng)
    x = rng.uniform(cfg.low, cfg.high, size=(cfg.n, cfg.d))
    y = target_values(cfg, x)
    if not np.all(np.isfinite(y)):
        raise ConfigError(f"data.target='{cfg.target}' gives non-finite values on the sampled box")
    return Dataset(x=x, y=y, config=cfg)
