"""Notes `analyze` adds where a number alone would mislead: Adam's eps, nothing condensed, depth."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import condlab
from condlab import TrainingWarning
from condlab.analysis import analyze_layer
from condlab.analysis._report import eps_froze


def _train(*overrides: str, warns: bool = False):
    cfg = condlab.preset("fig3").with_overrides(["train.epochs=20", "train.snapshots=every:10", *overrides])
    if not warns:
        return condlab.train(cfg, progress=False)[0]
    with pytest.warns(TrainingWarning, match="below Adam eps"):
        return condlab.train(cfg, progress=False)[0]


def _with_negligible(o, share: float):
    """o with the first `share` of its rows set aside as negligible (the rest scattered)."""
    rows = len(o.negligible) + len(o.scattered) + sum(len(c.members) for c in (*o.lines, *o.arcs))
    cut = int(round(share * rows))
    return dataclasses.replace(o, n_lines=0, lines=(), arcs=(), negligible=np.arange(cut),
                               scattered=np.arange(cut, rows))


def test_the_eps_note_needs_both_negligible_neurons_and_gradients_below_eps():
    # eps = 1 is far above every first gradient of the fig3 layer (init std 0.005)
    frozen = _train("train.eps=1.0", warns=True)
    o = analyze_layer(frozen, 0, 20, predict=False).orientations
    note = eps_froze(frozen, 0, _with_negligible(o, 0.4))
    assert "Adam's eps froze this layer" in note and "train.eps" in note and "40%" in note
    assert eps_froze(frozen, 0, _with_negligible(o, 0.2)) == ""       # too few negligible neurons
    moving = _train()                                                    # eps 1e-8: gradients above it
    assert eps_froze(moving, 0, _with_negligible(o, 0.4)) == ""
    gd = _train("train.optimizer=gd", "train.lr=0.05")                    # no eps at all
    assert eps_froze(gd, 0, _with_negligible(o, 0.4)) == ""


def test_the_training_warning_names_train_eps_and_not_float64():
    cfg = condlab.preset("fig3").with_overrides(["train.epochs=1", "train.eps=1.0"])
    with pytest.warns(TrainingWarning) as caught:
        condlab.train(cfg, progress=False)
    text = str(caught[0].message)
    assert "train.eps" in text and "float64 does not help" in text and "use float64" not in text


def test_a_layer_with_nothing_condensed_is_not_within_the_bound():
    run = _train()
    report = analyze_layer(run, 0, 0, predict=False)   # random initialization: no line
    assert report.orientations.n_lines == 0
    assert report.within_bound is None and report.bound_status == "nothing condensed"
    assert report.to_dict()["bound_status"] == "nothing condensed"


def test_lower_layers_of_a_deep_net_say_their_predictions_ignore_the_back_propagated_factor():
    run = _train("model.depth=2")
    lower, top = analyze_layer(run, 0, 20, replay=False), analyze_layer(run, 1, 20, replay=False)
    assert "back-propagated" in lower.note and "through layer 2" in lower.note
    assert "back-propagated" not in top.note
