"""Overhead of condlab.Tracker on a ResNet18-size model (condlab's Fig. 2 network, 11.7 M parameters).

A user's step (forward, cross-entropy, backward, Adam on all parameters, batch of 32x32 images)
and one Tracker measurement (all 23 conv + FC layers counted, optionally snapshotted) are timed
alternately in one process, at 1 and 2 threads. The overhead at every=N is

    overhead = t_measure / (N * t_step)

Target (issue 12): < 5 % at every=50. A smaller batch makes the step cheaper and the overhead
look larger, so the default batch (64) is on the conservative side of usual CIFAR training.

    python benchmarks/bench_tracker.py [--batch 64] [--pairs 3] [--every 50]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import condlab
from condlab.training._cnn import make_cifar_net


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--steps", type=int, default=3, help="steps timed per pair")
    args = ap.parse_args()
    for threads in (1, 2):
        torch.set_num_threads(threads)
        net = make_cifar_net("relu", seed=0)
        opt = torch.optim.Adam(net.parameters(), lr=1e-4)
        g = torch.Generator().manual_seed(0)
        x = torch.randn(args.batch, 3, 32, 32, generator=g)
        y = torch.randint(0, 10, (args.batch,), generator=g)
        variants = {"metrics": dict(), "metrics+band": dict(count_kwargs={"band": True}),
                    "metrics+snapshots": dict(snapshots=True)}
        trackers = {k: condlab.Tracker(net, every=args.every, **kw) for k, kw in variants.items()}
        steps, measures = [], {k: [] for k in variants}
        for _ in range(args.pairs):
            t0 = time.perf_counter()
            for _ in range(args.steps):
                loss = F.cross_entropy(net(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            steps.append((time.perf_counter() - t0) / args.steps)
            for k, tr in trackers.items():
                t0 = time.perf_counter()
                tr._measure(0)
                measures[k].append(time.perf_counter() - t0)
        step = statistics.median(steps)
        print(f"threads={threads} batch={args.batch}: step {step:.3f} s (median of {args.pairs})")
        for k, ts in measures.items():
            m = statistics.median(ts)
            print(f"  {k:<18} measure {m:.3f} s  overhead at every={args.every}: "
                  f"{100 * m / (args.every * step):.2f} %  ({m / step:.2f} steps per measurement)")


if __name__ == "__main__":
    main()
