"""Lazy imports on the training path: built-in activations need no sympy, results.parquet no pandas.

sympy (about 0.3 s to import, 0.5 s with parsing every built-in's formula) is only needed for
an activation's expr and multiplicity p, which training never reads; pandas (0.3-0.4 s) was
imported by pyarrow's ``pa.array`` while writing results.parquet. Each check runs in a fresh
interpreter, since this test process has imported both long ago.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import condlab
from condlab.activations._activations import check_trainable, get_activation, multiplicity, parse_expression
from condlab.sweeps._table import _column

SRC = str(Path(condlab.__file__).resolve().parent.parent)
TINY_FIG3 = {"train.epochs": 20, "train.snapshots": "every:10", "model.width": 8, "data.n": 10}


def _fresh(script: str, tmp_path: Path) -> dict:
    """Run `script` in a new interpreter (condlab from this checkout); its last line is JSON."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": SRC, "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_train_and_sweep_with_builtin_activations_import_neither_sympy_nor_pandas(tmp_path):
    # The claim: condlab.train of a fig3-like batch (tanh), then condlab.sweep over two more
    # built-ins writing results.csv and results.parquet, leave sympy and pandas unimported.
    script = f"""
import json, sys
import condlab
sets = {TINY_FIG3!r}
cfg = condlab.preset("fig3").with_overrides([f"{{k}}={{v}}" for k, v in sets.items()])
runs = condlab.train(cfg, progress=False)
after_train = ["sympy" in sys.modules, "pandas" in sys.modules]
spec = {{"name": "lazy", "base": "fig3", "set": sets,
         "grid": {{"model.activations": [["relu"], ["xtanh"]], "train.lr": [0.01, 0.02]}}}}
result = condlab.sweep(spec, out="out", progress=False)
print(json.dumps({{"after_train": after_train, "sympy": "sympy" in sys.modules,
                  "pandas": "pandas" in sys.modules, "statuses": [r["status"] for r in result.rows],
                  "tables": [str(t) for t in result.tables]}}))
"""
    got = _fresh(script, tmp_path)
    assert got["statuses"] == ["complete"] * 4 and any(t.endswith("results.parquet") for t in got["tables"])
    assert (got["after_train"], got["sympy"], got["pandas"]) == ([False, False], False, False)


def test_cli_train_imports_no_sympy(tmp_path):
    script = """
import json, sys
from condlab._cli import main
code = main(["train", "--preset", "fig3-sigmoid", "--set", "train.epochs=5", "--set", "model.width=8",
             "--set", "data.n=10", "--out", "run", "--no-progress"])
print(json.dumps({"code": code, "sympy": "sympy" in sys.modules}))
"""
    assert _fresh(script, tmp_path) == {"code": 0, "sympy": False}


def test_multiplicity_is_still_computed_from_the_formula_on_first_access(tmp_path):
    script = """
import json, sys
from condlab import get_activation
act = get_activation("x2tanh")
before = "sympy" in sys.modules
print(json.dumps({"before": before, "p": act.multiplicity, "after": "sympy" in sys.modules}))
"""
    assert _fresh(script, tmp_path) == {"before": False, "p": 3, "after": True}
    for name in ("tanh", "relu", "gelu", "x2tanh"):
        act = get_activation(name)
        assert act.expr == parse_expression(act.formula)
        assert (act.multiplicity, act.leading_coefficient, act.note) == multiplicity(act.expr)


def test_equality_hashing_and_pickling_ignore_the_lazy_properties():
    tanh = get_activation("tanh")
    again = pickle.loads(pickle.dumps(tanh))  # fn, grad, fused are module-level functions
    assert again == tanh and hash(again) == hash(tanh) and again.multiplicity == 1
    assert get_activation("x**3*tanh(x)") == get_activation("x**3*tanh(x)")
    assert get_activation("x**3*tanh(x)").multiplicity == 4


@pytest.mark.parametrize(("formula", "message"), [
    ("2", "is a constant"), ("0*x + 3", "is a constant"), ("relu(-x**2)", "is a constant"),
    ("relu(sin(x) - 2)", "derivative 0 everywhere"),
    ("1/x", "not finite at 0"), ("log(x)", "not finite at 0"),
])
def test_check_trainable_names_the_same_reason_as_before(formula, message):
    # the constant test moved behind the numeric ones, so that it reads expr only when they fail
    with pytest.raises(ValueError, match=message):
        check_trainable(get_activation(formula))


@pytest.mark.parametrize("values", [
    [], [None, None], [3, None, -(2**62)], [1, 2], [True, None, False] * 4, [1.5, None, float("nan"), 2],
    [1, 2.5], [float("inf"), -0.0],
    ["a", None, "ü€", ""], [1, "x"], [True, 1], [-(2**63)], [None] * 9 + ["z"],
])
def test_columns_built_from_buffers_equal_what_pa_array_builds(values, tmp_path):
    # the reference is the code the buffers replaced: pa.array with the same type decisions
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    clean = [None if isinstance(v, float) and np.isnan(v) else v for v in values]
    kinds = {type(v) for v in clean if v is not None}
    if kinds <= {int, bool} and kinds != {int, bool}:
        want = pa.array(clean)
    elif kinds <= {int, float}:
        want = pa.array([None if v is None else float(v) for v in clean], type=pa.float64())
    else:
        want = pa.array([None if v is None else str(v) for v in clean], type=pa.string())
    got = _column(pa, values)
    got.validate(full=True)
    assert got.type == want.type and got.null_count == want.null_count and got.equals(want)
    pq.write_table(pa.table({"c": got}), tmp_path / "got.parquet")
    pq.write_table(pa.table({"c": want}), tmp_path / "want.parquet")
    back, ref = (pq.read_table(tmp_path / f"{n}.parquet").to_pandas() for n in ("got", "want"))
    assert list(back.dtypes) == list(ref.dtypes) and back.equals(ref)
