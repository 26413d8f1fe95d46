"""Training: the config tree, architectures, optimizers, data, and the batched trainer.

Public: ``condlab.train``/``resume``/``preset``/``Config``... (re-exported by ``condlab``);
``register_optimizer`` and ``register_architecture`` add an optimizer or architecture in one file.
"""

from .._lazy import exports

# name -> the private module that defines it; imported on first use (no import cost, no cycles)
_EXPORTS = {
    "Optimizer": "._optim",
    "register_architecture": "._arch",
    "register_optimizer": "._optim",
    "ACTIVATION_ALIASES": "._checks",
    "NAME_RULE": "._checks",
    "name_problem": "._checks",
    "Architecture": "._models",
    "BatchedNet": "._models",
    "Config": "._config",
    "ConfigError": "._tree",
    "DataConfig": "._config",
    "DatasetMissing": "._datasets",
    "Dropout": "._dropout",
    "ENV_VAR": "._datasets",
    "FCHead": "._cnn",
    "FCNet": "._models",
    "FullyConnected": "._arch",
    "Hyper": "._optim",
    "ModelConfig": "._config",
    "Adam": "._optim",
    "AdamW": "._optim",
    "PRESETS": "._presets",
    "Residual": "._arch",
    "TrainConfig": "._config",
    "TrainingWarning": "._trainer",
    "initial_stage_end": "._trainer",
    "init_weights": "._models",
    "layer_names": "._shapes",
    "layer_shapes": "._shapes",
    "assign_key": "._tree",
    "augment": "._models",
    "calibrate_batchnorm": "._cnn",
    "coerce": "._tree",
    "data_root": "._datasets",
    "extract_features": "._cnn",
    "fast_path_gap": "._cnn",
    "get_optimizer": "._optim",
    "load_cifar10": "._datasets",
    "load_mnist": "._datasets",
    "make_cifar_net": "._cnn",
    "make_dataset": "._data",
    "preset": "._presets",
    "read_checkpoint": "._checkpoint",
    "StoppedAfterBatch": "._checkpoint",
    "resume": "._api",
    "run_config": "._api",
    "snapshot_epochs": "._config",
    "train": "._api",
    "train_batch": "._trainer",
    "resolve_device": "._api",
    "train_head": "._cnn",
    "type_hints": "._tree",
    "validate": "._config",
}

# the public API of this package; the other names of _EXPORTS serve condlab's other subpackages
__all__ = [
    "Architecture", "Optimizer", "register_architecture", "register_optimizer", "Config",
    "ConfigError", "DataConfig", "FCNet", "ModelConfig", "TrainConfig", "TrainingWarning", "preset",
    "resume", "train",
]

__getattr__, __dir__ = exports(__name__, _EXPORTS)
