"""One typed config tree for a batch of training runs, saved as JSON beside every result.

Conventions (written down once, here and in docs/conventions.md):

* ``model.init_std`` is the STANDARD DEVIATION of the Gaussian initialization of every
  parameter. The paper's ``N(0, var)`` with ``var = 0.005**2`` is ``init_std = 0.005``.
* Sweeps: ``train.seeds``, ``model.init_std``, ``train.lr``, ``train.weight_decay``,
  ``train.momentum`` and ``model.dropout`` are lists; the batch trains every combination
  (in that order), all runs as one batched computation.
* ``train.snapshots`` is a list of epochs, or ``"log:K"`` (K log-spaced epochs between 1
  and ``epochs``), or ``"every:K"`` (every K epochs). Epoch 0 (the initialization) and the
  last epoch are always recorded. "Epoch e" means the parameters after e full-batch updates.
  ``train.snapshot_neurons = K > 0`` thins them for wide layers: K fixed hidden neurons at every
  snapshot, every weight only at epoch 0 and the last epoch (see ``condlab.records._snapshots``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ._tree import ConfigError, _as_dict, _build, _plain_tree, _yaml_problem, assign_key

DTYPES = ("float32", "float64")
SOURCES = ("synthetic", "mnist", "digits")
REAL_D = {"mnist": 784, "digits": 64}  # input dimension of the real data sets
MAX_SNAPSHOTS = 100_000


@dataclass
class DataConfig:
    """Synthetic training set: n points uniform in the box [low, high]^d, targets from `target`."""

    n: int = 80
    d: int = 5
    low: float = -4.0
    high: float = 2.0
    # "sine_sum": sum_k amplitude*sin(frequency*x_k + phase) (Fig. 3, Fig. 4);
    # "fig5": sin(3x) + sin(6x)/2 (1-D, Figs. 5-6); anything else: an expression in
    # x1..xd (or x when d = 1), e.g. "x1**2 - sin(x2)".
    target: str | list[str] = "sine_sum"  # a list: one expression per output (model.d_out)
    amplitude: float = 3.5
    frequency: float = 5.0
    phase: float = 1.0
    seed: int = 0
    # The paper: "the sampling range and the target function are chosen randomly".
    # When true, low/high and amplitude/frequency/phase are drawn from `seed`.
    randomize: bool = False
    # "synthetic" (the fields above), or a real data set with one-hot targets for the MSE loss
    # (the two-layer paper's MNIST experiment): "mnist" (IDX files under data_dir, else
    # $CONDLAB_DATA) or "digits" (scikit-learn's bundled 8x8 digits, an offline stand-in).
    source: str = "synthetic"
    data_dir: str = ""
    limit: int = 0  # use the first `limit` samples of a real data set (0: all)


@dataclass
class ModelConfig:
    """A d-m-...-m-d_out network; `activations` has one entry per hidden layer (or one for all)."""

    arch: str = "fc"
    width: int = 50
    depth: int = 1
    activations: list[str] = field(default_factory=lambda: ["tanh"])
    d_out: int = 1
    init_std: list[float] = field(default_factory=lambda: [0.005])
    output_bias: bool = True
    # probability q of zeroing each hidden unit in training (nn.Dropout semantics, kept units
    # scaled by 1/(1-q)); per run, so a list sweeps it. Off for the recorded loss and analysis.
    dropout: list[float] = field(default_factory=lambda: [0.0])

    def layer_activations(self) -> list[str]:
        """One activation per hidden layer: a single entry stands for every layer."""
        return self.activations * self.depth if len(self.activations) == 1 else list(self.activations)


@dataclass
class TrainConfig:
    """Full-batch training on R = (1/2n) sum_i |f(x_i) - y_i|^2 (eq. 3)."""

    # a registered optimizer (condlab.training._optim): adam, adamw, sgd, gd
    optimizer: str = "adam"
    lr: list[float] = field(default_factory=lambda: [1e-3])
    # per run (lists sweep them): L2 for adam/sgd/gd, decoupled for adamw; sgd's momentum
    weight_decay: list[float] = field(default_factory=lambda: [0.0])
    momentum: list[float] = field(default_factory=lambda: [0.0])
    nesterov: bool = False
    epochs: int = 100
    beta1: float = 0.9
    beta2: float = 0.999
    # Adam's eps; at small init gradients scale like init_std**p and can fall below 1e-8,
    # which silently turns Adam into momentum descent (a run warns when that happens).
    eps: float = 1e-8
    dtype: str = "float32"
    device: str = "cpu"
    snapshots: list[int] | str = "log:30"
    # Wide layers: K > 0 records only K fixed hidden neurons (rows evenly spread over 0..m-1)
    # at every snapshot, and every weight in full at epoch 0 and the last epoch (0: all rows).
    snapshot_neurons: int = 0
    seeds: list[int] = field(default_factory=lambda: [0])
    # with an output folder, a checkpoint to resume from is written this often (0: never)
    checkpoint_seconds: float = 60.0


@dataclass
class Config:
    """The whole tree: `name`, `data`, `model`, `train`."""

    name: str = "run"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Config:
        """Build and validate a config from nested mappings; unknown keys are errors.

        Any Mapping works (OmegaConf's DictConfig, a Hydra config): it is copied into plain
        dicts and lists first (``_plain_tree``)."""
        return validate(_build(cls, _plain_tree(raw), prefix=""))

    @classmethod
    def from_file(cls, path: str | Path) -> Config:
        """Read a YAML or JSON config file."""
        path = Path(path)
        if not path.is_file():
            what = "is a folder, not a file" if path.is_dir() else "does not exist"
            raise ConfigError(f"config file '{path}' {what}")
        try:
            raw = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:  # tags such as !!python/object are refused here too
            raise ConfigError(f"config file '{path}' is not valid YAML: {_yaml_problem(err)}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"config file '{path}' is not UTF-8 text") from None
        if not raw and raw is not False:  # an empty file (or `{}`) would train the defaults unasked
            raise ConfigError(f"config file '{path}' is empty: give a mapping of config keys "
                              "(`condlab config` prints them), or leave the file out for the defaults")
        if not isinstance(raw, dict):
            raise ConfigError(f"config file '{path}' must hold a mapping, got {type(raw).__name__}")
        return cls.from_dict(raw)

    def with_overrides(self, assignments: list[str]) -> Config:
        """Apply `key=value` overrides (dotted keys, YAML values), checked against the tree."""
        raw = self.to_dict()
        for item in assignments:
            key, sep, text = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"override '{item}' is not of the form key=value")
            try:
                value = yaml.safe_load(text) if text.strip() else ""
            except yaml.YAMLError as err:
                raise ConfigError(f"--set {item}: the value is not valid YAML: "
                                  f"{_yaml_problem(err)}") from None
            assign_key(raw, key.strip(), value)
        return Config.from_dict(raw)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def validate(cfg: Config) -> Config:
    """Check ranges and names; returns `cfg` unchanged (a single activation stays one entry)."""
    from ._checks import NAME_RULE, is_builtin_activation, name_problem, target_problem

    problem = name_problem(cfg.name)  # a folder is made from it: a name, never a path
    _check(problem is None, f"name={cfg.name!r} is not accepted ({problem}): {NAME_RULE}")
    d, m, t = cfg.data, cfg.model, cfg.train
    for key, value in [("data.n", d.n), ("data.d", d.d), ("model.width", m.width),
                       ("model.depth", m.depth), ("model.d_out", m.d_out),
                       ("train.epochs", t.epochs)]:
        _check(value > 0, f"{key}={value} is not accepted: it must be a positive integer")
    _check(d.source in SOURCES,
           f"data.source='{d.source}' is not accepted: choose one of {', '.join(SOURCES)}")
    _check(d.limit >= 0, f"data.limit={d.limit} is not accepted: it must be >= 0 (0 = all)")
    _check(d.high > d.low, f"data.low={d.low}, data.high={d.high}: need low < high")
    if d.source == "synthetic":  # one target, or one expression per output
        for target in d.target if isinstance(d.target, list) else [d.target]:
            problem = target_problem(target, d.d)
            _check(problem is None, str(problem))
    archs = _architecture_names(m.arch)
    _check(m.arch in archs, f"model.arch='{m.arch}' is not accepted: choose one of {', '.join(archs)}")
    _check(len(m.activations) in (1, m.depth),
           f"model.activations has {len(m.activations)} entries for model.depth={m.depth}: "
           "give one per hidden layer, or a single one for all")
    for name in m.activations:
        if is_builtin_activation(name):
            continue  # known (and trainable) without importing torch and sympy
        from ..activations import check_trainable, get_activation

        try:
            check_trainable(get_activation(name))
        except ValueError as err:
            raise ConfigError(f"model.activations: {err}") from None
    for s in m.init_std:
        _check(s > 0, f"model.init_std={s} is not accepted: it must be > 0 (a standard deviation)")
    for lr in t.lr:
        _check(lr > 0, f"train.lr={lr} is not accepted: it must be > 0")
    _check_optimizer(t)
    for q in m.dropout:
        _check(0 <= q < 1, f"model.dropout={q} is not accepted: it must lie in [0, 1)")
    _check(t.checkpoint_seconds >= 0,
           f"train.checkpoint_seconds={t.checkpoint_seconds} is not accepted: it must be >= 0 (0: never)")
    _check(t.dtype in DTYPES, f"train.dtype='{t.dtype}' is not accepted: choose one of {', '.join(DTYPES)}")
    _check(0 <= t.beta1 < 1 and 0 <= t.beta2 < 1, "train.beta1 and train.beta2 must lie in [0, 1)")
    _check(t.eps >= 0, f"train.eps={t.eps} is not accepted: it must be >= 0")
    _check(0 <= t.snapshot_neurons <= m.width, f"train.snapshot_neurons={t.snapshot_neurons} is not "
           f"accepted: it must lie in [0, model.width={m.width}] (0 records every neuron)")
    _check(len(set(t.seeds)) == len(t.seeds), f"train.seeds={t.seeds} has repeated seeds")
    for key, values in (("model.init_std", m.init_std), ("model.dropout", m.dropout), ("train.lr", t.lr),
                        ("train.weight_decay", t.weight_decay), ("train.momentum", t.momentum)):
        # each value is one run per seed, named by its value: a repeat would be trained twice
        _check(len(set(values)) == len(values),
               f"{key}={values} has repeated values (after reading them as numbers): give each once")
    if d.source in REAL_D:
        _check(d.d in (DataConfig.d, REAL_D[d.source]),
               f"data.d={d.d} is not accepted with data.source='{d.source}': its inputs have "
               f"{REAL_D[d.source]} values; leave data.d unset (or {REAL_D[d.source]})")
    snapshot_epochs(t.snapshots, t.epochs)  # raises on a bad spec
    return cfg


def _check_optimizer(t: TrainConfig) -> None:
    uses = _optimizer_uses(t.optimizer)
    _check(isinstance(uses, tuple),
           f"train.optimizer='{t.optimizer}' is not accepted: choose one of {', '.join(uses)}")
    for wd in t.weight_decay:
        _check(wd >= 0, f"train.weight_decay={wd} is not accepted: it must be >= 0")
    for mu in t.momentum:
        _check(0 <= mu < 1, f"train.momentum={mu} is not accepted: it must lie in [0, 1)")
    _check("momentum" in uses or t.momentum == [0.0],
           f"train.momentum={t.momentum} is not used by train.optimizer='{t.optimizer}': "
           f"use sgd, or leave momentum at 0")
    _check(not t.nesterov or ("momentum" in uses and min(t.momentum) > 0),
           "train.nesterov=true needs train.optimizer=sgd and every train.momentum > 0")


def _architecture_names(name: str) -> tuple[str, ...]:
    """The accepted values of model.arch, importing the registry only for a name not built in."""
    from ._checks import BUILTIN_ARCHITECTURES

    if name in BUILTIN_ARCHITECTURES:
        return BUILTIN_ARCHITECTURES
    from ._arch import ARCHITECTURES

    return tuple(ARCHITECTURES)


def _optimizer_uses(name: str) -> tuple[str, ...] | list[str]:
    """The hyper-parameters optimizer `name` reads (a tuple), or the accepted names (a list)."""
    from ._checks import BUILTIN_OPTIMIZERS

    if name in BUILTIN_OPTIMIZERS:
        return BUILTIN_OPTIMIZERS[name]
    from ._optim import OPTIMIZERS

    return tuple(OPTIMIZERS[name].uses) if name in OPTIMIZERS else list(OPTIMIZERS)


def snapshot_epochs(spec: list[int] | str, epochs: int) -> list[int]:
    """Resolve a snapshot spec to a sorted list of epochs in [0, epochs], always with 0 and epochs."""
    if isinstance(spec, str):
        kind, _, count = spec.partition(":")
        if kind not in ("log", "every") or not count.isdigit() or int(count) < 1:
            raise ConfigError(
                f"train.snapshots='{spec}' is not accepted: give a list of epochs, "
                "'log:K' (K log-spaced epochs) or 'every:K' (every K epochs)"
            )
        k = int(count)
        many = epochs // k + 1 if kind == "every" else k
        if many > MAX_SNAPSHOTS:
            raise ConfigError(f"train.snapshots='{spec}' asks for {many} snapshots with "
                              f"train.epochs={epochs}; at most {MAX_SNAPSHOTS} are accepted")
        if kind == "every":
            chosen = set(range(0, epochs + 1, k))
        else:
            chosen = {round(epochs ** (i / max(k - 1, 1))) for i in range(k)}
    else:
        bad = [e for e in spec if not 0 <= e <= epochs]
        if bad:
            raise ConfigError(
                f"train.snapshots has epoch {bad[0]} outside [0, train.epochs={epochs}]"
            )
        chosen = set(spec)
    return sorted(chosen | {0, epochs})
