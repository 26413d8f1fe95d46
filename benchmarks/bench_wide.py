"""One training step of a wide layer against autograd + fused torch.optim, and against its floor.

One network d-m-1 (d = 5, m = 10^5, tanh), n = 4 and n = 80 samples, GD and Adam. Per step:

* ``condlab``: the trainer's step (``BatchedNet.loss_and_grad`` + the ``condlab.training._optim`` step;
  ``blocked`` in the output where it took the wide layer's blocked step, ``condlab._accel._wide_step``,
  ``arch`` where the architecture's pass);
* ``reference``: the same with every fast path off (``CONDLAB_REFERENCE=1``), or only those named
  by ``--without``: reference / condlab is their gain (the blocked step's, fused Adam's;
  docs/architecture.md, "Fast paths"). Its first use -- the first
  step in the process, numba's compile included -- is timed too, and the gain over a training
  of ``--train-steps`` steps with it;
* ``autograd``: W (m, d+1) and a (1, m+1) as leaf tensors, ``x_aug @ W.T``, ``tanh``,
  ``.backward()``, ``torch.optim.Adam`` / ``SGD`` with ``fused=True`` (``foreach=True`` where
  this torch has no fused kernel);
* ``floor``: the bytes a step must move -- parameters read and written, the gradient written
  and read, for Adam both moments read and written -- at the measured copy bandwidth, plus
  the activation's own measured cost: the faster of ``torch.tanh`` and numpy's SIMD
  ``np.tanh`` (what the blocked step uses) on the n*m pre-activations, at this thread count.

Targets (issue 9): condlab >= 1.5x autograd, and within 3x of the floor. Each repetition
times the contenders back to back (pairs interleaved) at 1 and 2 threads; ratios are taken
within a repetition, the median over repetitions is printed.

    python benchmarks/bench_wide.py [--width 100000] [--steps 20] [--repeat 5] [--threads 1,2]
        [--clock wall|cpu] [--points 4,80] [--optimizers gd,adam] [--train-steps 1000]
        [--without "wide blocked step"]

``--clock cpu``: this thread's CPU time instead of wall time (``--threads 1`` only), steadier
on a shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext

import numpy as np
import torch
from _machine import machine_line

from condlab._accel import reference_only
from condlab.training._arch import get_architecture
from condlab.training._models import BatchedNet, augment, init_weights
from condlab.training._optim import Hyper, get_optimizer

D, LR = 5, 1e-3
_CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
_clock = _CLOCKS["wall"]


def condlab_step(arch, x: torch.Tensor, y: torch.Tensor, optimizer: str,
                 without: list[str] | None = None) -> Callable[[], None]:
    """The trainer's step; with `without`, every part of it made and run with those fast paths off
    (all of them for an empty list)."""
    def switch():
        return nullcontext() if without is None else reference_only(*without)

    net = BatchedNet(arch, 1, x.dtype, torch.device("cpu"))
    net.load(0, init_weights(arch, 0, 0.005))
    xb, yb = augment(x)[None].contiguous(), y[None].contiguous()
    with switch():   # the optimizer looks its fast step up when it is made
        opt = get_optimizer(optimizer)(net.flat, Hyper(lr=torch.tensor(LR, dtype=x.dtype)))

    def step() -> None:
        with switch():
            net.loss_and_grad(xb, yb)
            opt.step(net.grad)

    step.blocked = lambda: net.fast_step(xb, yb) is not None   # which pass ran
    return step


def autograd_step(arch, x: torch.Tensor, y: torch.Tensor, optimizer: str) -> Callable[[], None]:
    w0, a0 = init_weights(arch, 0, 0.005)
    w, a = w0.to(x.dtype).requires_grad_(), a0.to(x.dtype).requires_grad_()
    x_aug, ones, n = augment(x), torch.ones(x.shape[0], 1, dtype=x.dtype), x.shape[0]
    make = torch.optim.Adam if optimizer == "adam" else torch.optim.SGD
    try:
        opt = make([w, a], lr=LR, fused=True)
        opt.zero_grad()
        opt.step()  # a fused kernel missing for this device/dtype fails here
    except RuntimeError:
        opt = make([w, a], lr=LR, foreach=True)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        h = torch.tanh(x_aug @ w.T)
        loss = (torch.cat([h, ones], 1) @ a.T - y).square().sum() / (2 * n)
        loss.backward()
        opt.step()

    return step


def floor_seconds(arch, n: int, dtype: torch.dtype, optimizer: str) -> float:
    """Bytes of parameters, gradient and optimizer state at copy bandwidth, plus tanh on n*m values
    (the fastest tanh here: torch's or numpy's, split over the threads as condlab does)."""
    params = sum(r * c for r, c in arch.shapes)
    passes = 8 if optimizer == "adam" else 4  # read+write of params, grad (and both moments)
    nbytes = passes * params * torch.finfo(dtype).bits // 8
    big = torch.ones(32 * 2**20 // (torch.finfo(dtype).bits // 8), dtype=dtype)  # 32 MiB: past the caches
    dst = torch.empty_like(big)
    copy = best_of(5, lambda: dst.copy_(big))
    bandwidth = 2 * big.numel() * big.element_size() / copy
    z = torch.randn(n, arch.width, dtype=dtype) * 0.01
    out = torch.empty_like(z)
    numpy_tanh = best_of(5, lambda: np.tanh(z.numpy(), out=out.numpy()))
    tanh = min(best_of(5, lambda: torch.tanh(z, out=out)), numpy_tanh)
    return nbytes / bandwidth + tanh


def best_of(repeat: int, fn: Callable[[], object], inner: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = _clock()
        for _ in range(inner):
            fn()
        times.append((_clock() - start) / inner)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=10, help="steps per timing")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--clock", choices=sorted(_CLOCKS), default="wall",
                        help="cpu: this thread's CPU time, steadier on a busy machine (--threads 1 only)")
    parser.add_argument("--dtype", default="float32,float64")
    parser.add_argument("--points", default="4,80", help="comma-separated numbers of samples n")
    parser.add_argument("--optimizers", default="gd,adam")
    parser.add_argument("--without", action="append", default=[],
                        help="the reference contender switches off only this fast path (repeatable; "
                             "default: all of them, CONDLAB_REFERENCE=1)")
    parser.add_argument("--train-steps", type=int, default=1000,
                        help="the training over which the gain with first use is computed")
    args = parser.parse_args()
    print(machine_line(threads=args.threads, dtype=args.dtype, m=args.width, clock=args.clock))
    arch = get_architecture("fc")(D, args.width, 1, 1, (_tanh(),), True)
    threads = [int(t) for t in args.threads.split(",")]
    if args.clock == "cpu" and threads != [1]:
        parser.error("--clock cpu measures one thread: use it with --threads 1")
    global _clock
    _clock = _CLOCKS[args.clock]
    print(f"torch {torch.__version__}, d={D}, m={args.width}, tanh; seconds per step, best of "
          f"{args.repeat}; ratios: median over repetitions")
    for dtype in [getattr(torch, name) for name in args.dtype.split(",")]:
        for n in [int(v) for v in args.points.split(",")]:
            gen = torch.Generator().manual_seed(n)
            x = (torch.rand(n, D, generator=gen, dtype=torch.float64) * 6 - 4).to(dtype)
            y = torch.sin(x).sum(1, keepdim=True)
            for optimizer in args.optimizers.split(","):
                measure(arch, x, y, optimizer, threads, args)


def measure(arch, x, y, optimizer: str, threads: list[int], args) -> None:
    ours, ref = condlab_step(arch, x, y, optimizer), condlab_step(arch, x, y, optimizer, args.without)
    theirs = autograd_step(arch, x, y, optimizer)
    torch.set_num_threads(threads[0])
    first = {"condlab": seconds_once(ours), "reference": seconds_once(ref)}   # first use included
    name = f"{str(x.dtype).removeprefix('torch.'):>8} n={x.shape[0]:<3} {optimizer:<4}"
    for t in threads:
        torch.set_num_threads(t)
        floor = floor_seconds(arch, x.shape[0], x.dtype, optimizer)
        runs = [(best_of(1, ours, args.steps), best_of(1, ref, args.steps), best_of(1, theirs, args.steps))
                for _ in range(args.repeat)]
        c, r, a = (min(run[k] for run in runs) for k in range(3))
        gains = [run[1] / run[0] for run in runs]
        k = args.train_steps - 1
        with_first = (first["reference"] + k * r) / (first["condlab"] + k * c)
        print(f"{name} threads={t} {'blocked' if ours.blocked() else 'arch'}: condlab {c * 1e3:7.2f} ms  "
              f"reference {r * 1e3:7.2f} ms  autograd {a * 1e3:7.2f} ms  floor {floor * 1e3:6.2f} ms  ->  "
              f"gain {statistics.median(gains):4.2f}x (range {min(gains):.2f}-{max(gains):.2f}), "
              f"{statistics.median(q[2] / q[0] for q in runs):4.2f}x autograd (target 1.5x), "
              f"{c / floor:4.1f}x the floor (target <= 3x)")
    print(f"{name} first step in this process: condlab {first['condlab']:.2f} s, reference "
          f"{first['reference']:.2f} s; gain over {args.train_steps} steps with it: {with_first:.2f}x")


def seconds_once(fn: Callable[[], None]) -> float:
    start = _clock()
    fn()
    return _clock() - start


def _tanh():
    from condlab.activations._activations import get_activation

    return get_activation("tanh")


if __name__ == "__main__":
    main()
