"""`condlab report`: page size and generation time against the time the result took to compute.

Issue 21 asks for pages <= 20 MB and generation <= 10 % of the compute. Cases (each computed
here, in a temporary folder, unless a folder is given):

    fig3      condlab reproduce fig3 --quick          (--fig3 DIR: any reproduce folder, e.g. a full one)
    phase     condlab phase-diagram --smoke           (--phase DIR)
    sweep256  256 Fig. 3 runs in one batch, 1000 epochs (--sweep DIR)
    wide      one run of width 10^5 (d = 1, n = 80, 1000 epochs, snapshots log:30)  (--wide DIR: any run)

compute: what the result records (claims.json's seconds; the sweep's wall time; the run's
training seconds). generation: `render_page` in a fresh process, whole (interpreter start and
imports: what `condlab report` costs) and without the imports (a second page in that process),
each as wall time and as CPU time (on a shared machine the wall time of a process that waits for
a core says little; CPU time is what it needs).

    python benchmarks/bench_report.py [--only fig3,wide] [--fig3 DIR] [--phase DIR] [--sweep DIR]
                                      [--wide DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _machine import machine_line

MEASURE = """
import sys, time, json
from condlab.report import render_page
text = render_page(sys.argv[1])
t1, c1 = time.perf_counter(), time.process_time()
render_page(sys.argv[1])
print(json.dumps({"warm": time.perf_counter() - t1, "warm_cpu": time.process_time() - c1,
                  "bytes": len(text.encode())}))
"""


def measure(folder: Path) -> dict:
    """Wall and CPU seconds of one page in a fresh process (its second page subtracted), and of
    a second page in that process."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", MEASURE, str(folder)], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"rendering {folder} failed:\n{done.stderr[-3000:]}")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result = json.loads(done.stdout.splitlines()[-1])
    return {**result, "process": wall - result["warm"], "process_cpu": cpu - result["warm_cpu"]}


def fig3(tmp: Path) -> tuple[Path, float]:
    from condlab.reproduce import reproduce

    reproduce("fig3", quick=True, out=tmp / "reproduce")
    return tmp / "reproduce" / "fig3", _claims_seconds(tmp / "reproduce" / "fig3")


def _claims_seconds(folder: Path) -> float:
    one = folder / "claims.json"
    files = [one] if one.is_file() else sorted(folder.glob("*/claims.json"))
    return sum(json.loads(f.read_text())["seconds"] for f in files)


def phase(tmp: Path) -> tuple[Path, float]:
    from condlab.phase import phase_diagram, preset_spec

    start = time.perf_counter()
    phase_diagram(preset_spec("smoke"), out=tmp / "phase")
    return tmp / "phase", time.perf_counter() - start


def sweep256(tmp: Path) -> tuple[Path, float]:
    import condlab

    grid = {"train.lr": [1e-3, 5e-4, 2.5e-4, 1.25e-4], "model.init_std": [0.005, 0.01, 0.02, 0.04]}
    spec = {"name": "b256", "base": "fig3", "grid": grid, "seeds": 16}
    result = condlab.sweep(spec, out=tmp / "sweep256", progress=False)
    return tmp / "sweep256", result.seconds


def wide(tmp: Path) -> tuple[Path, float]:
    import condlab

    cfg = condlab.preset("fig3").with_overrides(["model.width=100000", "data.d=1", "data.n=80",
                                                 "train.epochs=1000", "train.snapshots=log:30"])
    run = condlab.train(cfg, out=tmp / "wide", progress=False)[0]
    return run.path, float(run.meta["seconds"])


def _given(folder: str) -> tuple[Path, float]:
    """A result folder computed before: its recorded time (reproduce: claims.json; phase: its sweep;
    a run: meta.json)."""
    path = Path(folder)
    if (path / "meta.json").is_file():  # one run: its training seconds
        return path, float(json.loads((path / "meta.json").read_text())["seconds"])
    if (path / "regimes.csv").is_file():
        return path, json.loads((path / "claims.json").read_text())["sweep"]["seconds"]
    if (path / "plan.json").is_file():
        metas = [json.loads(p.read_text()) for p in (path / "runs").glob("*/meta.json")]
        return path, sum(m["seconds"] / m["batch_runs"] for m in metas)
    return path, _claims_seconds(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="fig3,phase,sweep256,wide")
    parser.add_argument("--fig3")
    parser.add_argument("--phase")
    parser.add_argument("--sweep")
    parser.add_argument("--wide")
    args = parser.parse_args()
    print(machine_line(threads=os.environ.get("OMP_NUM_THREADS", "torch default")))
    given = {"fig3": args.fig3, "phase": args.phase, "sweep256": args.sweep, "wide": args.wide}
    makers = {"fig3": fig3, "phase": phase, "sweep256": sweep256, "wide": wide}
    print(f"{'case':<9} {'compute s':>10} {'page MB':>8} {'process s (cpu)':>16} "
          f"{'no imports s (cpu)':>19} {'process/compute':>16} {'no imports/compute':>19}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            folder, compute = _given(given[name]) if given.get(name) else makers[name](Path(tmp))
            m = measure(folder)
            process = f"{m['process']:.2f} ({m['process_cpu']:.2f})"
            warm = f"{m['warm']:.2f} ({m['warm_cpu']:.2f})"
            ratios = f"{m['process'] / compute:>16.3f} {m['warm'] / compute:>19.3f}"
            print(f"{name:<9} {compute:>10.1f} {m['bytes'] / 1e6:>8.2f} {process:>16} {warm:>19} {ratios}",
                  flush=True)


if __name__ == "__main__":
    main()
