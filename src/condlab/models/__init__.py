"""Any PyTorch model: the layer adapter, ``condlab.inspect`` and the ``Tracker`` (docs/inspect.md).
"""

from .._lazy import exports

# name -> the private module that defines it; imported on first use (no import cost, no cycles)
_EXPORTS = {
    "Tracker": "._tracker",
    "external_run_figures": "._inspect",
    "heatmap_rows": "._sample",
    "inspect": "._inspect",
    "inspect_model": "._inspect",
    "is_state_dict": "._layers",
    "lightning_callback": "._lightning",
    "plot": "._plot",
    "run_inspect": "._inspect_cli",
    "write_analysis": "._tensorboard",
}

# the public API of this package; the other names of _EXPORTS serve condlab's other subpackages
__all__ = ["Tracker", "inspect", "lightning_callback", "plot"]

__getattr__, __dir__ = exports(__name__, _EXPORTS)
