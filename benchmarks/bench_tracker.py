"""Overhead of condlab.Tracker: a small MLP's whole training loop, and a ResNet18-size model's step.

MLP (default, issue 20): the digits-size MLP 64-200-200-10 (ReLU, Adam, cross-entropy, batch 32,
CPU or --device cuda). Pairs of the same loop, N steps without and N steps with a Tracker at
every=50 (its record written to a temporary folder, as a user would), are timed alternately,
the order of the two swapped every pair; the ratio of their medians is the cost. The tracker
is made before and closed after the timed loop, and both are timed apart (once per run):
``start`` (made, its worker process started, and its first measurement counted: the worker's
start-up would otherwise fall on the first steps of a loop this short) and ``close`` (the
record put on disk with one syncfs). Also printed: within each tracked loop, the seconds spent
inside ``tracker.step`` over the seconds of the rest of that loop (less exposed to the drift
between loops on a shared machine than the ratio of two loops). The loop
without a tracker is the baseline a careful user would write (same model, data, optimizer).
Variants: the default tracker (its count in a worker process), with snapshots, counting in
the training process ("in-process", ``background=False``), and that with numpy's BLAS left at
its default thread count ("blas-default", what condlab did before issue 20). ``close`` waits
for the counts still in the worker (at most MAX_PENDING + 1 measurements): its median is
printed apart, and the ratio with it spread over the loop.

    python benchmarks/bench_tracker.py [--pairs 5] [--steps 500] [--device cpu]

ResNet (--model resnet, issue 12): condlab's Fig. 2 network, 11.7 M parameters.

A user's step (forward, cross-entropy, backward, Adam on all parameters, batch of 32x32 images)
and one Tracker measurement (all 23 conv + FC layers counted, optionally snapshotted) are timed
alternately in one process, at 1 and 2 threads. The overhead at every=N is

    overhead = t_measure / (N * t_step)

Target (issue 12): < 5 % at every=50. A smaller batch makes the step cheaper and the overhead
look larger, so the default batch (64) is on the conservative side of usual CIFAR training.

    python benchmarks/bench_tracker.py --model resnet [--batch 64] [--pairs 3] [--every 50]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from _machine import machine_line

import condlab
from condlab.training._cnn import make_cifar_net


def _mlp_loop(steps: int, device: str, batch: int, tracker_kwargs: dict | None, blas_default: bool,
              key: str = "warm-up") -> float:
    """Seconds for `steps` steps of the MLP loop, with a fresh Tracker when tracker_kwargs is given."""
    from condlab.models import _tracker

    g = torch.Generator().manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 200), torch.nn.ReLU(), torch.nn.Linear(200, 200),
                              torch.nn.ReLU(), torch.nn.Linear(200, 10)).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.randn(1024, 64, generator=g).to(device)
    y = torch.randint(0, 10, (1024,), generator=g).to(device)
    saved = _tracker.one_blas_thread
    if blas_default:
        _tracker.one_blas_thread = contextlib.nullcontext
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            tracker = None if tracker_kwargs is None else condlab.Tracker(net, out=Path(tmp) / "run",
                                                                          **tracker_kwargs)
            if tracker is not None:  # made, its worker started and its first count back: timed apart
                _ = tracker.rows
                START_BY.setdefault(key, []).append(time.perf_counter() - t0)
            _sync(device)
            inside = 0.0
            t0 = time.perf_counter()
            for t in range(steps):
                i = (t * batch) % 1024
                loss = F.cross_entropy(net(x[i:i + batch]), y[i:i + batch])
                opt.zero_grad()
                loss.backward()
                opt.step()
                if tracker is not None:
                    t1 = time.perf_counter()
                    tracker.step(0, loss)
                    inside += time.perf_counter() - t1
            _sync(device)
            took = time.perf_counter() - t0
            if tracker is not None:
                INSIDE[key].append(inside / (took - inside))
            if tracker is not None:  # once per run, not per step: timed apart (CLOSE)
                t0 = time.perf_counter()
                tracker.close()
                CLOSE_BY.setdefault(key, []).append(time.perf_counter() - t0)
            return took
    finally:
        _tracker.one_blas_thread = saved


CLOSE_BY: dict[str, list[float]] = {}  # variant -> seconds of each Tracker.close
START_BY: dict[str, list[float]] = {}  # variant -> seconds to make it and count its first measurement
INSIDE: dict[str, list[float]] = {}  # variant -> per loop: seconds inside tracker.step / the rest


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def bench_mlp(args: argparse.Namespace) -> None:
    variants = {"tracker": (dict(every=args.every), False),
                "tracker+snapshots": (dict(every=args.every, snapshots=True), False),
                "in-process": (dict(every=args.every, background=False), False),
                "blas-default": (dict(every=args.every, background=False), True)}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        INSIDE.clear()
        INSIDE.update({k: [] for k in ("warm-up", *variants)})
        _mlp_loop(100, args.device, args.batch, dict(every=args.every), False)  # warm-up
        times: dict[str, list[float]] = {"plain": [], **{k: [] for k in variants}}
        for pair in range(args.pairs):
            for name in variants:
                order = ["plain", name] if pair % 2 == 0 else [name, "plain"]
                for k in order:
                    kw, blas = (None, False) if k == "plain" else variants[k]
                    times[k].append(_mlp_loop(args.steps, args.device, args.batch, kw, blas, k))
        plain = statistics.median(times["plain"])
        print(f"MLP 64-200-200-10, {args.device}, threads={threads}, {args.steps} steps, batch {args.batch}, "
              f"every={args.every}: plain loop {plain:.3f} s (median of {len(times['plain'])})")
        for k in variants:
            m = statistics.median(times[k])
            inside = 100 * statistics.median(INSIDE[k])
            close, start = statistics.median(CLOSE_BY[k]), statistics.median(START_BY[k])
            print(f"  {k:<18} {m:.3f} s  ratio {m / plain:.3f}  ({100 * (m / plain - 1):+.1f} %);  "
                  f"inside tracker.step: {inside:.1f} % of the rest of its loop; start {start:.3f} s, "
                  f"close {close:.3f} s (with both: {100 * ((m + start + close) / plain - 1):+.1f} %)")
        CLOSE_BY.clear()
        START_BY.clear()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["mlp", "resnet"], default="mlp")
    ap.add_argument("--batch", type=int, help="default: 32 (mlp), 64 (resnet)")
    ap.add_argument("--pairs", type=int, help="default: 5 (mlp), 3 (resnet)")
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--steps", type=int, help="steps timed per pair: default 500 (mlp), 3 (resnet)")
    ap.add_argument("--device", default="cpu", help="mlp: cpu or cuda")
    args = ap.parse_args()
    print(machine_line(threads="see below", dtype="float32", device=args.device))
    mlp = args.model == "mlp"
    args.batch = args.batch or (32 if mlp else 64)
    args.pairs = args.pairs or (5 if mlp else 3)
    args.steps = args.steps or (500 if mlp else 3)
    if mlp:
        bench_mlp(args)
        return
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
