"""Time per line count (count_lines) now and at a baseline commit, in one process, interleaved.

The layers are trained here (condlab.train, fig3 preset, 1000 epochs, snapshots every 100;
lr x init_std grids and seeds as in benchmarks/bench_sweep.py), in four shapes: (50, 6) (the
Fig. 3 network: width 50, d = 5 plus bias), (100, 2), (1000, 2), (1000, 6) (width 100 / 1000,
d = 1 / 5). The baseline counter is the analysis code of --baseline (a git revision, default
the commit before the fast count), loaded from git into a private package, so both counters
run in this process on the same layers, the two alternating layer by layer. Times are
time.thread_time (CPU time of this thread, robust to other processes), per count, at 1 and 2
threads (OMP/BLAS via threadpoolctl when available, torch.set_num_threads). Every count is
checked: both counters must give the same integer.

Then `count_lines_many` (one compiled call per stack) against the loop a user would write,
``[count_lines(W) for W in stack]``: on the sweep summary's stack (512 fig3 layers: final and
epoch-500 weights of 256 runs, float32) and on stacks of the other shapes; rounds of the two
interleaved (alternating which goes first), wall time (time.perf_counter) and thread time of
the calling thread, at 1 and 2 threads (count_lines_many(threads=n)); the same integers
checked. --compile: the first call's compile time in a fresh process with an empty numba
cache, and the next process's (loading it from disk).

    python benchmarks/bench_counts.py [--baseline REV] [--layers 256] [--threads 1,2]
                                      [--many-only] [--rounds 5] [--compile]
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import torch

import condlab
from condlab.analysis._line_counts import count_lines, count_lines_many

BASELINE = "2692151"  # main before the fast count (count: leaders, bincount, _Caps)
SHAPES = [(50, 5), (100, 1), (1000, 1), (1000, 5)]  # (width, d): layers (width, d + 1)
MODULES = ["_cosine", "_structures", "_count_caps", "_orientations", "_line_counts"]  # import order
ROOT = Path(__file__).resolve().parents[1]


def load_baseline(rev: str, where: Path):
    """count_lines of the analysis modules at git revision rev, as a private package."""
    name = "_count_baseline"
    pkg = where / name
    pkg.mkdir()
    present = []
    for mod in MODULES:
        src = subprocess.run(["git", "show", f"{rev}:src/condlab/analysis/{mod}.py"], cwd=ROOT,
                             capture_output=True, text=True)
        if src.returncode == 0:  # modules added later are absent at older revisions
            (pkg / f"{mod}.py").write_text(src.stdout.replace("condlab.analysis.", f"{name}."))
            present.append(mod)
    sys.modules[name] = types.ModuleType(name)
    sys.modules[name].__path__ = [str(pkg)]
    for mod in present:
        spec = importlib.util.spec_from_file_location(f"{name}.{mod}", pkg / f"{mod}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[f"{name}.{mod}"] = module
        spec.loader.exec_module(module)
    return sys.modules[f"{name}._line_counts"].count_lines


def layers(width: int, d: int, n: int) -> list[np.ndarray]:
    """Trained first-layer weights (width, d + 1) of fig3 runs, at epochs 100, 500 and 1000."""
    lrs = [1e-3 * 1.25**i for i in range(8)]
    stds = [0.005 * 1.25**i for i in range(8)]
    seeds = max(1, -(-n // (3 * 64)))
    cfg = condlab.preset("fig3").with_overrides([
        f"train.lr={lrs}", f"model.init_std={stds}", f"model.width={width}", f"data.d={d}",
        "train.epochs=1000", "train.snapshots=every:100", f"train.seeds={list(range(seeds))}"])
    runs = condlab.train(cfg, progress=False).runs
    out = [np.asarray(run.weights["layer1"][s]) for run in runs for s in (1, 5, 10)]
    return out[:n]


def time_pair(new, old, Ws: list[np.ndarray]) -> tuple[float, float]:
    """Seconds of thread time per count for new and old, alternating layer by layer (and which
    of the two goes first: the second call on a layer finds it in cache)."""
    t = {new: 0.0, old: 0.0}
    for i, W in enumerate(Ws):
        counts = []
        for f in (new, old) if i % 2 == 0 else (old, new):
            t0 = time.thread_time()
            counts.append(f(W))
            t[f] += time.thread_time() - t0
        assert counts[0] == counts[1], f"counts differ on layer {i}: {counts}"
    return t[new] / len(Ws), t[old] / len(Ws)


def sweep_stack() -> np.ndarray:
    """(512, 50, 6) float32: final and epoch-500 layer 1 of the 256 runs of bench_sweep's sweep."""
    lrs = [1e-3 * 1.25**i for i in range(8)]
    stds = [0.005 * 1.25**i for i in range(8)]
    cfg = condlab.preset("fig3").with_overrides([
        f"train.lr={lrs}", f"model.init_std={stds}", "train.seeds=[0,1,2,3]",
        "train.epochs=1000", "train.snapshots=every:100"])
    runs = condlab.train(cfg, progress=False).runs
    return np.stack([np.asarray(run.weights["layer1"][s]) for run in runs for s in (-1, 5)])


def time_many(stack: np.ndarray, threads: int, rounds: int) -> dict[str, float]:
    """Median seconds (wall, thread) of the loop and of count_lines_many over interleaved rounds."""
    out: dict[str, list[float]] = {k: [] for k in ("loop_wall", "loop_cpu", "many_wall", "many_cpu")}
    want = count_lines_many(stack, threads=threads)
    for r in range(rounds):
        for name in ("loop", "many") if r % 2 == 0 else ("many", "loop"):
            w0, c0 = time.perf_counter(), time.thread_time()
            if name == "loop":
                got = [count_lines(W) for W in stack]
            else:
                got = count_lines_many(stack, threads=threads)
            out[f"{name}_wall"].append(time.perf_counter() - w0)
            out[f"{name}_cpu"].append(time.thread_time() - c0)
            assert got == want, f"{name} counts differ"
    return {k: float(np.median(v)) for k, v in out.items()}


def compile_times() -> list[float]:
    """Seconds of the first count_lines_many call in two fresh processes sharing an empty cache."""
    code = ("import time, numpy as np; from condlab.analysis._line_counts import count_lines_many; "
            "W = np.random.default_rng(0).standard_normal((2, 50, 6)); t = time.perf_counter(); "
            "count_lines_many(W); print(time.perf_counter() - t)")
    with tempfile.TemporaryDirectory() as cache:
        env = {**__import__("os").environ, "NUMBA_CACHE_DIR": cache}
        return [float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                     check=True).stdout.split()[-1]) for _ in range(2)]


def many_section(data: dict, threads_list: list[int], rounds: int) -> None:
    stacks = {"sweep (50, 6) x512": sweep_stack()}
    stacks.update({f"{shape} x{len(Ws)}": np.stack(Ws) for shape, Ws in data.items() if shape != (50, 6)})
    print("count_lines loop vs count_lines_many: ms per stack (median of interleaved rounds), wall / thread")
    for threads in threads_list:
        set_threads(threads)
        for name, stack in stacks.items():
            t = time_many(stack, threads, rounds)
            print(f"threads {threads}  {name:>20}  loop {t['loop_wall'] * 1e3:8.2f} / "
                  f"{t['loop_cpu'] * 1e3:8.2f}"
                  f"  many {t['many_wall'] * 1e3:8.2f} / {t['many_cpu'] * 1e3:8.2f}"
                  f"  speed-up (wall) {t['loop_wall'] / t['many_wall']:5.1f}x"
                  f"  per layer {t['many_wall'] / len(stack) * 1e6:6.1f} us")


def set_threads(n: int) -> None:
    torch.set_num_threads(n)
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(n)
    except ImportError:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=BASELINE)
    ap.add_argument("--layers", type=int, default=256, help="layers per shape (large shapes: a quarter)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--many-only", action="store_true", help="only count_lines_many vs the loop")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compile", action="store_true", help="also the first call's compile time")
    args = ap.parse_args()
    threads_list = [int(t) for t in args.threads.split(",")]
    set_threads(1)
    if args.compile:
        first, cached = compile_times()
        print(f"count_lines_many first call: {first:.1f} s compiling (empty cache), "
              f"{cached:.2f} s from the cache")
    if args.many_only:
        data = {(w, d + 1): layers(w, d, args.layers if w < 1000 else max(8, args.layers // 4))
                for w, d in SHAPES if w != 50}
        many_section(data, threads_list, args.rounds)
        return
    with tempfile.TemporaryDirectory() as tmp:
        old = load_baseline(args.baseline, Path(tmp))
        data = {(w, d + 1): layers(w, d, args.layers if w < 1000 else max(8, args.layers // 4))
                for w, d in SHAPES}
        print(f"baseline {args.baseline}; ms per count (thread time), now vs baseline")
        for threads in threads_list:
            set_threads(threads)
            for shape, Ws in data.items():
                time_pair(count_lines, old, Ws[:4])  # first calls
                new, base = time_pair(count_lines, old, Ws)
                print(f"threads {threads}  {shape!s:>10}  {len(Ws):4d} layers  now {new * 1e3:7.3f}  "
                      f"baseline {base * 1e3:7.3f}  speed-up {base / new:5.2f}x")
    many_section(data, threads_list, args.rounds)


if __name__ == "__main__":
    main()
