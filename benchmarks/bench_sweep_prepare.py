"""The same sweep with and without its run directories prepared while the batch trains.

The local executor makes each batch's ``NAME.partial`` directories and empty files on its
writer thread while the batch trains (``sweeps/_local.py``: ``prepare_part``, then
``_write_prepared``). This moves file-system work into the training window: it shortens the
tail where a core is idle, and competes with training where none is, which lowers the share
"outside training" without saving wall time.
This script shows both: pairs of sweeps (prepared off, on) in one process, interleaved, with
wall time, training time, the share outside training and the process's CPU time (children
included), then the medians.

    python benchmarks/bench_sweep_prepare.py [--layout batched] [--repeat 3] [--free-counts]
"""

from __future__ import annotations

import argparse
import os
import statistics

import torch
from _machine import machine_line
from bench_sweep import measure

import condlab.sweeps._local as local

REAL = (local.prepare_part, local._write_prepared)


def _write_unprepared(batch, result, runs_dir, prepared, storage):
    done = local.write_part(batch, result, runs_dir)  # makes its directories itself
    storage.publish(local.Path(runs_dir), done.rows)
    return done


def prepared(on: bool) -> None:
    if on:
        local.prepare_part, local._write_prepared = REAL
    else:
        local.prepare_part = lambda batch, runs_dir: None
        local._write_prepared = _write_unprepared


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layout", default="batched", choices=("batched", "separate"))
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--free-counts", action="store_true", help="line counts replaced by a constant")
    args = parser.parse_args()
    print(machine_line(threads=args.threads, dtype="float32 (fig3 preset)", R=256))
    torch.set_num_threads(args.threads)
    if args.free_counts:
        import condlab.analysis._line_counts as line_counts

        line_counts.count_lines_many = lambda ws, *a, **k: [0] * len(ws)
    measure("batched", 10)  # warm-up
    seen: dict[str, list[tuple[float, float, float, float]]] = {"off": [], "on": []}
    for _ in range(args.repeat):
        for name in ("off", "on"):
            prepared(name == "on")
            cpu = cpu_seconds()
            wall, train, _ = measure(args.layout, args.epochs)
            cpu = cpu_seconds() - cpu
            seen[name].append((wall, train, (wall - train) / wall, cpu))
            print(f"prepared {name:<3} wall {wall:6.2f} s  training {train:6.2f} s  "
                  f"outside training {(wall - train) / wall:6.1%}  cpu {cpu:6.2f} s", flush=True)
    for name, rows in seen.items():
        wall, train, share, cpu = (statistics.median(col) for col in zip(*rows, strict=True))
        print(f"median prepared {name:<3} wall {wall:6.2f} s  training {train:6.2f} s  "
              f"outside training {share:6.1%}  cpu {cpu:6.2f} s")


if __name__ == "__main__":
    main()
