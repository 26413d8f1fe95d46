"""condlab: measure condensation of neural-network input weights at small initialization.

Public API (everything else lives in private modules and may change):

    condlab.train(config, out=...)   -> RunResult     batched training, run records on disk
    condlab.resume(out)              -> RunResult     continue a killed batch from its checkpoint
    condlab.sweep(spec, out=...)     -> SweepResult   a grid of runs, batched, resumable, one table
    condlab.load_run(path)           -> Run           read a run directory back
    condlab.preset("fig3")           -> Config        the paper's caption settings
    condlab.get_activation("xtanh")  -> Activation    with its computed multiplicity p
    condlab.reduce(run_or_net)       -> Reduction     condensed groups merged into single neurons
    condlab.embed.split(net, j, a)   -> FCNet         one-step splitting embedding (wider, same output)
    condlab.inspect(model_or_state_dict, layers="fc*") -> DataFrame   condensation per layer
    condlab.Tracker(model, every=50, out=DIR)          -> .step(epoch, loss) in your own loop
"""

__version__ = "0.1.0"

from ._activations import (
    Activation,
    activation_table,
    get_activation,
    list_activations,
    register_activation,
)
from ._api import resume, train
from ._config import Config, ConfigError, DataConfig, ModelConfig, TrainConfig
from ._data import Dataset, make_dataset
from ._inspect import inspect
from ._layers import extract_layers
from ._models import Architecture, BatchedNet, FCNet, init_weights
from ._presets import PRESETS, preset
from ._records import Run, RunResult, load_run
from ._reduce import Reduction, effective_rank, reduce
from ._sweep import SweepResult, sweep
from ._tracker import Tracker, lightning_callback
from ._training import TrainingWarning, initial_stage_end

__all__ = [
    "Activation",
    "Architecture",
    "BatchedNet",
    "Config",
    "ConfigError",
    "DataConfig",
    "Dataset",
    "FCNet",
    "ModelConfig",
    "PRESETS",
    "Reduction",
    "Run",
    "RunResult",
    "SweepResult",
    "TrainConfig",
    "Tracker",
    "TrainingWarning",
    "__version__",
    "activation_table",
    "effective_rank",
    "get_activation",
    "extract_layers",
    "init_weights",
    "initial_stage_end",
    "inspect",
    "lightning_callback",
    "list_activations",
    "load_run",
    "make_dataset",
    "preset",
    "reduce",
    "register_activation",
    "resume",
    "sweep",
    "train",
]
