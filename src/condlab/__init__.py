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
    condlab.plot(W | model | run, epoch=None)          -> Figure   ordered cosine heat map(s), lines marked
    condlab.sweep(spec, out=DIR)     -> SweepResult   a grid of runs, batched, resumable, local or Ray
    condlab.register_executor(cls)   -> cls           class decorator: a condlab.Executor subclass for sweeps
    Config (DataConfig, ModelConfig, TrainConfig), ConfigError, Run, RunResult, FCNet,
    TrainingWarning, effective_rank, lightning_callback

Names are imported on first use (module ``__getattr__``), so ``import condlab`` and the CLI's
help do not pay for torch and sympy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import exports
from ._version import __version__

# public name -> the subpackage that exports it
_PUBLIC = {
    "Activation": ".activations",
    "get_activation": ".activations",
    "register_activation": ".activations",
    "resume": ".training",
    "train": ".training",
    "inspect": ".models",
    "FCNet": ".training",
    "Reduction": ".analysis",
    "effective_rank": ".analysis",
    "reduce": ".analysis",
    "Tracker": ".models",
    "lightning_callback": ".models",
    "plot": ".models",
    "Config": ".training",
    "ConfigError": ".training",
    "DataConfig": ".training",
    "ModelConfig": ".training",
    "TrainConfig": ".training",
    "preset": ".training",
    "Run": ".records",
    "RunResult": ".records",
    "load_run": ".records",
    "Executor": ".sweeps",
    "SweepResult": ".sweeps",
    "register_executor": ".sweeps",
    "sweep": ".sweeps",
    "TrainingWarning": ".training",
    "register_architecture": ".training",
    "register_optimizer": ".training",
}

__all__ = [  # _PUBLIC's names and the version (tests/test_imports.py checks they agree)
    "Activation", "Config", "ConfigError", "DataConfig", "Executor", "FCNet", "ModelConfig", "Reduction",
    "Run", "RunResult", "TrainConfig", "Tracker", "TrainingWarning", "__version__", "effective_rank",
    "get_activation", "inspect", "lightning_callback", "load_run", "plot", "preset", "reduce",
    "register_activation", "register_architecture", "register_executor", "register_optimizer", "resume",
    "SweepResult", "sweep", "train",
]

if TYPE_CHECKING:  # static tools see the names; at run time __getattr__ imports them on use
    from .activations import Activation, get_activation, register_activation
    from .analysis import Reduction, effective_rank, reduce
    from .models import Tracker, inspect, lightning_callback, plot
    from .records import Run, RunResult, load_run
    from .sweeps import Executor, SweepResult, register_executor, sweep
    from .training import (
        Config,
        ConfigError,
        DataConfig,
        FCNet,
        ModelConfig,
        TrainConfig,
        TrainingWarning,
        preset,
        register_architecture,
        register_optimizer,
        resume,
        train,
    )


# public subpackages, loaded on first use: `condlab.embed.split(...)`
_SUBMODULES = ("activations", "analysis", "embed", "models", "phase", "plotting", "records", "report",
               "reproduce", "sweeps", "training")


__getattr__, __dir__ = exports(__name__, _PUBLIC, _SUBMODULES)
