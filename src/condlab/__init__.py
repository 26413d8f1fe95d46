"""condlab: measure condensation of neural-network input weights at small initialization.

Public API (everything else lives in private modules and may change):

    condlab.train(config, out=...)   -> RunResult     batched training, run records on disk
    condlab.resume(out)              -> RunResult     continue a killed batch from its checkpoint
    condlab.sweep(spec, out=...)     -> SweepResult   a grid of runs, batched, resumable, one table
    condlab.load_run(path)           -> Run           read a run directory back
    condlab.preset("fig3")           -> Config        the paper's caption settings
    condlab.get_activation("xtanh")  -> Activation    with its computed multiplicity p
    condlab.register_activation(name, "x**3*tanh(x)") -> Activation
    condlab.reduce(run_or_net)       -> Reduction     condensed groups merged into single neurons
    condlab.embed.split(net, j, a)   -> FCNet         one-step splitting embedding (wider, same output)
    condlab.phase.phase_diagram(spec, out=...) -> DiagramResult   the JMLR phase diagram via sweeps
    condlab.inspect(model_or_state_dict, layers="fc*") -> DataFrame   condensation per layer
    condlab.Tracker(model, every=50, out=DIR)          -> .step(epoch, loss) in your own loop
    condlab.sweep(spec, out=DIR)     -> SweepResult   a grid of runs, batched, resumable, local or Ray
    Config (DataConfig, ModelConfig, TrainConfig), ConfigError, Run, RunResult, FCNet,
    TrainingWarning, effective_rank, lightning_callback

Names are imported on first use (module ``__getattr__``), so ``import condlab`` and the CLI's
help do not pay for torch and sympy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

# public name -> the private module that defines it
_PUBLIC = {
    "Activation": "._activations",
    "get_activation": "._activations",
    "register_activation": "._activations",
    "resume": "._api",
    "train": "._api",
    "inspect": "._inspect",
    "FCNet": "._models",
    "Reduction": "._reduce",
    "effective_rank": "._reduce",
    "reduce": "._reduce",
    "Tracker": "._tracker",
    "lightning_callback": "._tracker",
    "Config": "._config",
    "ConfigError": "._config",
    "DataConfig": "._config",
    "ModelConfig": "._config",
    "TrainConfig": "._config",
    "preset": "._presets",
    "Run": "._records",
    "RunResult": "._records",
    "load_run": "._record_load",
    "SweepResult": "._sweep",
    "sweep": "._sweep",
    "TrainingWarning": "._training",
}

__all__ = [  # _PUBLIC's names and the version (tests/test_imports.py checks they agree)
    "Activation", "Config", "ConfigError", "DataConfig", "FCNet", "ModelConfig", "Reduction", "Run",
    "RunResult", "TrainConfig", "Tracker", "TrainingWarning", "__version__", "effective_rank",
    "get_activation", "inspect", "lightning_callback", "load_run", "preset", "reduce",
    "register_activation", "resume", "SweepResult", "sweep", "train",
]

if TYPE_CHECKING:  # static tools see the names; at run time __getattr__ imports them on use
    from ._activations import Activation, get_activation, register_activation
    from ._api import resume, train
    from ._config import Config, ConfigError, DataConfig, ModelConfig, TrainConfig
    from ._inspect import inspect
    from ._models import FCNet
    from ._presets import preset
    from ._record_load import load_run
    from ._records import Run, RunResult
    from ._reduce import Reduction, effective_rank, reduce
    from ._sweep import SweepResult, sweep
    from ._tracker import Tracker, lightning_callback
    from ._training import TrainingWarning


_SUBMODULES = ("analysis", "embed", "phase", "plotting", "reproduce")  # public: `condlab.embed.split(...)`


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name not in _PUBLIC:
        raise AttributeError(f"module 'condlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name], __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC, *_SUBMODULES})
