"""Writing run records vs. training them: the ratio write / train, measured in one process.

Two cases of issue 9 (target: ratio <= 1 in both, at 1 and at 2 threads):

* ``fig3``: the fig3 preset, R = 256 seeds, 1000 epochs, snapshots every 10 epochs (101);
* ``wide``: one run of the fig5 network (1-D input, n = 40) with m = 10^5 and 31 snapshots.

Each repetition trains the batch (``condlab.train`` without ``out``), then writes its records
(``condlab``'s writer) and, as the reference, the writer of condlab 0.1.0 (float64 upcast,
``savez_compressed``, temp file + fsync + rename for every file); the three are interleaved
and the median ratio is printed. The legacy writer is part of this file, so the comparison
runs on the same machine in the same process.

    python benchmarks/bench_records.py [--case fig3|wide|all] [--repeat 3] [--threads 1,2]
    python benchmarks/bench_records.py --memory

``--memory`` trains and writes one run whose snapshots dominate its memory (m = 10^5, n = 4,
301 snapshots: 361 MB of float32 snapshots) in a fresh process and prints the growth of the
peak resident set over the snapshot bytes (target: at most 2 copies).
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from _machine import machine_line

import condlab
from condlab.training._api import _write_batch


def _legacy_write_bytes(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _legacy_npz(path: Path, arrays: dict) -> None:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    _legacy_write_bytes(path, buf.getvalue())


def legacy_write(result, out: Path) -> None:
    """condlab 0.1.0's record writer: float64 snapshots, compressed, one fsync per file."""
    import json

    out.mkdir(parents=True)
    for i, run in enumerate(result.runs):
        partial = out / f"seed{i}.partial"
        partial.mkdir()
        _legacy_write_bytes(partial / "config.json", json.dumps(run.config.to_dict()).encode())
        lines = ["epoch,loss"] + [f"{e},{v:.17g}" for e, v in enumerate(run.loss)]
        _legacy_write_bytes(partial / "loss.csv", ("\n".join(lines) + "\n").encode())
        weights = {k: np.asarray(run.weights[k], dtype=np.float64) for k in run.weights}
        _legacy_npz(partial / "snapshots.npz", {"epochs": run.epochs, **weights})
        _legacy_npz(partial / "data.npz", {"x": run.x, "y": run.y})
        _legacy_write_bytes(partial / "meta.json", json.dumps({"seed": run.spec.seed}).encode())
        os.replace(partial, out / f"seed{i}")


def _config(case: str) -> condlab.Config:
    if case == "fig3":
        return condlab.preset("fig3").with_overrides(
            ["train.epochs=1000", "train.seeds=256", "train.snapshots=every:10"])
    return condlab.preset("fig5").with_overrides(
        ["model.width=100000", "train.epochs=200", "train.snapshots=log:31"])


def _seeds(cfg: condlab.Config, case: str) -> condlab.Config:
    return cfg.with_overrides([f"train.seeds={list(range(256))}"]) if case == "fig3" else cfg


def measure(case: str, repeat: int, root: Path) -> dict[str, float]:
    cfg = _seeds(_config(case), case)
    ratios: dict[str, list[float]] = {"new": [], "legacy": []}
    for i in range(repeat):
        start = time.perf_counter()
        result = condlab.train(cfg, progress=False)
        train_s = time.perf_counter() - start
        for name in ("new", "legacy") if i % 2 == 0 else ("legacy", "new"):
            out = root / f"{case}-{name}-{i}"
            start = time.perf_counter()
            if name == "new":
                result.out = out
                _write_batch(result, cfg, dict(result.runs[0].meta))
            else:
                legacy_write(result, out)
            ratios[name].append((time.perf_counter() - start) / train_s)
            shutil.rmtree(out)
        print(f"  {case} rep {i}: train {train_s:.2f} s, write/train new {ratios['new'][-1]:.2f}, "
              f"legacy {ratios['legacy'][-1]:.2f}", flush=True)
    return {k: statistics.median(v) for k, v in ratios.items()}


_MEMORY = """
import sys, tempfile
import condlab

def peak():
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))

cfg = condlab.preset("fig5").with_overrides(["model.width=100000", "data.n=4", "train.epochs=300",
                                            "train.snapshots=every:1", "train.seeds=[0]"])
condlab.train(cfg.with_overrides(["train.epochs=2"]), progress=False)   # warm up every code path
base = peak()
result = condlab.train(cfg, out=tempfile.mkdtemp(), progress=False)
snap = sum(w.nbytes for w in result[0].weights.values())
print(f"snapshots {snap / 2**20:.0f} MiB; peak resident growth {(peak() - base) / 2**20:.0f} MiB "
      f"= {(peak() - base) / snap:.2f} copies (target <= 2)")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=["fig3", "wide", "all"], default="all")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--dir", help="where to write (default: a temporary directory)")
    parser.add_argument("--memory", action="store_true", help="peak memory of recording, in copies")
    args = parser.parse_args()
    print(machine_line(threads=args.threads, dtype="float32 (fig3 preset)"))
    if args.memory:
        import subprocess
        import sys

        subprocess.run([sys.executable, "-c", _MEMORY], check=True)
        return
    cases = ["fig3", "wide"] if args.case == "all" else [args.case]
    root = Path(tempfile.mkdtemp(prefix="bench-records-", dir=args.dir))
    try:
        for threads in (int(t) for t in args.threads.split(",")):
            torch.set_num_threads(threads)
            for case in cases:
                r = measure(case, args.repeat, root)
                verdict = "meets" if r["new"] <= 1.0 else "MISSES"
                print(f"{threads} thread(s), {case}: write/train = {r['new']:.2f} ({verdict} <= 1); "
                      f"legacy writer {r['legacy']:.2f}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
