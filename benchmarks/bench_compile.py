"""Would ``torch.compile`` of a hand-written training step pay off? Compile time and step time.

The Fig. 3 network (5-50-1, tanh, n = 80), R runs, Adam: condlab's eager step
(``BatchedNet.loss_and_grad`` + the fused Adam step) against the same forward and hand-written
backward written as one pure function and compiled by ``torch.compile`` (inductor, C++ code
through the system compiler), followed by the same fused Adam step. Prints the compile time
(first call), the CPU seconds per step of both (best of --repeat, 1 thread), the largest relative
difference of the gradients, and after how many steps the compiled step has paid for its
compilation. condlab does not compile by default; this script is how that choice is checked.

    python benchmarks/bench_compile.py [--runs 64] [--steps 200] [--dtype float32]
"""

from __future__ import annotations

import argparse
import time

import torch
from _machine import machine_line

import condlab
from condlab.records._records import RunSpec
from condlab.training._data import make_dataset
from condlab.training._models import Architecture, BatchedNet, augment, init_weights
from condlab.training._trainer import make_optimizer


def step_function(n: int, runs: int, m: int):
    """Loss (R,) and the gradients of W (R, m, d+1) and a (R, 1, m+1): eq. (3)'s, by hand."""
    def step(x_aug: torch.Tensor, y: torch.Tensor, w: torch.Tensor, a: torch.Tensor):
        h = torch.tanh(torch.bmm(x_aug, w.transpose(1, 2)))              # (R, n, m)
        f = torch.bmm(h, a[:, :, :m].transpose(1, 2)) + a[:, None, :, m]  # (R, n, 1)
        residual = f - y
        delta = residual / n
        g_a = torch.cat([torch.bmm(delta.transpose(1, 2), h), delta.sum(1, keepdim=True)], 2)
        g_z = (1 - h * h) * delta * a[:, :, :m]                           # (R, n, m)
        g_w = torch.bmm(x_aug.transpose(1, 2), g_z).transpose(1, 2)       # (R, m, d+1)
        return residual.square().sum((1, 2)) / (2 * n), g_w, g_a
    return step


def best_of(repeat: int, steps: int, fn) -> float:
    """Best CPU seconds of this (single) thread per call: robust on a machine shared with others."""
    times = []
    for _ in range(repeat):
        start = time.thread_time()
        for _ in range(steps):
            fn()
        times.append((time.thread_time() - start) / steps)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    print(machine_line(threads=1, dtype=args.dtype, R=args.runs))
    torch.set_num_threads(1)
    dtype = getattr(torch, args.dtype)
    cfg = condlab.preset("fig3")
    data = make_dataset(cfg.data)
    arch = Architecture.from_config(cfg.model, cfg.data.d)
    specs = [RunSpec(s, 0.005, 1e-3) for s in range(args.runs)]
    net = BatchedNet(arch, args.runs, dtype, torch.device("cpu"))
    for r, s in enumerate(specs):
        net.load(r, init_weights(arch, s.seed, s.init_std))
    x, y = torch.as_tensor(data.x, dtype=dtype), torch.as_tensor(data.y, dtype=dtype)
    xb, yb = augment(x).expand(args.runs, -1, -1).contiguous(), y.expand(args.runs, -1, -1).contiguous()
    opt = make_optimizer("adam", net, specs)

    def eager() -> None:
        net.loss_and_grad(xb, yb)
        opt.step(net.grad)

    compiled_fn = torch.compile(step_function(x.shape[0], args.runs, arch.width), dynamic=False)
    w, a = net.weights

    def compiled() -> None:
        _, g_w, g_a = compiled_fn(xb, yb, w, a)
        net.grads[0].copy_(g_w)
        net.grads[1].copy_(g_a)
        opt.step(net.grad)

    start = time.perf_counter()
    _, g_w, g_a = compiled_fn(xb, yb, w, a)
    compile_s = time.perf_counter() - start
    net.loss_and_grad(xb, yb)
    pairs = ((g_w, net.grads[0]), (g_a, net.grads[1]))
    diff = max(((g - ref).abs().max() / ref.abs().max()).item() for g, ref in pairs)
    t_eager = best_of(args.repeat, args.steps, eager)
    t_compiled = best_of(args.repeat, args.steps, compiled)
    gain = t_eager - t_compiled
    pays = f"after {compile_s / gain:,.0f} steps" if gain > 0 else "never"
    print(f"{args.dtype}, R={args.runs}, 1 thread: compile {compile_s:.1f} s; "
          f"eager {t_eager * 1e6:.0f} us/step, compiled {t_compiled * 1e6:.0f} us/step "
          f"({t_eager / t_compiled:.2f}x); gradients agree to {diff:.1e} (relative); "
          f"compiling pays off {pays}")


if __name__ == "__main__":
    main()
