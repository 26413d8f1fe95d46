"""reproduce facilitators: the measure, its trainer's weight decay and dropout, the four verdicts.

The claims (the talk): smaller init, larger weight decay, dropout, a larger learning rate each
raise the share of neurons on the largest line by >= 0.1 (rule fixed in the experiment).
"""

from __future__ import annotations

import json
import math

import pytest

from condlab.reproduce import reproduce
from condlab.reproduce._facilitators import BASE, SWEEPS, train_measure


def test_weight_decay_silences_neurons_and_a_diverged_run_has_no_measure():
    plain = train_measure(0, 200, **BASE)
    decayed = train_measure(0, 200, **{**BASE, "weight_decay": 0.5})
    assert 0 < plain.share <= 1 and plain.lines >= 0 and not plain.diverged
    assert decayed.share >= plain.share
    blown = train_measure(0, 200, **{**BASE, "lr": 1e4}, optimizer="gd")
    assert blown.diverged and math.isnan(blown.share)


def test_dropout_changes_training_and_is_seeded():
    a = train_measure(0, 50, **{**BASE, "dropout": 0.5}, until="end")
    b = train_measure(0, 50, **{**BASE, "dropout": 0.5}, until="end")
    c = train_measure(0, 50, **BASE, until="end")
    assert a == b and a.epoch == c.epoch == 50


@pytest.mark.slow
def test_facilitators_quick_reports_four_verdicts(tmp_path):
    result = reproduce("facilitators", quick=True, out=tmp_path)
    claims = json.loads((tmp_path / "facilitators" / "claims.json").read_text())
    assert len(result.claims) == len(SWEEPS) == 4
    assert {c["id"] for c in claims["claims"]} == {f"facilitators/{k}" for k in SWEEPS}


def test_largest_line_share_counts_neurons_near_the_crowded_line():
    import numpy as np

    from condlab.reproduce._facilitators import largest_line_share

    w = np.array([[1.0, 0.0], [-2.0, 0.01], [0.9, 0.05], [0.0, 1.0], [0.001, 0.0]])
    assert largest_line_share(w) == 3 / 4  # the last row is negligible; 3 of 4 on the x-axis line
