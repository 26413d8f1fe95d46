"""Wall time of the reproduction suite on this machine (targets: quick < 10 min, full < 30 min).

    python benchmarks/bench_reproduce.py           # reproduce all --quick (2 data draws x 1 init seed)
    python benchmarks/bench_reproduce.py --full    # and the full suite (3 x 3 pairs, diagnostic variants)

Real-data experiments run on what is there: MNIST falls back to the bundled digits, and Fig. 2
is skipped without CIFAR-10 files (pass --data-dir to include them).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from _machine import machine_line

from condlab.reproduce import EXPERIMENTS, reproduce


def run_suite(quick: bool, data_dir: str | None) -> None:
    total = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        for name in EXPERIMENTS:
            start = time.perf_counter()
            result = reproduce(name, quick=quick, out=out, data_dir=data_dir, smoke=quick)  # as `all --quick`
            held = sum(c.holds for c in result.claims)
            print(f"  {name:<14} {time.perf_counter() - start:7.1f} s   {result.status:<8} "
                  f"{held}/{len(result.claims)} claims hold")
    label = "quick (2 x 1 pairs)" if quick else "full (3 x 3 pairs + variants)"
    print(f"{label}: {time.perf_counter() - total:.1f} s in total")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    print(machine_line(threads=os.environ.get("OMP_NUM_THREADS", "torch default"), dtype="the presets'"))
    run_suite(True, args.data_dir)
    if args.full:
        run_suite(False, args.data_dir)


if __name__ == "__main__":
    main()
