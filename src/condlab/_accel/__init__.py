"""Fast paths: each computes what a reference computation of condlab computes, faster, for the
concrete classes it was written for, and registers for them (``_registry``).

The reference asks ``find(protocol, type(obj), ...)`` and runs its own code on None.
``CONDLAB_REFERENCE=1`` switches every fast path off; a fast path that fails is switched off
with one ``AccelWarning``. docs/architecture.md ("Fast paths") lists them with their gains.
"""

from .._lazy import exports

# name -> the private module that defines it; imported on first use (no import cost, no cycles)
_EXPORTS = {
    "AccelWarning": "._registry",
    "ENV_VAR": "._registry",
    "FastPath": "._registry",
    "MODULES": "._registry",
    "find": "._registry",
    "in_parallel": "._cpu",
    "paths": "._registry",
    "reference": "._registry",
    "reference_only": "._registry",
    "register": "._registry",
    "split_ranges": "._cpu",
}

# the public API of this package; the other names of _EXPORTS serve condlab's other subpackages
__all__ = []

__getattr__, __dir__ = exports(__name__, _EXPORTS)
