"""Config checks that need neither torch nor sympy: targets, and the built-in names of registries.

``condlab config`` and ``condlab presets`` validate configs without importing torch or sympy
(they must answer in a fraction of a second); only an expression typed by a user is parsed,
by ``_expressions``, and only then is sympy imported. ``_data`` and ``_activations`` take
their names from here. Architectures and optimizers are registries (``_arch``, ``_optim``):
their built-in entries are listed here too, and any other name imports the registry
(tests/test_imports.py checks that the lists agree).
"""

from __future__ import annotations

NAMED_TARGETS = ("sine_sum", "fig5")
# built-in activation names (``_activations._BUILTINS`` gives each a formula) and aliases
BUILTIN_ACTIVATIONS = ("tanh", "sigmoid", "softplus", "gelu", "silu", "relu", "leaky_relu",
                       "xtanh", "x2tanh")
ACTIVATION_ALIASES = {"swish": "silu", "x_tanh": "xtanh", "x2_tanh": "x2tanh"}
BUILTIN_ARCHITECTURES = ("fc", "residual")
# optimizer name -> the per-run hyper-parameters it reads (``_optim.Optimizer.uses``)
BUILTIN_OPTIMIZERS = {"adam": ("lr", "weight_decay"), "adamw": ("lr", "weight_decay"),
                      "sgd": ("lr", "weight_decay", "momentum"), "gd": ("lr", "weight_decay")}


def target_variables(d: int) -> list[str]:
    """Names of the input variables of a target expression; in 1-D both "x" and "x1" name it."""
    return ["x", "x1"] if d == 1 else [f"x{k + 1}" for k in range(d)]


def target_problem(target: str, d: int) -> str | None:
    """None if `target` is a named target or a valid expression in d inputs, else a one-line reason."""
    if target in NAMED_TARGETS:
        return None
    from ..activations import parse_expression

    names = target_variables(d)
    try:
        parse_expression(target, names)
    except ValueError as err:
        return (f"data.target='{target}' is not accepted: {err}; named targets are "
                f"{', '.join(NAMED_TARGETS)}, or give an expression in {', '.join(names)}")
    return None


def is_builtin_activation(name: str) -> bool:
    """Whether `name` is a built-in activation or alias (case-insensitive): valid without parsing."""
    key = name.strip().lower()
    return ACTIVATION_ALIASES.get(key, key) in BUILTIN_ACTIVATIONS


# A name (config `name`, a spec's `name:`) becomes a folder: a name, never a path (condlab._outputs)
NAME_MAX = 100  # characters: a folder name plus a stamp stays far below the file systems' 255 bytes
NAME_RULE = (f"a name is 1-{NAME_MAX} printable characters, without '/', '\\' or '..', "
             "not starting with '.' or '-'")


def name_problem(name: object) -> str | None:
    """Why `name` cannot name a folder (None: it can)."""
    if not isinstance(name, str) or not name:
        return "it is empty" if name == "" else f"it is a {type(name).__name__}, not text"
    if len(name) > NAME_MAX:
        return f"it has {len(name)} characters"
    if not name.isprintable():
        return "it holds a control character"
    if "/" in name or "\\" in name or ".." in name:
        return "it holds a path separator or '..'"
    if name[0] in ".-" or name != name.strip():
        return "it starts with '.' or '-', or with a space" if name[0] in ".- " else "it ends with a space"
    return None
