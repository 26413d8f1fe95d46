"""Time to count the lines of a sweep batch, against the time to train it (issue 18: <= 10 %).

The batch is benchmarks/bench_sweep.py's batched layout: the fig3 preset, 8 learning rates x
8 init stds x 4 seeds = 256 runs, 1000 epochs, snapshots every 100, trained here in one
condlab.train call (its wall and thread time are the reference). Its sweep summary counts 512
layers: the final and the epoch-500 layer-1 weights (50, 6) of every run.

* first use: a fresh process imports the counter and counts the 512 layers once, timed from the
  process's start (numpy's import included) and from the moment numpy is imported and the layers
  loaded (what a sweep's process, which has both, pays), so any one-time cost is included;
* then, in this process, count_lines_many(stack, threads=n) against the loop a careful user
  would write, [count_lines(W) for W in stack], and against itself with the fast path "compiled
  mixture EM" off (the reference EM in numpy), in interleaved rounds (the order rotating), at 1
  and 2 threads; wall (perf_counter) and thread time (thread_time) per stack; the same integers
  checked. First use is measured for both (the reference: CONDLAB_REFERENCE=1), as the bar for
  a fast path asks (docs/architecture.md): --rounds fresh processes each, alternating, after one
  untimed process that fills the on-disk cache of the arc test's null (medians printed).

    python benchmarks/bench_counts.py [--threads 1,2] [--rounds 3] [--epochs 1000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from _machine import machine_line

import condlab
from condlab._accel import reference_only
from condlab.analysis._line_counts import count_lines, count_lines_many

LRS = [1e-3 * 1.25**i for i in range(8)]
STDS = [0.005 * 1.25**i for i in range(8)]


def set_threads(n: int) -> None:
    torch.set_num_threads(n)
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(n)
    except ImportError:
        pass


def sweep_batch(epochs: int) -> tuple[np.ndarray, float, float]:
    """(512, 50, 6) float32 stack of the batch's counted layers, training wall and thread seconds."""
    cfg = condlab.preset("fig3").with_overrides([
        f"train.lr={LRS}", f"model.init_std={STDS}", "train.seeds=[0,1,2,3]",
        f"train.epochs={epochs}", "train.snapshots=every:100"])
    w0, c0 = time.perf_counter(), time.thread_time()
    runs = condlab.train(cfg, progress=False).runs
    wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
    mid = len(runs[0].epochs) // 2
    return np.stack([np.asarray(run.weights["layer1"][s]) for run in runs for s in (-1, mid)]), wall, cpu


def first_use(stack: np.ndarray, reference: bool = False) -> tuple[float, ...]:
    """(wall, CPU) seconds of import + the first count_lines_many call in a fresh process (1 thread),
    then the same from the moment numpy is imported and the layers loaded; reference: with every
    fast path off."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stack.npy"
        np.save(path, stack)
        # two clocks: from the start (numpy's import included) and from the moment the layers are
        # in memory (a sweep's process has numpy and its layers before it counts)
        code = ("import time; t, c = time.perf_counter(), time.process_time(); import numpy as np; "
                f"stack = np.load({str(path)!r}); t1, c1 = time.perf_counter(), time.process_time(); "
                "from condlab.analysis._line_counts import count_lines_many; count_lines_many(stack); "
                "t2, c2 = time.perf_counter(), time.process_time(); print(t2 - t, c2 - c, t2 - t1, c2 - c1)")
        env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "CONDLAB_REFERENCE": "1" if reference else ""}
        out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True,
                             text=True, check=True)
        return tuple(float(x) for x in out.stdout.split()[-4:])


def time_pair(stack: np.ndarray, threads: int, rounds: int) -> dict[str, float]:
    """Median seconds (wall, thread) of the loop, of count_lines_many and of count_lines_many with
    the compiled EM off ("ref") over interleaved rounds."""
    names = ["loop", "many", "ref"]
    out: dict[str, list[float]] = {f"{n}_{c}": [] for n in names for c in ("wall", "cpu")}
    want = count_lines_many(stack, threads=threads)
    for r in range(rounds):
        for name in names[r % 3:] + names[: r % 3]:
            w0, c0 = time.perf_counter(), time.thread_time()
            if name == "loop":
                got = [count_lines(W) for W in stack]
            elif name == "ref":
                with reference_only("compiled mixture EM"):
                    got = count_lines_many(stack, threads=threads)
            else:
                got = count_lines_many(stack, threads=threads)
            out[f"{name}_wall"].append(time.perf_counter() - w0)
            out[f"{name}_cpu"].append(time.thread_time() - c0)
            assert got == want, f"{name} counts differ"
    return {k: float(np.median(v)) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=1000)
    args = ap.parse_args()
    print(machine_line(threads=args.threads, dtype="float32 (fig3 preset)"))
    set_threads(1)
    stack, train_wall, train_cpu = sweep_batch(args.epochs)
    print(f"batch: 256 runs x {args.epochs} epochs trained in {train_wall:.2f} s wall / {train_cpu:.2f} s "
          f"thread (1 thread); {len(stack)} layers of shape {stack.shape[1:]} to count")
    # one untimed fresh process first: it fills the on-disk caches a count reads (the arc test's
    # simulated null, analysis/_arcs.flat_bound), which the first contender would otherwise pay
    # alone; then the two contenders alternate, and the medians are printed
    first_use(stack)
    firsts: dict[bool, list[tuple[float, ...]]] = {False: [], True: []}
    for r in range(args.rounds):
        for reference in ((False, True) if r % 2 == 0 else (True, False)):
            firsts[reference].append(first_use(stack, reference))
    for reference in (False, True):
        first, first_cpu, loaded, loaded_cpu = np.median(np.array(firsts[reference]), axis=0).tolist()
        print(f"first use{' with every fast path off' if reference else ''} (fresh process, 1 thread, "
              f"median of {args.rounds}): "
              f"{first:.2f} s wall / {first_cpu:.2f} s CPU from the start, numpy's import included "
              f"({100 * first_cpu / train_cpu:.1f} % of the training thread time); {loaded:.2f} s / "
              f"{loaded_cpu:.2f} s from the moment the layers are loaded (condlab's import + the count: "
              f"{100 * loaded_cpu / train_cpu:.1f} %)")
    counts = count_lines_many(stack)
    print(f"line counts: {np.bincount(counts).tolist()} (layers with 0, 1, 2, ... lines)")
    for threads in [int(t) for t in args.threads.split(",")]:
        set_threads(threads)
        t = time_pair(stack, threads, args.rounds)
        print(f"threads {threads}: count_lines_many {t['many_wall'] * 1e3:8.1f} ms wall / "
              f"{t['many_cpu'] * 1e3:8.1f} ms thread ({100 * t['many_wall'] / train_wall:5.1f} % / "
              f"{100 * t['many_cpu'] / train_cpu:5.1f} % of the training wall / thread time); "
              f"loop of count_lines {t['loop_wall'] * 1e3:8.1f} / {t['loop_cpu'] * 1e3:8.1f} ms; "
              f"compiled EM off {t['ref_wall'] * 1e3:8.1f} / {t['ref_cpu'] * 1e3:8.1f} ms "
              f"({t['ref_cpu'] / t['many_cpu']:.2f}x); per layer {t['many_wall'] / len(stack) * 1e6:7.1f} us")


if __name__ == "__main__":
    main()
