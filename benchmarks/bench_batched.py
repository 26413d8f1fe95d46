"""Batched training against a per-run loop and against batched autograd, at 1 and 2 threads.

R runs of the Fig. 3 network (5-50-1, tanh, n = 80, full-batch Adam, lr 1e-3, 1000 epochs),
trained three ways in one process, in float32 and float64:

* ``condlab``: ``train_batch`` (the trainer itself: loss record, snapshots, divergence checks);
* ``reference``: the same with every fast path off (``CONDLAB_REFERENCE=1``), or only those named
  by ``--without``: reference / condlab is their gain (here: the one-layer numpy step,
  ``condlab._accel._cpu_step``, and fused Adam; docs/architecture.md, "Fast paths"); the first
  training of each in the process (its first use included) is printed too;
* ``loop``: one ``nn.Sequential`` + ``torch.optim.Adam`` per run, one run after the other
  (timed on --loop-runs runs and scaled to R: each run costs the same);
* ``autograd``: what a careful user writes to batch by hand -- weights stacked as (R, m, d+1)
  and (R, 1, m+1), ``bmm``, ``.backward()``, ``torch.optim.Adam`` with ``fused=True`` (and
  ``foreach=True``; the faster of the two is the baseline).

Targets (issue 9): condlab >= 25x the loop in float32 and float64, and >= 2x batched autograd.
Each repetition times every contender back to back at each thread count (pairs interleaved);
a ratio is taken within one repetition and the median over repetitions is printed, with the
best times. Timings on a shared machine are noisy; the ratios are what to read.

    python benchmarks/bench_batched.py [--runs 64] [--epochs 1000] [--loop-runs 4] [--repeat 3]
        [--threads 1,2] [--clock wall|cpu] [--step-parallel-min N] [--only condlab,reference]
        [--without "fused Adam"]

``--clock cpu`` times each contender by this thread's CPU time (``--threads 1`` only): on a
machine shared with other work, wall-clock ratios swing by 2-10x, CPU-time ratios much less.

The one-layer step's tanh is numpy's or torch's, chosen by measurement at its first use
(``condlab._accel._kernels``); the machine (CPU model, vector ISA) and the choice are printed
with the figures. ``--tanh both`` adds the contenders ``tanh-numpy`` and ``tanh-torch``
(condlab with each forced): whether the choice was the faster one on this machine.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from _machine import machine_line
from torch import nn

import condlab
from condlab._accel import _cpu_step, _kernels, reference_only
from condlab.records._records import RunSpec
from condlab.training._data import make_dataset
from condlab.training._models import Architecture, BatchedNet, init_weights
from condlab.training._trainer import train_batch

LR = 1e-3
_CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
_clock = _CLOCKS["wall"]


def loop_one(weights: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor, epochs: int) -> None:
    """One run as a plain nn.Module with torch.optim.Adam (PyTorch's default implementation)."""
    (m, d1), _ = weights[0].shape, weights[1].shape
    model = nn.Sequential(nn.Linear(d1 - 1, m), nn.Tanh(), nn.Linear(m, 1)).to(x.dtype)
    with torch.no_grad():
        model[0].weight.copy_(weights[0][:, :-1])
        model[0].bias.copy_(weights[0][:, -1])
        model[2].weight.copy_(weights[1][:, :-1])
        model[2].bias.copy_(weights[1][:, -1])
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    for _ in range(epochs):
        opt.zero_grad()
        loss = 0.5 * (model(x) - y).square().sum(1).mean()
        loss.backward()
        opt.step()


def autograd_batched(inits: list[list[torch.Tensor]], x: torch.Tensor, y: torch.Tensor, epochs: int,
                     mode: str) -> None:
    """R runs as stacked weights, bmm, .backward() and one torch.optim.Adam (fused or foreach)."""
    runs, n = len(inits), x.shape[0]
    w = torch.stack([i[0] for i in inits]).to(x.dtype).requires_grad_()    # (R, m, d+1)
    a = torch.stack([i[1] for i in inits]).to(x.dtype).requires_grad_()    # (R, 1, m+1)
    x_aug = torch.cat([x, torch.ones(n, 1, dtype=x.dtype)], 1).expand(runs, -1, -1).contiguous()
    yb = y.expand(runs, -1, -1)
    ones = torch.ones(runs, n, 1, dtype=x.dtype)
    opt = torch.optim.Adam([w, a], lr=LR, **{mode: True})
    for _ in range(epochs):
        opt.zero_grad(set_to_none=True)
        h = torch.tanh(torch.bmm(x_aug, w.transpose(1, 2)))                 # (R, n, m)
        f = torch.bmm(torch.cat([h, ones], 2), a.transpose(1, 2))           # (R, n, 1)
        # the sum over runs of each run's loss: every run gets its own gradient
        loss = (f - yb).square().sum() / (2 * n)
        loss.backward()
        opt.step()


def condlab_batched(arch, specs, inits, x, y, epochs: int) -> None:
    net = BatchedNet(arch, len(specs), x.dtype, torch.device("cpu"))
    for r, w in enumerate(inits):
        net.load(r, w)
    train_batch(net, x, y, specs, optimizer="adam", epochs=epochs, snapshot_at=[0, 100, epochs])


def without_fast_paths(fn: Callable[[], None], names: list[str]) -> None:
    with reference_only(*names):
        fn()


def tanh_forced(fn: Callable[[], None], which: str) -> None:
    with _kernels.forced("tanh", which):
        fn()


def seconds(fn: Callable[[], None]) -> float:
    start = _clock()
    fn()
    return _clock() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--loop-runs", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--clock", choices=sorted(_CLOCKS), default="wall",
                        help="cpu: this thread's CPU time, steadier on a busy machine (--threads 1 only)")
    parser.add_argument("--step-parallel-min", type=int, default=None,
                        help="override condlab._accel._cpu_step.STEP_PARALLEL_MIN (work per thread "
                             "above which the one-layer step is split over threads); 65536 splits the "
                             "float32 Fig. 3 step")
    parser.add_argument("--without", action="append", default=[],
                        help="the reference contender switches off only this fast path (repeatable; "
                             "default: all of them, CONDLAB_REFERENCE=1)")
    parser.add_argument("--only", default=None,
                        help="comma-separated contenders to time (condlab, reference, autograd, loop, tanh)")
    parser.add_argument("--tanh", choices=["measured", "both"], default="measured",
                        help="both: also time condlab with numpy's and with torch's tanh forced")
    args = parser.parse_args()
    if args.step_parallel_min is not None:
        _cpu_step.STEP_PARALLEL_MIN = args.step_parallel_min

    cfg = condlab.preset("fig3")
    data = make_dataset(cfg.data)
    arch = Architecture.from_config(cfg.model, cfg.data.d)
    specs = [RunSpec(seed, 0.005, LR) for seed in range(args.runs)]
    inits = [init_weights(arch, s.seed, s.init_std) for s in specs]
    threads = [int(t) for t in args.threads.split(",")]
    if args.clock == "cpu" and threads != [1]:
        parser.error("--clock cpu measures one thread: use it with --threads 1")
    global _clock
    _clock = _CLOCKS[args.clock]
    print(f"torch {torch.__version__}, R={args.runs}, epochs={args.epochs}, network 5-50-1 tanh, n=80, "
          f"Adam; loop scaled from {args.loop_runs} runs; median ratio of {args.repeat} repetitions")
    for dtype in (torch.float32, torch.float64):
        times = measure(arch, specs, inits, data, dtype, threads, args)
        name = str(dtype).removeprefix("torch.")
        print(machine_line(threads=args.threads, dtype=name, R=args.runs, clock=args.clock))
        print(f"{name:>8} tanh of the one-layer step: {_kernels.choices().get(f'tanh {name}', 'not used')}")
        for t in threads:
            report(name, t, times[t])


def measure(arch, specs, inits, data, dtype, threads: list[int], args) -> dict[int, dict[str, list[float]]]:
    """threads -> contender -> seconds per repetition (the loop scaled to R runs)."""
    x = torch.as_tensor(data.x, dtype=dtype)
    y = torch.as_tensor(data.y, dtype=dtype)
    ours = lambda: condlab_batched(arch, specs, inits, x, y, args.epochs)   # noqa: E731
    contenders = {
        "condlab": ours,
        "reference": lambda: without_fast_paths(ours, args.without),
        "autograd-fused": lambda: autograd_batched(inits, x, y, args.epochs, "fused"),
        "autograd-foreach": lambda: autograd_batched(inits, x, y, args.epochs, "foreach"),
        "loop": lambda: [loop_one([w.to(dtype) for w in inits[r]], x, y, args.epochs)
                         for r in range(args.loop_runs)],
    }
    if args.tanh == "both":
        contenders["tanh-numpy"] = lambda: tanh_forced(ours, "fast")
        contenders["tanh-torch"] = lambda: tanh_forced(ours, "reference")
    if args.only:
        keep = args.only.split(",")
        contenders = {k: v for k, v in contenders.items() if k in keep or k.split("-")[0] in keep}
    torch.set_num_threads(threads[0])
    first = {}
    for name, fn in contenders.items():  # warm-up: first-call costs out of the timings (timed: first use)
        if name != "loop":
            first[name] = seconds(fn)
    if "condlab" in first and "reference" in first:
        print(f"{str(dtype).removeprefix('torch.'):>8} first training in this process (first use included): "
              f"condlab {first['condlab']:.2f} s, reference {first['reference']:.2f} s "
              f"-> {first['reference'] / first['condlab']:.2f}x")
    times: dict[int, dict[str, list[float]]] = {t: {k: [] for k in contenders} for t in threads}
    for _ in range(args.repeat):
        for t in threads:
            torch.set_num_threads(t)
            for name, fn in contenders.items():
                scale = args.runs / args.loop_runs if name == "loop" else 1.0
                times[t][name].append(seconds(fn) * scale)
    return times


def report(dtype: str, threads: int, times: dict[str, list[float]]) -> None:
    """Median over repetitions of the per-repetition ratios; the strongest autograd per repetition."""
    ours = times["condlab"]
    if "tanh-numpy" in times:
        forced = {k: statistics.median(f / c for f, c in zip(times[k], ours, strict=True))
                  for k in ("tanh-numpy", "tanh-torch")}
        print(f"{dtype:>8} threads={threads}: condlab {min(ours):6.2f} s  with numpy's tanh "
              f"{min(times['tanh-numpy']):6.2f} s ({forced['tanh-numpy']:.2f}x its time), with torch's "
              f"{min(times['tanh-torch']):6.2f} s ({forced['tanh-torch']:.2f}x)")
    if "reference" in times:
        gains = [r / c for r, c in zip(times["reference"], ours, strict=True)]
        print(f"{dtype:>8} threads={threads}: condlab {min(ours):6.2f} s  reference "
              f"{min(times['reference']):6.2f} s  ->  fast path gain {statistics.median(gains):4.2f}x "
              f"(range {min(gains):.2f}-{max(gains):.2f})")
    if "autograd-fused" not in times:
        return
    autograd = [min(a, b) for a, b in zip(times["autograd-fused"], times["autograd-foreach"], strict=True)]
    vs_auto = statistics.median(a / c for a, c in zip(autograd, ours, strict=True))
    best = {k: min(v) for k, v in times.items()}
    if "loop" not in times:   # --only without the loop (its 60+ s a repetition)
        print(f"{dtype:>8} threads={threads}: condlab {best['condlab']:6.2f} s  autograd fused "
              f"{best['autograd-fused']:6.2f} s / foreach {best['autograd-foreach']:6.2f} s  ->  "
              f"{vs_auto:4.2f}x batched autograd (target 2x; range "
              f"{min(a / c for a, c in zip(autograd, ours, strict=True)):.2f}-"
              f"{max(a / c for a, c in zip(autograd, ours, strict=True)):.2f})")
        return
    vs_loop = statistics.median(loop / c for loop, c in zip(times["loop"], ours, strict=True))
    print(f"{dtype:>8} threads={threads}: condlab {best['condlab']:6.2f} s  autograd fused "
          f"{best['autograd-fused']:6.2f} s / foreach {best['autograd-foreach']:6.2f} s  loop "
          f"{best['loop']:7.2f} s  ->  {vs_loop:5.1f}x the loop (target 25x), "
          f"{vs_auto:4.2f}x batched autograd (target 2x)")


if __name__ == "__main__":
    main()
