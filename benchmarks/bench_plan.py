"""Planning a sweep with the grouped resolver (``_accel/_resolve.py``) against the reference.

The reference, ``make_plan`` under ``reference_only("grouped plan resolution")``, resolves every
point of the spec on its own (``Config.from_dict``, single runs, a hash each); the fast path
resolves points that differ only in batchable keys from one config. Both give the same plan (the
parity suite holds them to it; checked here too). The spec: the Fig. 3 preset, a grid of
learning rates x init stds, 4 seeds a point (batchable: one group per point's other values).
Process CPU time of make_plan, pairs interleaved (which goes first alternates) in one process;
the first pair includes the fast path's first use (importing its module). The bar for keeping
a fast path is 1.3x (docs/architecture.md, "Fast paths"). Planning runs on one thread; the
`--threads` setting only limits torch/BLAS, for the house rule that every benchmark says so.

    python benchmarks/bench_plan.py [--grid 16,64] [--pairs 5] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from _machine import machine_line

from condlab._accel import reference_only
from condlab.sweeps._plan import make_plan


def spec(side: int) -> dict:
    """side x side grid points of 4 seeds each: 4 side² runs."""
    return {"name": "bench", "base": "fig3", "seeds": {"init": 4},
            "grid": {"train.lr": [1e-3 * 1.01**i for i in range(side)],
                     "model.init_std": [0.005 * 1.01**i for i in range(side)]}}


def timed(raw: dict, fast: bool) -> tuple[float, dict]:
    """(CPU seconds, plan as a dict) of one make_plan, with the fast path on or off."""
    t = time.process_time()
    if fast:
        plan = make_plan(raw)
    else:
        with reference_only("grouped plan resolution"):
            plan = make_plan(raw)
    return time.process_time() - t, plan.to_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default="16,64", help="grid sides (runs = 4 side²)")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    print(machine_line(threads=args.threads, dtype="-"))
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for side in (int(s) for s in args.grid.split(",")):
            raw, times = spec(side), {True: [], False: []}
            for k in range(args.pairs):
                plans = {}
                for fast in ((True, False) if k % 2 == 0 else (False, True)):
                    seconds, plans[fast] = timed(raw, fast)
                    times[fast].append(seconds)
                assert plans[True] == plans[False], "the fast path's plan differs from the reference's"
            fast, ref = statistics.median(times[True]), statistics.median(times[False])
            print(f"threads {threads}, {4 * side * side:6d} runs: reference {ref:7.3f} s, grouped "
                  f"{fast:7.3f} s (first use {times[True][0]:.3f} s): {ref / fast:5.2f}x "
                  f"(first pair {times[False][0] / times[True][0]:.2f}x)")


if __name__ == "__main__":
    main()
