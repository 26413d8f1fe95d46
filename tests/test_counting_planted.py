"""The registered planted benchmark (benchmarks/counting_accuracy.py, docs/analysis.md), in CI.

Claims, stated before any run: on the first 5 layers of each class (the first 20 of random; no
wide) every criterion of the class meets its registered target as a pass share, i.e. at least
ceil(target x layers) layers: 5 of 5 at 95 %, 20 of 20 at 99 %; the arc class's "extra line
counted" criterion applies to its layers with a line (odd layers: 2 of the first 5). Seeds are
the benchmark's registered seeds [class, i]. The whole benchmark is a slow test.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from condlab.analysis import count_orientations
from condlab.analysis._planted import CLASSES, planted

ROOT = Path(__file__).resolve().parents[1]


def _benchmark():
    path = ROOT / "benchmarks" / "counting_accuracy.py"
    spec = importlib.util.spec_from_file_location("counting_accuracy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _benchmark()
SUBSET = {name: 20 if name == "random" else 5 for name in CLASSES if name != "wide"}
# Subset claims missed by the current counter, as {class: reason}: recorded, not hidden; strict,
# so a counter that meets the claim turns the xfail into a failure to update. The whole
# registered benchmark meets every target (arc 38 of 40); its subset needs 5 of 5.
MISSED = {"arc": "layer 1 (an 87 deg arc of 34 rows beside a line): the arc is reported, but one part "
                 "of it is also counted as a line (4 of 5; docs/analysis.md, the planted benchmark)"}


def _marked(name: str):
    if name in MISSED:
        return pytest.param(name, marks=pytest.mark.xfail(reason=MISSED[name], strict=True))
    return name


@pytest.mark.parametrize("name", [_marked(name) for name in SUBSET])
def test_first_layers_of_each_class_meet_their_targets(name):
    results = []
    for i in range(SUBSET[name]):
        p = planted(name, i)
        results.append(BENCH.judge(name, p, count_orientations(p.W, band=False)))
    for criterion, share, what in BENCH.TARGETS[name]:
        vals = [r[criterion] for r in results if r.get(criterion) is not None]
        assert sum(vals) >= math.ceil(share * len(vals) - 1e-9), (name, what, results)


@pytest.mark.slow
def test_the_whole_registered_benchmark_meets_every_target():
    for name in CLASSES:
        res = BENCH.run_class(name, None, dev=False)
        for row in res["rows"]:
            assert row["met"], (row, res["failures"][:5])


def test_the_diffuse_class_needs_the_cone_rule(monkeypatch):
    """The diffuse class tests the cone rule (docs/analysis.md, step 7), not something else: with
    the rule off (LINE_MAX_DEG = 180) at least 2 of its first 5 layers are counted as a line or
    an arc (stated before the run; measured: 3 of 5)."""
    from condlab.analysis import _mixture

    monkeypatch.setattr(_mixture, "LINE_MAX_DEG", 180.0)
    wrong = 0
    for i in range(5):
        o = count_orientations(planted("diffuse", i).W, band=False)
        wrong += (o.n_lines, o.n_arcs) != (0, 0)
    assert wrong >= 2
