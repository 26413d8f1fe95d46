"""Phase diagram cost: seconds per run-step of the compiled ReLU step against the torch reference, and
the --quick estimate.

    OMP_NUM_THREADS=1 python benchmarks/bench_phase.py [--threads 1 2] [--widths 1000 10000 100000]

For each width and thread count: 6 points of the quick grid (3 linear, 3 condensed; float64, ASI),
batched as the diagram batches them, are trained for `--steps` steps by the reference loop
(`TwoLayer.loss_grad_bound`: batched torch ops, the straightforward implementation; fast paths off,
CONDLAB_REFERENCE) and by the compiled one-pass step (the fast path "phase step",
condlab._accel._relu_fused), in interleaved pairs (`--repeats`), giving ms per run-step and their
ratio; then the compiled step trains them to convergence, giving the mean steps per run and an
estimate of the quick diagram (9 x 9 grid + 5 schemes, 2 seeds) at that width, by each step, its
first use (the compile, once per process) included. The machine's load is printed: on a shared
machine every time scales with it, the ratio much less.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from _machine import machine_line

from condlab._accel import reference_only
from condlab.phase import preset_spec, scales, train_to_convergence

POINTS = [(0.5, 0.5), (0.25, 1.5), (0.75, -0.5), (1.75, 0.0), (2.25, 0.5), (2.0, -0.5)]


def _per_run_step(m: int, steps: int, reference: bool) -> float:
    def train():
        return train_to_convergence(m, [scales(g, gp, m) for g, gp in POINTS], [0] * len(POINTS),
                                    max_steps=steps)

    if reference:
        with reference_only():
            batch = train()
    else:
        batch = train()
    return batch.seconds / sum(r.steps for r in batch.runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--widths", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--steps", type=int, default=100, help="steps per timed pair")
    ap.add_argument("--repeats", type=int, default=2, help="interleaved (reference, compiled) pairs")
    args = ap.parse_args()
    print(machine_line(threads=",".join(map(str, args.threads)), dtype="float64"))
    spec = preset_spec("quick")
    runs_per_width = (len(spec.gammas) * len(spec.gamma_primes) + len(spec.schemes)) * len(spec.seeds)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    start = time.process_time()
    train_to_convergence(10, [scales(1.0, 0.0, 10)], [0], max_steps=2)  # compile outside the timings
    first_use = time.process_time() - start
    print(f"first use of the compiled step (compile for 3 points): {first_use:.2f} s of CPU time")
    for threads in args.threads:
        torch.set_num_threads(threads)
        total = total_ref = 0.0
        for m in args.widths:
            ref, new = [], []
            for _ in range(args.repeats):
                ref.append(_per_run_step(m, args.steps, True))
                new.append(_per_run_step(m, args.steps, False))
            batch = train_to_convergence(m, [scales(g, gp, m) for g, gp in POINTS], [0] * len(POINTS))
            steps = sum(r.steps for r in batch.runs)
            per = batch.seconds / steps
            est = runs_per_width * steps / len(POINTS) * per
            total += est
            total_ref += runs_per_width * steps / len(POINTS) * min(ref)
            ratios = " ".join(f"{r / n:.1f}" for r, n in zip(ref, new, strict=True))
            print(f"threads {threads} m={m:>7}: ms per run-step: reference {min(ref) * 1e3:.3f}, compiled "
                  f"{min(new) * 1e3:.3f} (pair ratios {ratios}); to convergence {per * 1e3:.3f} ms, "
                  f"{steps / len(POINTS):.0f} steps per run; quick diagram at this width ~{est / 60:.1f} min")
        print(f"threads {threads}: quick diagram estimate ~{total / 60:.1f} min (training only); by the "
              f"reference ~{total_ref / 60:.1f} min: gain {total_ref / (total + first_use):.1f}x with the "
              f"first use included")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
