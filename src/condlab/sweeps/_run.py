"""Train one batch of a sweep and write its runs (the executors, ``_local`` and
``_ray``, call these).

A batch is plain data (a config dict and the runs' hashes and specs), so it travels to a Ray
worker as is. ``run_batch`` trains it through ``condlab.train``, measures each run's summary
row (final loss, line counts, relative weight change) and writes every run directory with
``write_run`` (assembled under a temporary name, renamed when complete), its summary inside
``meta.json``. A batch that fails in training writes nothing, and a batch only ever writes
its own run directories, so it never touches another batch's runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

FINISHED = ("complete", "diverged")  # a run with either status is never trained again
WRITERS = 1  # threads writing a batch's run files while its runs are measured (0: none)
STEP_OVERHEAD = 2e5  # a training step's fixed cost in batch_cost's units, measured roughly
# batch_cost's units one CPU core gets through per second, roughly (a step's overhead ~0.1 ms):
# the dry run's time estimate, good to within a factor of a few, not a measurement
COST_PER_SECOND = 2e9


@dataclass
class Batch:
    """Runs that one ``condlab.train`` call trains together."""

    key: str
    config: dict[str, Any]                 # the batch's config (batchable lists = union of the runs')
    runs: list[tuple[str, dict[str, Any]]]  # (run hash, RunSpec fields)
    epochs: int
    cost: float                             # relative work, for the progress bar's ETA
    # "" trains with condlab.train; otherwise an importable module (a "task") with its own
    # train_part(batch, progress) and write_part(batch, result, runs_dir) -> BatchDone, e.g. the
    # phase diagram's "condlab.phase._task": other trainers get resume and Ray the same way.
    task: str = ""


@dataclass
class BatchDone:
    """What a batch reports back: per run hash, its status and summary row; or the error."""

    key: str
    rows: dict[str, dict[str, Any]]
    seconds: float = 0.0                   # training time (inside condlab.train)
    error: str | None = None
    interrupted: bool = False
    files: dict[str, dict[str, int]] | None = None       # per run hash: file -> size, as written
    payload: dict[str, dict[str, bytes]] | None = None   # per run hash: file -> bytes (returned)
    where: dict[str, Any] | None = None                  # host, Ray node, device of the batch


def step_work(config: dict[str, Any], runs: int) -> float:
    """Multiply-adds of one training step of `runs` runs of a config: runs x samples x parameters."""
    m, d = config["model"], config["data"]
    params = m["width"] * (d["d"] + 1) + (m["depth"] - 1) * m["width"] * (m["width"] + 1) \
        + m["d_out"] * (m["width"] + 1)
    return float(runs * d["n"] * params)


def batch_cost(config: dict[str, Any], runs: int) -> float:
    """Work of a batch in arbitrary units, for the progress bar: epochs x (step work + overhead)."""
    return config["train"]["epochs"] * (step_work(config, runs) + STEP_OVERHEAD)


def summarize(run) -> dict[str, Any]:
    """One table row of measurements for a trained run (see docs/sweeps.md for the columns)."""
    return summarize_many([run])[0]


def summarize_many(runs: Sequence[Any]) -> list[dict[str, Any]]:
    """The table rows of trained runs (see docs/sweeps.md for the columns), one per run.

    Line counts: ``count_orientations(w, band=False).n_lines`` (default knobs, no band;
    computed by ``count_lines_many``, the same count without the clusters, for all runs' layers
    of one shape at once) on each hidden layer's input weights (m, q) at the last snapshot
    inside the initial stage (``layerK_lines``, the epoch in ``lines_epoch``) and at the last
    snapshot (``layerK_lines_final``). Relative change: ||W(T) - W(0)||_F / ||W(0)||_F per
    layer, T the last snapshot.
    """
    from ..analysis import default_epoch

    rows: list[dict[str, Any]] = []
    wanted: list[tuple[int, str, np.ndarray]] = []  # (row, column, layer) to count
    for i, run in enumerate(runs):
        last = int(run.meta.get("last_epoch", len(run.loss) - 1))
        loss = float(run.loss[min(last, len(run.loss) - 1)])
        row: dict[str, Any] = {
            "final_loss": loss if np.isfinite(loss) else None,
            "last_epoch": last,
            "initial_stage_epoch": run.initial_stage_epoch,
            "lines_epoch": default_epoch(run),
            "final_snapshot": int(run.epochs[-1]),
        }
        for name, w in run.weights.items():
            if name.startswith("layer"):
                row[f"{name}_lines"] = row[f"{name}_lines_final"] = None  # the columns' order
                wanted.append((i, f"{name}_lines_final", w[-1]))
                if row["lines_epoch"] != row["final_snapshot"]:
                    wanted.append((i, f"{name}_lines", run.layer(name, row["lines_epoch"])))
        for name, w in run.weights.items():
            start = float(np.linalg.norm(w[0]))
            row[f"{name}_rel_change"] = float(np.linalg.norm(w[-1] - w[0])) / start if start > 0 else None
        rows.append(row)
    for (i, column, _), count in zip(wanted, _counts([w for _, _, w in wanted]), strict=True):
        rows[i][column] = count
    for row in rows:  # a run that never left the initial stage: one count serves both columns
        for column in [c for c in row if c.endswith("_lines") and row[c] is None]:
            row[column] = row[f"{column}_final"]
    return rows


def _counts(layers: list[np.ndarray]) -> list[int]:
    """count_lines of each layer by count_lines_many (layers of one shape counted together), on
    as many threads as training uses (``torch.get_num_threads()``)."""
    import torch

    from ..analysis import count_lines_many

    return count_lines_many(layers, threads=torch.get_num_threads())


def train_part(batch: Batch, progress: Any = False):
    """Train a batch's runs with condlab.train (one batched computation) -> RunResult."""
    if batch.task:
        return _task(batch.task).train_part(batch, progress)
    from ..records import RunSpec
    from ..training import Config, train

    specs = [RunSpec(**fields) for _, fields in batch.runs]
    return train(Config.from_dict(batch.config), runs=specs, progress=progress)


@dataclass
class Prepared:
    """What ``prepare_part`` made: the empty files of each run directory, and ``known``: the
    config.json and data.npz files it already filled (synthetic data), or None."""

    files: list[str]
    known: Any = None  # _record_prepare.Known


def prepare_part(batch: Batch, runs_dir: str) -> Prepared | None:
    """Make the batch's run directories and empty files (``_record_prepare.prepare_runs``) while it
    trains, and with synthetic data (sampled again here, in a few ms) fill each config.json and
    data.npz as training will leave them (None: nothing made, for a task's batch)."""
    from ..records import RunSpec, fill_known, prepare_runs, record_files
    from ..training import Architecture, Config, make_dataset, run_config

    if batch.task:
        return None
    cfg = Config.from_dict(batch.config)
    thinned = cfg.train.snapshot_neurons > 0  # more files, and fewer rows: left to write_runs
    files = [] if thinned else record_files(Architecture.from_config(cfg.model, cfg.data.d).names)
    paths = [Path(runs_dir) / h for h, _ in batch.runs]
    prepare_runs(paths, files)
    if thinned or cfg.data.source != "synthetic":
        return Prepared(files)
    data = make_dataset(cfg.data)
    configs = [run_config(cfg, data.config, RunSpec(**fields)) for _, fields in batch.runs]
    return Prepared(files, fill_known(paths, configs, data.x, data.y))


def discard_part(batch: Batch, runs_dir: str) -> None:
    """Remove what prepare_part made for a batch that writes nothing (failed, interrupted)."""
    import shutil

    if not batch.task:
        for h, _ in batch.runs:
            shutil.rmtree(Path(runs_dir) / f"{h}.partial", ignore_errors=True)


def write_part(batch: Batch, result, runs_dir: str, workers: int = WRITERS,
               prepared: Prepared | None = None, where: dict[str, Any] | None = None) -> BatchDone:
    """Measure each run of a trained batch and write it to runs_dir/<hash>.

    A writer thread writes every file of the runs but meta.json (``write_bodies``) while this
    thread measures them (``summarize_many``: the line counts are compiled loops that release
    the GIL) and encodes each meta.json with its row; this thread then writes the files of the
    runs the writer has not reached (both take runs from one iterator), and ``commit_runs``
    writes the meta.json files, puts everything on disk with one syncfs and renames the
    directories. ``workers=0`` writes in the calling thread
    (for profiling: cProfile sees one thread). `prepared`: what ``prepare_part`` made in the
    run directories (an interrupted batch removes it). `where`: the host and Ray node that
    trained the batch (``trained_here``), kept in each meta.json and table row.
    """
    from ..records import commit_runs, meta_bytes, write_bodies

    if batch.task:
        return _task(batch.task).write_part(batch, result, runs_dir)
    if any(run.status == "interrupted" for run in result.runs):
        if prepared is not None:
            discard_part(batch, runs_dir)
        return BatchDone(batch.key, {}, result.seconds, interrupted=True)  # nothing written
    runs, paths = result.runs, [Path(runs_dir) / h for h, _ in batch.runs]
    take = iter(range(len(runs)))  # runs whose files are still to write, shared by both threads
    with ThreadPoolExecutor(max_workers=1) as pool:
        files, known = (None, None) if prepared is None else (prepared.files, prepared.known)
        bodies = (pool.submit if workers > 0 else _now)(_bodies_then_flush, runs, paths, files, take, known)
        summaries = summarize_many(runs)
        rows: dict[str, dict[str, Any]] = {}
        where = trained_here() if where is None else where
        for (h, _), run, row in zip(batch.runs, runs, summaries, strict=True):
            run.meta["sweep"] = {"hash": h, "batch": batch.key, "summary": row, "trained_on": where}
            rows[h] = {"status": run.status, **row, "host": where.get("host"), "node": where.get("node")}
        metas = [meta_bytes(run) for run in runs]  # while the writer thread may still write
        mine = write_bodies(runs, paths, files, take, known)[1]  # the runs it has not taken yet
        partials, theirs = bodies.result()  # a failed write fails the batch (trained again)
    commit_runs(runs, paths, partials, theirs + mine, files, metas=metas)
    return BatchDone(batch.key, rows, result.seconds)


def _bodies_then_flush(runs: list, paths: list[Path], prepared: list[str] | None, take, known):
    """The writer thread's part of write_part: the run files it takes, then a syncfs of what is
    written so far, while the other thread still works: the commit's own sync (the one that
    makes the batch durable) then has less left to flush."""
    from ..records import flush_now, write_bodies

    written = write_bodies(runs, paths, prepared, take, known)
    if paths:
        flush_now(Path(paths[0]).parent)
    return written


def _now(fn, *args) -> Future:
    """fn(*args) run here, as a finished Future (pool.submit's stand-in for workers=0)."""
    done: Future = Future()
    done.set_result(fn(*args))
    return done


def _task(name: str):
    from ._tasks import load_task  # a registered task only: never a module named by a spec

    return load_task(name)


def run_batch(batch: Batch, runs_dir: str, progress: Any = False,
              where: dict[str, Any] | None = None) -> BatchDone:
    """Train a batch, write each finished run to runs_dir/<hash> (what one Ray task does)."""
    return write_part(batch, train_part(batch, progress), runs_dir, where=where)


def finished_row(run_dir: Path, damaged: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The summary row of a finished run directory, or None if the run must be trained.

    A run that says it finished but whose record is damaged (``_verify``) is trained again: the
    reason goes into `damaged` under the run's path, for the caller to report.
    """
    from ._verify import read_meta, run_damage

    meta_file = run_dir / "meta.json"
    if not meta_file.is_file():
        return None
    meta, problem = read_meta(meta_file)
    if meta is not None and meta.get("status") in FINISHED:
        problem = run_damage(run_dir, meta)

    def measured() -> dict[str, Any]:  # written by something other than a sweep: measure it now
        from ..records import load_run

        return summarize(load_run(run_dir))

    try:
        row = meta_row(meta, measured) if problem is None else None
    except (ValueError, OSError) as err:  # RecordError, a missing file: the record is damaged
        problem = str(err).splitlines()[0] if str(err) else type(err).__name__
        row = None
    if problem is not None and damaged is not None:
        damaged[str(run_dir)] = problem
    return row


def meta_row(meta: dict[str, Any], measured: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
    """The table row of a run from its meta.json (None unless finished): status, the summary
    (``measured()`` when meta.json holds none), the host and Ray node that trained it."""
    if meta.get("status") not in FINISHED:
        return None
    sweep = meta.get("sweep") if isinstance(meta.get("sweep"), dict) else {}
    summary = sweep.get("summary")
    if not isinstance(summary, dict):
        summary = measured()
    where = sweep.get("trained_on") if isinstance(sweep.get("trained_on"), dict) else {}
    return {"status": meta["status"], **summary, "host": where.get("host"), "node": where.get("node")}


def trained_here(**extra: Any) -> dict[str, Any]:
    """Where a batch trains: this host's name, and `extra` (the Ray node, the device)."""
    import socket

    return {"host": socket.gethostname(), "node": None, **extra}
