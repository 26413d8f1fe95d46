"""Activations and their multiplicity p (Definition 1), computed from the formula.
"""

from .._lazy import exports

# name -> the private module that defines it; imported on first use (no import cost, no cycles)
_EXPORTS = {
    "Activation": "._activations",
    "activation_table": "._activations",
    "autograd_grad": "._activations",
    "check_trainable": "._activations",
    "expression_to_torch": "._expressions",
    "fused_tanh": "._activations",
    "get_activation": "._activations",
    "list_activations": "._activations",
    "parse_expression": "._expressions",
    "register_activation": "._activations",
}

# the public API of this package; the other names of _EXPORTS serve condlab's other subpackages
__all__ = ["Activation", "get_activation", "register_activation"]

__getattr__, __dir__ = exports(__name__, _EXPORTS)
