"""Three-layer phase diagram cost: time per run-step (float64, ASI, batched as the diagram batches).

    OMP_NUM_THREADS=1 python benchmarks/bench_phase3.py [--threads 1 2] [--widths 64 128 256 512 1024 2048]

Times `--steps` GD steps of a batch of runs at each width (the batch size the diagram's plan uses:
at most 4e6 nets x m^2 elements, so 1 run at m >= 2048) and reports seconds per run-step; with the
mean steps per run of a finished diagram (`--steps-per-run`, ~300 on the authors' target) it
estimates a width's cost per 100 runs. The load of the machine is printed: on a shared machine
every number scales with it. Not a speed target (no baseline to beat): the numbers behind the
cost table in docs/phase_diagram.md.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from _machine import machine_line

from condlab.phase import scales3, train3_to_convergence
from condlab.phase._diagram import MAX_ELEMENTS


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--widths", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--steps-per-run", type=float, default=300.0)
    args = ap.parse_args()
    print(machine_line(threads=",".join(map(str, args.threads)), dtype="float64"))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for threads in args.threads:
        torch.set_num_threads(threads)
        # untimed warm-up: first-call costs (imports, thread pools) would land on the first width
        m0 = min(args.widths)
        train3_to_convergence(m0, [scales3(2.0, 0.0, m0)], [0], max_steps=2, tol=0.0)
        for m in args.widths:
            runs = max(1, min(8, MAX_ELEMENTS // (2 * m * m)))
            sc = [scales3(2.0, 0.0, m)] * runs   # condensed: no run converges within --steps
            start = time.perf_counter()
            batch = train3_to_convergence(m, sc, list(range(runs)), max_steps=args.steps, tol=0.0)
            seconds = time.perf_counter() - start
            per = seconds / sum(r.steps + 1 for r in batch.runs)
            print(f"threads {threads}  m={m:>5}  {runs} runs/batch  {per * 1e3:8.2f} ms per run-step  "
                  f"~{per * args.steps_per_run * 100:7.0f} s per 100 runs")


if __name__ == "__main__":
    main()
