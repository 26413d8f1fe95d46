"""Batched training vs. a loop of nn.Module + torch.optim.Adam, one run after another.

Trains R runs of the Fig. 3 network (5-50-1, tanh, n = 80, full-batch Adam) both ways in the
same process and prints the speed-up, for float32 and float64. Target: >= 25x on 2 CPU cores.

    python benchmarks/bench_batched.py [--runs 64] [--epochs 1000] [--loop-runs 8]

The loop is timed on --loop-runs runs and scaled to R (each run costs the same; the loop does
not batch). Timings are the best of --repeat repetitions.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

import condlab
from condlab._data import make_dataset
from condlab._models import Architecture, BatchedNet, init_weights
from condlab._records import RunSpec
from condlab._training import train_batch


def loop_one(arch: Architecture, weights, x, y, lr: float, epochs: int) -> None:
    d, m = arch.d, arch.width
    model = nn.Sequential(nn.Linear(d, m), nn.Tanh(), nn.Linear(m, 1)).to(x.dtype)
    with torch.no_grad():
        model[0].weight.copy_(weights[0][:, :-1])
        model[0].bias.copy_(weights[0][:, -1])
        model[2].weight.copy_(weights[1][:, :-1])
        model[2].bias.copy_(weights[1][:, -1])
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        opt.zero_grad()
        loss = 0.5 * (model(x) - y).square().sum(1).mean()
        loss.backward()
        opt.step()


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--loop-runs", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    cfg = condlab.preset("fig3")
    data = make_dataset(cfg.data)
    arch = Architecture.from_config(cfg.model, cfg.data.d)
    specs = [RunSpec(seed, 0.005, 1e-3) for seed in range(args.runs)]
    inits = [init_weights(arch, s.seed, s.init_std) for s in specs]
    print(f"threads={torch.get_num_threads()} torch={torch.__version__} R={args.runs} "
          f"epochs={args.epochs} network=5-50-1 tanh n=80")
    for dtype in (torch.float32, torch.float64):
        t_batched, t_loop = measure(arch, specs, inits, data, dtype, args)
        print(f"{str(dtype).removeprefix('torch.'):>8}: batched {t_batched:7.2f} s   "
              f"loop {t_loop:7.2f} s (scaled from {args.loop_runs} runs)   "
              f"speed-up {t_loop / t_batched:5.1f}x")


def measure(arch, specs, inits, data, dtype, args) -> tuple[float, float]:
    """Seconds for R runs batched, and for R runs one after another (scaled from loop_runs)."""
    x = torch.as_tensor(data.x, dtype=dtype)
    y = torch.as_tensor(data.y, dtype=dtype)

    def batched():
        net = BatchedNet(arch, len(specs), dtype, torch.device("cpu"))
        for r, w in enumerate(inits):
            net.load(r, w)
        train_batch(net, x, y, specs, optimizer="adam", epochs=args.epochs,
                    snapshot_at=[0, 100, args.epochs])

    def loop():
        for r in range(args.loop_runs):
            loop_one(arch, [w.to(dtype) for w in inits[r]], x, y, 1e-3, args.epochs)

    t_batched = best_of(args.repeat, batched)
    return t_batched, best_of(args.repeat, loop) * args.runs / args.loop_runs

if __name__ == "__main__":
    main()
