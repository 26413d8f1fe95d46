"""The package's import structure: light CLI paths, no import cycles, a curated public surface."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import condlab
import condlab.analysis

SRC = Path(condlab.__file__).resolve().parent
HEAVY = ("torch", "sympy", "scipy", "matplotlib")


def test_help_presets_and_config_do_not_import_torch_or_sympy():
    # The claim: answering --help, `presets` and `config` (a preset with overrides, so that
    # validation runs) never imports torch, sympy, scipy or matplotlib, the 1+ s of start-up.
    script = """
import contextlib, io, json, sys
from condlab._cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main(["--help"])
    except SystemExit:
        pass
    assert main(["presets"]) == 0
    assert main(["config", "--preset", "fig4", "--set", "model.depth=5", "--seeds", "3"]) == 0
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_training_a_sweep_and_reproduce_before_drawing_import_no_plotting_scipy_or_numba(tmp_path):
    # The claim (issue 24, "imports only when used"): a process that trains a fig3-like batch,
    # runs a small sweep and imports every experiment of `reproduce` (what runs before its first
    # figure) leaves matplotlib and condlab.plotting (drawing), scipy (a direction field's roots)
    # and numba (a compiled kernel: the wide step, the ReLU phase step) unimported.
    script = """
import json, sys
import condlab, condlab.reproduce
sets = {"train.epochs": 20, "train.snapshots": "every:10", "model.width": 8, "data.n": 10}
cfg = condlab.preset("fig3").with_overrides([f"{k}={v}" for k, v in sets.items()])
runs = list(condlab.train(cfg, progress=False))
spec = {"name": "lazy", "base": "fig3", "set": sets, "grid": {"train.lr": [0.01, 0.02]}}
result = condlab.sweep(spec, out="out", progress=False)
assert len(condlab.reproduce.EXPERIMENTS) > 5 and condlab.reproduce.Context([0]).quick is False
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("matplotlib", "scipy", "numba")
                        or m.startswith("condlab.plotting"))))
"""
    env = {"PYTHONPATH": str(SRC.parent), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                          cwd=tmp_path, env=env, timeout=300)
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_public_names_resolve_lazily():
    assert set(condlab.__all__) == {*condlab._PUBLIC, "__version__"}
    for name in condlab.__all__:
        assert getattr(condlab, name) is not None
    for name in condlab.analysis.__all__:
        assert getattr(condlab.analysis, name) is not None
    assert "BatchedNet" not in condlab.__all__ and "PRESETS" not in condlab.__all__
    assert callable(condlab.embed.split)  # public submodules load on first use too
    try:
        condlab.no_such_name  # noqa: B018
    except AttributeError as err:
        assert "no_such_name" in str(err)
    else:
        raise AssertionError("unknown attribute did not raise")


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports(path: Path, modules: set[str]) -> set[str]:
    """condlab modules imported anywhere in `path` (functions included, TYPE_CHECKING blocks not)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    todo: list[ast.AST] = [ast.parse(path.read_text())]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                sub = f"{base}.{alias.name}"
                # a lazy package's name is imported from the module its _EXPORTS table names
                found.add(sub if sub in modules else _exported_from(base, alias.name) or base)
    return {m for m in found if m in modules and m != name}


def _exports_table(package: str) -> dict[str, str]:
    """A package's lazy ``_EXPORTS`` (name -> absolute module), read from its __init__ source."""
    init = SRC.parent.joinpath(*package.split("."), "__init__.py")
    if not init.exists():
        return {}
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in ("_EXPORTS", "_PUBLIC"):
            table = ast.literal_eval(node.value)
            return {k: package + v if v.startswith(".") else v for k, v in table.items()}
    return {}


def _exported_from(package: str, name: str) -> str | None:
    return _exports_table(package).get(name)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    # Every import of a condlab module counts, also inside functions: a deferred import only
    # hides a cycle. A package's __init__ is a module like any other here.
    paths = sorted(SRC.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    graph = {_module_name(p): _imports(p, modules) for p in paths}
    assert graph["condlab.analysis._orientations"] >= {"condlab.analysis._cosine"}  # the walk works
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_builtin_registry_names_known_without_torch_match_the_registries():
    # config validation trusts _checks' lists for built-in names instead of importing torch
    from condlab.training._arch import ARCHITECTURES
    from condlab.training._checks import BUILTIN_ARCHITECTURES, BUILTIN_OPTIMIZERS
    from condlab.training._optim import OPTIMIZERS

    assert set(BUILTIN_ARCHITECTURES) <= set(ARCHITECTURES)
    assert {name: tuple(cls.uses) for name, cls in OPTIMIZERS.items()
            if name in BUILTIN_OPTIMIZERS} == BUILTIN_OPTIMIZERS


def _package(name: str, path: Path) -> str:
    """The subpackage a module belongs to (condlab.X), or condlab for the top-level modules."""
    parts = name.split(".")
    inside = len(parts) > 2 or (path.name == "__init__.py" and len(parts) == 2)
    return ".".join(parts[:2]) if inside else "condlab"


def test_no_module_imports_another_subpackages_private_names():
    # The layout's rule (docs/architecture.md): a subpackage is used through the names its
    # __init__ exports; its private modules and private names are its own business.
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        name = _module_name(path)
        mine = _package(name, path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            parts = base.split(".")
            if parts[0] != "condlab" or len(parts) < 2:
                continue
            theirs = ".".join(parts[:2]) if (SRC / parts[1]).is_dir() else "condlab"
            if theirs in (mine, "condlab"):
                continue
            private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            if any(p.startswith("_") for p in parts[2:]) or private:
                bad.append(f"{name}: from {base} import {', '.join(a.name for a in node.names)}")
    assert bad == []


def test_the_top_level_holds_few_modules():
    # subsystems live in subpackages (training, records, sweeps, models, _accel, ...), not in
    # name prefixes at the top level
    assert len(list(SRC.glob("*.py"))) <= 12
