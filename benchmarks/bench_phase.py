"""Phase diagram cost: time per run-step (float64, ASI, batched) at each width, and the --quick estimate.

    OMP_NUM_THREADS=1 python benchmarks/bench_phase.py [--threads 1 2] [--widths 1000 10000 100000]

Trains 6 points of the quick grid (3 linear, 3 condensed, batched as the diagram batches them) at
each width to convergence; reports seconds per run-step and the mean steps per run, and estimates
the quick diagram (9 x 9 grid + 5 schemes) x 2 seeds from them. The load of the machine is
printed: on a shared machine the estimate scales with it.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from condlab.phase import preset_spec, scales, train_to_convergence

POINTS = [(0.5, 0.5), (0.25, 1.5), (0.75, -0.5), (1.75, 0.0), (2.25, 0.5), (2.0, -0.5)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--widths", type=int, nargs="+", default=[1000, 10_000, 100_000])
    args = ap.parse_args()
    spec = preset_spec("quick")
    runs_per_width = (len(spec.gammas) * len(spec.gamma_primes) + len(spec.schemes)) * len(spec.seeds)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for threads in args.threads:
        torch.set_num_threads(threads)
        total = 0.0
        for m in args.widths:
            start = time.perf_counter()
            batch = train_to_convergence(m, [scales(g, gp, m) for g, gp in POINTS], [0] * len(POINTS))
            seconds = time.perf_counter() - start
            steps = sum(r.steps for r in batch.runs)
            per = seconds / steps
            est = runs_per_width * steps / len(POINTS) * per
            total += est
            print(f"threads {threads} m={m:>7}: {per * 1e3:.3f} ms per run-step, {steps / len(POINTS):.0f} "
                  f"steps per run; quick diagram at this width ~{est / 60:.1f} min")
        print(f"threads {threads}: quick diagram estimate ~{total / 60:.1f} min (training only)")


if __name__ == "__main__":
    main()
