"""Start-up's share of short jobs: a fresh `condlab` process against one that only trains the same runs.

Two jobs (issue 24, "imports only when used"), each timed as whole processes:

* sweep: ``condlab sweep SPEC --out DIR`` of a 64-run spec based on fig3 (16 learning rates x 4
  init seeds: one batch), against a process that imports ``condlab.training`` and trains the
  sweep's planned batches with ``condlab.train(config, runs=...)`` (no records, no table, no
  line counts);
* reproduce: ``condlab reproduce fig3 --quick --out DIR``, against a process that trains the
  configs that command trains (found once by a run that records ``Context.trained``).

The measure is the CPU time (user + sys) of each child process as the kernel accounts it
(``os.wait4``), so other jobs on a shared machine do not enter it. The processes of a job run
as interleaved triples (the order rotating), --repeat times; printed: each triple's ratios and
the median ratios (goal: <= 1.1 for the sweep). The third contender is the train-only process
ending as the `condlab` command does (``_cli.exit_now``: atexit handlers, then no interpreter
teardown, ~0.4 s of a process that imported torch): the ratio to it is the command's own work
beyond training, with the two exits made equal.

    python benchmarks/bench_startup.py [--repeat 5] [--epochs 1000] [--threads 1] [--jobs sweep,reproduce]
                                       [--src DIR]

--src measures another checkout's src/ folder (e.g. the code before a change: `git archive`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _machine import machine_line

SRC = Path(__file__).resolve().parent.parent / "src"
LRS = [1e-3 * 1.1**i for i in range(16)]
BASELINES = ("train", "train, exit_now")

TRAIN_ONLY = """
import json, sys
from condlab.records import RunSpec
from condlab.training import Config, train
for job in json.load(open(sys.argv[1])):
    specs = None if job["runs"] is None else [RunSpec(**fields) for fields in job["runs"]]
    train(Config.from_dict(job["config"]), runs=specs, progress=False)
"""
# the same, ending as the `condlab` command ends (condlab._cli.exit_now)
TRAIN_ONLY_EXIT_NOW = TRAIN_ONLY + """
from condlab._cli import exit_now
exit_now(0)
"""

# records every config `reproduce` trains (Context.trained), for the train-only contender
DISCOVER = """
import json, sys
from condlab.reproduce import Context, reproduce
train = Context.train
def recording(self, *args, **kwargs):
    runs = train(self, *args, **kwargs)
    json.dump([{"config": c.to_dict(), "runs": None} for c in self.trained], open(sys.argv[1], "w"))
    return runs
Context.train = recording
reproduce("fig3", quick=True, out=sys.argv[2])
"""


def sweep_spec(epochs: int) -> dict:
    """64 runs of the Fig. 3 network in one batch (lr and seed are per-run keys)."""
    return {"name": "bench-startup", "base": "fig3",
            "set": {"train.epochs": epochs, "train.snapshots": "every:100"},
            "grid": {"train.lr": LRS}, "seeds": {"init": 4}}


def cpu_seconds(argv: list[str], env: dict[str, str], cwd: str) -> float:
    """User + sys CPU seconds of one child process (and its own children) until it exits."""
    child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"{argv[:4]} failed: {child.stderr.read().decode()[-2000:]}")
    child.stderr.close()
    return usage.ru_utime + usage.ru_stime


def sweep_job(work: Path, epochs: int, src: Path) -> tuple[list[str], list[str], str]:
    """(the condlab command, the train-only command, the output folder the command writes)."""
    sys.path.insert(0, str(src))
    from condlab.sweeps._plan import make_plan  # the sweep's own planning and batching
    from condlab.sweeps._sweep import _batches

    spec = sweep_spec(epochs)
    (work / "spec.json").write_text(json.dumps(spec))
    batches = _batches(make_plan(spec), set())
    jobs = [{"config": b.config, "runs": [fields for _, fields in b.runs]} for b in batches]
    assert sum(len(j["runs"]) for j in jobs) == 64, jobs
    (work / "sweep_jobs.json").write_text(json.dumps(jobs))
    return ([sys.executable, "-m", "condlab", "sweep", str(work / "spec.json"), "--out", str(work / "out"),
             "--no-progress"], [sys.executable, "-c", TRAIN_ONLY, str(work / "sweep_jobs.json")], "out")


def reproduce_job(work: Path, env: dict[str, str]) -> tuple[list[str], list[str], str]:
    """As sweep_job, for `condlab reproduce fig3 --quick` (its configs found by one run first)."""
    jobs = work / "reproduce_jobs.json"
    cpu_seconds([sys.executable, "-c", DISCOVER, str(jobs), str(work / "discover")], env, str(work))
    return ([sys.executable, "-m", "condlab", "reproduce", "fig3", "--quick", "--out", str(work / "out")],
            [sys.executable, "-c", TRAIN_ONLY, str(jobs)], "out")


def triples(command: list[str], train_only: list[str], out: Path, env: dict[str, str],
            repeat: int) -> list[dict[str, float]]:
    """CPU seconds of the command, the train-only process and the train-only process ending as
    the command does, `repeat` interleaved triples, the order rotating."""
    exit_now = [*train_only[:2], TRAIN_ONLY_EXIT_NOW, *train_only[3:]]
    contenders = {"train": train_only, "train, exit_now": exit_now}
    names = ["command", *BASELINES]
    found = []
    for i in range(repeat):
        times = {}
        # a new output folder each time, all removed at the end, not before each run: on ext4
        # without a journal (these VMs' disk) a new file's inode skips those freed in the last
        # minute, each looked up in the inode table, so creating 448 files right after deleting
        # the last run's cost ~0.1-0.25 s more system CPU (perf: ext4 recently_deleted)
        fresh = [f"{out}-{i}" if arg == str(out) else arg for arg in command]
        for which in names[i % 3:] + names[:i % 3]:
            argv = fresh if which == "command" else contenders[which]
            times[which] = cpu_seconds(argv, env, str(out.parent))
        found.append(times)
        print(f"  {i + 1}: command {times['command']:.2f} s, train only {times['train']:.2f} s "
              f"(ratio {times['command'] / times['train']:.3f}), train only with exit_now "
              f"{times['train, exit_now']:.2f} s (ratio {times['command'] / times['train, exit_now']:.3f})",
              flush=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=1000, help="the sweep's epochs (fig3: 1000)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--jobs", default="sweep,reproduce")
    parser.add_argument("--src", type=Path, default=SRC, help="the src/ folder whose condlab runs")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(args.src.resolve()), "OMP_NUM_THREADS": str(args.threads),
           "MKL_NUM_THREADS": str(args.threads)}
    print(machine_line(threads=args.threads, dtype="float32 (the presets')", src=args.src))
    medians = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.jobs.split(","):
            work = Path(tmp) / name
            work.mkdir()
            command, train_only, out = (sweep_job(work, args.epochs, args.src.resolve()) if name == "sweep"
                                        else reproduce_job(work, env))
            print(f"{name}: {' '.join(command[1:4])} ... vs a process that only trains its runs", flush=True)
            found = triples(command, train_only, work / out, env, args.repeat)
            medians[name] = {which: [f["command"] / f[which] for f in found] for which in BASELINES}
            medians[name]["CPU"] = [statistics.median(f[which] for f in found)
                                    for which in ("command", *BASELINES)]
    for name, found in medians.items():
        command, train, train_exit = found.pop("CPU")
        print(f"{name}: CPU {command:.2f} s vs train only {train:.2f} s, train only with exit_now "
              f"{train_exit:.2f} s (medians)")
        for which, ratios in found.items():
            print(f"  ratio to {which}: {statistics.median(ratios):.3f} "
                  f"(range {min(ratios):.3f}-{max(ratios):.3f}, {args.repeat} triples)")


if __name__ == "__main__":
    main()
