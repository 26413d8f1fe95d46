"""Share of a sweep's wall time spent outside training: 64 configs x 4 seeds of the Fig. 3 network.

Two layouts of the same 256 runs (fig3 preset, --epochs epochs, snapshots every 100):

* batched: 8 learning rates x 8 init stds x 4 seeds. lr, init_std and seed are per-run keys,
  so the 256 runs are ONE batch (one condlab.train call);
* separate: 8 data amplitudes x 8 data frequencies x 4 seeds. Every config has its own data
  set, so the sweep runs 64 batches of 4 runs.

"Training" is the time inside condlab.train's training loop (meta.json "seconds"); the rest
(planning, set-up, the summary measurements, writing the records and the table) is overhead.
Target: overhead <= 10 % of the wall time. Runs at 1 and 2 threads, the two layouts interleaved.

    python benchmarks/bench_sweep.py [--epochs 1000] [--repeat 2] [--threads 1,2] [--profile] [--free-counts]

The median share of each layout and thread count is printed last. --free-counts replaces the
line counter (analysis._line_counts.count_lines_many, two layers per run) by a constant, to show the
overhead of everything else (planning, set-up, writing, the table) on its own.

--profile [--layout separate] prints the functions that dominate the overhead (cProfile, 1 thread):
the sweep runs with its batches trained, measured and written one after the other in this
thread (the writer threads would hide their work from cProfile), training excluded from the
listing so that what is left is the overhead.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import tempfile
import time
from pathlib import Path

import torch
from _machine import machine_line

import condlab

LRS = [1e-3 * 1.25**i for i in range(8)]
STDS = [0.005 * 1.25**i for i in range(8)]


def spec(layout: str, epochs: int) -> dict:
    grid = ({"train.lr": LRS, "model.init_std": STDS} if layout == "batched" else
            {"data.amplitude": [3.0 + 0.1 * i for i in range(8)],
             "data.frequency": [4.0 + 0.25 * i for i in range(8)]})
    return {"name": f"bench-{layout}", "base": "fig3",
            "set": {"train.epochs": epochs, "train.snapshots": "every:100"},
            "grid": grid, "seeds": {"init": 4}}


def measure(layout: str, epochs: int, root: Path) -> tuple[float, float, int]:
    """(wall seconds, training seconds, batches) of one sweep into a new directory under `root`.

    The sweeps' folders are all removed at the end, not one before the next: on ext4 without a
    journal (these VMs' disk) a new file's inode skips those freed in the last minute, each
    looked up in the inode table, so 1,792 files created right after deleting the previous
    sweep's cost the writer ~0.1-0.3 s more (perf: ext4 recently_deleted). The file system is
    synced first, so that no earlier write lands in this sweep's own syncs.
    """
    out = Path(tempfile.mkdtemp(dir=root))
    os.sync()
    start = time.perf_counter()
    result = condlab.sweep(spec(layout, epochs), out=out, progress=False)
    wall = time.perf_counter() - start
    assert result.trained == 256, result.summary()
    return wall, result.train_seconds, len(result.plan.batches)


def _serial_executor():
    """The local executor's work, all in the calling thread: train, then measure and write."""
    from condlab.sweeps._executors import Executor
    from condlab.sweeps._run import train_part, write_part

    class Serial(Executor):
        name = "serial"

        def run(self, batches, storage, bar, on_done) -> None:
            with storage.stage() as runs_dir:
                for batch in batches:
                    result = train_part(batch)
                    on_done(batch, write_part(batch, result, str(runs_dir), workers=0))

    return Serial()


def profile(epochs: int, layout: str, root: Path) -> None:
    torch.set_num_threads(1)
    measure("batched", 10, root)  # imports and first calls, as in the timed runs
    with tempfile.TemporaryDirectory() as out:
        prof = cProfile.Profile()
        start = time.perf_counter()
        prof.enable()
        result = condlab.sweep(spec(layout, epochs), out=Path(out), progress=False,
                               executor=_serial_executor())
        prof.disable()
        wall = time.perf_counter() - start
    print(f"{layout}: wall {wall:.2f} s, training {result.train_seconds:.2f} s (profiled, serial)")
    stats = pstats.Stats(prof)
    stats.sort_stats("cumulative").print_stats(r"condlab/(sweeps|records|analysis|training/_api)", 30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--threads", default="1,2", help="torch thread counts, e.g. 1,2")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--layout", default="batched", choices=("batched", "separate"),
                        help="the layout --profile profiles")
    parser.add_argument("--free-counts", action="store_true",
                        help="line counts replaced by a constant: the overhead without the counter")
    args = parser.parse_args()
    print(machine_line(threads=args.threads, dtype="float32 (fig3 preset)", R=256))
    if args.free_counts:
        import condlab.analysis._line_counts as line_counts

        line_counts.count_lines_many = lambda ws, *a, **k: [0] * len(ws)  # summarize imports it when called
    with tempfile.TemporaryDirectory() as root:
        if args.profile:
            profile(args.epochs, args.layout, Path(root))
        else:
            run(args, Path(root))


def run(args: argparse.Namespace, root: Path) -> None:
    """The timed sweeps: both layouts interleaved, at each thread count; the median shares."""
    print(f"sweep of 64 configs x 4 seeds, fig3 network, {args.epochs} epochs; target: overhead <= 10 %"
          + (" (line counts replaced by a constant)" if args.free_counts else ""))
    shares: dict[tuple[int, str], list[float]] = {}
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        # warm-up at this thread count (a new count rebuilds thread pools on first use):
        # imports and first-call costs, with the trained layers the timed sweeps count (the arc
        # test's null of each band size is looked up once per process)
        measure("batched", args.epochs, root)
        for _ in range(args.repeat):
            for layout in ("batched", "separate"):
                wall, train, batches = measure(layout, args.epochs, root)
                share = (wall - train) / wall
                shares.setdefault((threads, layout), []).append(share)
                print(f"threads={threads} {layout:<9} batches={batches:<3} wall {wall:6.2f} s  "
                      f"training {train:6.2f} s  outside training {share:6.1%}", flush=True)
    for (threads, layout), values in shares.items():
        print(f"median threads={threads} {layout:<9} outside training {statistics.median(values):6.1%} "
              f"({len(values)} sweeps)")


if __name__ == "__main__":
    main()
