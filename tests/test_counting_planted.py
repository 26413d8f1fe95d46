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
import warnings
from pathlib import Path

import numpy as np
import pytest

from condlab.analysis import count_orientations
from condlab.analysis._arcs import flat_p
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
# The registered run (docs/analysis.md) missed the arc target: 35 of 40 arcs reported, all five
# misses sparse arcs of 50 rows; layers 1 and 3 of this subset are among them. Recorded, not
# hidden: strict, so a counter that meets the target turns this into a failure to update.
MISSED = {"arc": "registered target missed: arcs of 50 rows (docs/analysis.md, the planted benchmark)"}


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
@pytest.mark.xfail(reason=MISSED["arc"], strict=True)
def test_the_whole_registered_benchmark_meets_every_target():
    for name in CLASSES:
        res = BENCH.run_class(name, None, dev=False)
        for row in res["rows"]:
            assert row["met"], (row, res["failures"][:5])


@pytest.mark.parametrize("n", [5, 20, 37, 200, 1000])
@pytest.mark.parametrize("draw", ["uniform", "normal", "laplace", "two-lines"])
def test_the_arc_tests_kurtosis_p_equals_scipys(n, draw):
    # flat_p writes out scipy.stats.kurtosistest(alternative="less") so that a sweep's line
    # counts do not import scipy.stats (~1 s); it must decide as scipy's does
    from scipy import stats

    gen = np.random.default_rng(n)
    t = {"uniform": lambda: gen.uniform(-1, 1, n), "normal": lambda: gen.normal(0, 1, n),
         "laplace": lambda: gen.laplace(0, 1, n),
         "two-lines": lambda: np.r_[gen.normal(-1, 0.01, n // 2), gen.normal(1, 0.01, n - n // 2)]}[draw]()
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")   # scipy warns below n = 20 that the test is approximate
        expected = stats.kurtosistest(t, alternative="less").pvalue
    assert flat_p(t) == pytest.approx(expected, rel=1e-9, abs=1e-300)
    assert math.isnan(flat_p(np.ones(30)))
