"""Fast paths of the training step, each registered for the concrete classes it was written for.

``CONDLAB_REFERENCE=1`` switches every one of them off (the reference path runs everywhere).
"""

from .._lazy import exports

# name -> the private module that defines it; imported on first use (no import cost, no cycles)
_EXPORTS = {
    "FusedAdam": "._fused",
    "OneLayerStep": "._cpu_step",
    "SERIAL_MAX": "._fused",
    "WideStep": "._wide_step",
    "bmm_into": "._cpu",
    "in_parallel": "._cpu",
    "numpy_bmm": "._cpu",
    "split_ranges": "._cpu",
    "tanh_into": "._cpu",
    "tanh_slope_into": "._cpu",
    "torch_in_ranges": "._cpu",
}

# the public API of this package; the other names of _EXPORTS serve condlab's other subpackages
__all__ = []

__getattr__, __dir__ = exports(__name__, _EXPORTS)
