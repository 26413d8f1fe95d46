"""Grouped planning (one resolved config per group of points) gives the plan of point-by-point
resolving: the same runs, hashes (existing sweep folders resume by hash), batches, columns,
settings, duplicates, and the same error for a bad point."""

from __future__ import annotations

import pytest

from condlab.sweeps._plan import make_plan, run_hash
from condlab.training._config import ConfigError

SPECS = {
    "tiny": {"name": "tiny", "base": "fig5",
             "set": {"train.epochs": 30, "train.snapshots": "every:10", "train.dtype": "float64"},
             "grid": {"model.width": [8, 12]},
             "zip": {"train.lr": [1e-3, 5e-4], "model.init_std": [0.005, 0.01]},
             "seeds": {"init": 2, "data": [0, 1]}},
    "bench-batched": {"base": "fig3", "set": {"train.snapshots": "every:100"},
                      "grid": {"train.lr": [1e-3 * 1.25**i for i in range(4)],
                               "model.init_std": [0.005 * 1.25**i for i in range(3)]},
                      "seeds": {"init": 4}},
    "bench-separate": {"base": "fig3", "grid": {"data.amplitude": [3.0, 3.1], "data.frequency": [4, 4.25]},
                       "seeds": {"init": [3, 1]}},
    "base-lists-and-list-axis": {"base": {"train": {"lr": [1e-3, 2e-3], "epochs": 5}},
                                 "list": [{"model.width": 4}, {"model.width": 6, "data.n": 10},
                                          {"model.width": 4, "train.lr": "3e-3, 1e-3"}]},
    "values-as-text-and-ints": {"grid": {"train.lr": ["1e-3", 0.001, 1], "train.seeds": [[0, 1], 2]}},
    "sgd-momentum-decay-dropout": {"set": {"train.optimizer": "sgd", "train.nesterov": True},
                                   "grid": {"train.momentum": [0.5, 0.9], "train.weight_decay": [0, 1e-4],
                                            "model.dropout": [0.0, 0.25]}},
    "duplicates": {"list": [{"train.lr": 1e-3}, {"train.lr": [1e-3, 2e-3]}, {"model.width": 50}]},
    "task": {"base": "fig5", "task": "condlab.phase._task", "seeds": 3},
    "section-replaced": {"grid": {"train": [{"epochs": 3, "lr": [1e-3]}, {"epochs": 4}]}},
    "slot-lookalike": {"set": {"data.data_dir": "@@condlab-batched-0@@"}, "seeds": 2},
    "negative-zero": {"grid": {"train.weight_decay": [0.0, -0.0]}, "seeds": 2},
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_grouped_plan_equals_the_plan_resolved_point_by_point(name):
    grouped, alone = make_plan(SPECS[name]), make_plan(SPECS[name], grouped=False)
    assert grouped.to_dict() == alone.to_dict()
    assert grouped.duplicates == alone.duplicates
    task = SPECS[name].get("task", "")
    assert [r.hash for r in grouped.runs] == [run_hash(r.config, task) for r in grouped.runs]


BAD = {
    "lr-zero-late": {"grid": {"train.lr": [1e-3, 2e-3, 0]}, "seeds": 2},
    "momentum-without-sgd": {"grid": {"train.lr": [1e-3, 2e-3], "train.momentum": [0.0, 0.5]}},
    "nesterov-zero-momentum": {"set": {"train.optimizer": "sgd", "train.nesterov": True},
                               "grid": {"train.momentum": [0.9, 0.0]}},
    "repeated-lr": {"list": [{"train.lr": 1e-3}, {"train.lr": [2e-3, 0.002]}]},
    "dropout-one": {"grid": {"model.dropout": [0.5, 1.0]}},
    "bool-seed": {"grid": {"train.seeds": [1, True]}},
    "width-zero": {"grid": {"model.width": [3, 0]}, "seeds": 2},
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_point_fails_with_the_error_of_point_by_point_resolving(name):
    with pytest.raises(ConfigError) as alone:
        make_plan(BAD[name], grouped=False)
    with pytest.raises(ConfigError) as grouped:
        make_plan(BAD[name])
    assert str(grouped.value) == str(alone.value)
