"""Named configs with the paper's caption settings (NeurIPS 2022, Figs. 3-6).

``fig3`` is the tanh panel of Fig. 3; ``fig3-<activation>`` the others, each with the
caption's learning rate. ``fig5`` / ``fig5-<activation>`` carry Fig. 5's settings, which
Fig. 6 shares. Epoch counts cover the epochs the captions show.
"""

from __future__ import annotations

import copy
from typing import Any

from ._config import Config, ConfigError

_FIG3: dict[str, Any] = {
    "data": {"n": 80, "d": 5, "low": -4.0, "high": 2.0, "target": "sine_sum",
             "amplitude": 3.5, "frequency": 5.0, "phase": 1.0},
    "model": {"width": 50, "depth": 1, "init_std": [0.005]},  # var = 0.005**2
    "train": {"optimizer": "adam", "epochs": 200, "snapshots": "every:10"},
}
# Caption of Fig. 3: lr = 1e-3 for (a-c), 8e-4 for (d), 2.5e-4 for (e).
_FIG3_LR = {"tanh": 1e-3, "xtanh": 1e-3, "x2tanh": 1e-3, "sigmoid": 8e-4, "softplus": 2.5e-4}

_FIG4: dict[str, Any] = {
    "data": {"n": 80, "d": 3, "low": -4.0, "high": 2.0, "target": "sine_sum",
             "amplitude": 4.0, "frequency": 12.0, "phase": 1.0},
    "model": {"arch": "residual", "width": 18, "depth": 5, "init_std": [0.01],
              "activations": ["x2tanh", "xtanh", "sigmoid", "tanh", "softplus"]},
    "train": {"optimizer": "adam", "lr": [4e-5], "epochs": 1400, "snapshots": "every:100"},
}

_FIG5: dict[str, Any] = {
    "data": {"n": 40, "d": 1, "low": -1.0, "high": 1.5, "target": "fig5"},
    "model": {"width": 100, "depth": 1, "init_std": [0.005]},
    "train": {"optimizer": "adam", "lr": [5e-4], "epochs": 1000, "snapshots": "every:50"},
}


def _merge(base: dict[str, Any], **sections: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in sections.items():
        out.setdefault(key, {}).update(value)
    return out


def _presets() -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for act, lr in _FIG3_LR.items():
        name = "fig3" if act == "tanh" else f"fig3-{act}"
        table[name] = _merge(_FIG3, model={"activations": [act]}, train={"lr": [lr]})
        table[name]["name"] = name
    table["fig4"] = dict(_FIG4, name="fig4")
    table["fig4-plain"] = _merge(_FIG4, model={"arch": "fc"})
    table["fig4-plain"]["name"] = "fig4-plain"
    for act in ("tanh", "xtanh", "x2tanh"):
        name = "fig5" if act == "tanh" else f"fig5-{act}"
        table[name] = _merge(_FIG5, model={"activations": [act]})
        table[name]["name"] = name
    return table


PRESETS = _presets()


def preset(name: str) -> Config:
    """The Config of a named preset; unknown names list the known ones."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset '{name}': known presets are {', '.join(PRESETS)}")
    return Config.from_dict(PRESETS[name])
