"""``condlab.sweep``: plan a spec into runs, train what is not done yet in batches, gather a table.

    OUT/
      spec.yaml            the spec as given (a different earlier one is kept as spec-<time>.yaml)
      plan.json            every planned run: hash, batch, swept settings, single-run config
      runs/<hash>/         one run directory per run (condlab's run record, summary in meta.json)
      results.csv          one row per run (and results.parquet when pyarrow is installed)

A run is finished when its directory holds a meta.json with status complete or diverged;
directories appear complete or not at all, so a sweep killed at any moment (SIGKILL too)
resumes where it stopped, and a finished sweep trains nothing when run again. OUT is a local
folder or an object store URI (``_storage``); the batches train where the executor puts
them (``_executors``: in this process, or on a Ray cluster).
"""

from __future__ import annotations

import datetime as _dt
import gc
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from .._display import ShownAsPage
from .._outputs import folder_for
from ..training import ConfigError
from . import _local, _ray  # noqa: F401  (the built-in executors: each file registers its class)
from ._executors import EXECUTORS, OPTION_FLAGS, Executor, executor_class
from ._plan import BATCHED_KEYS, Plan, _get, assign_key, load_spec, make_plan, run_spec_fields
from ._run import Batch, BatchDone, batch_cost
from ._storage import LocalStorage, open_storage
from ._table import table_columns, write_table


def make_executor(executor: str | Executor, address: str | None = None, **options: Any) -> Executor:
    """A name ('local', 'ray', a registered or installed one) and its options -> an executor object
    (an object passes through); a one-line error for an unknown name or an option the executor lacks."""
    options = {"address": address, **options}
    given = {k: v for k, v in options.items() if v is not None and v is not False}
    if isinstance(executor, Executor):
        if given:
            raise ConfigError(f"{OPTION_FLAGS.get(next(iter(given)))} goes to the executor object "
                              "itself, not to sweep()")
        return executor
    cls = executor_class(executor)  # a registered executor, or an installed package's
    for key in given:
        if key not in cls.options:
            owners = [c.name for c in EXECUTORS.values() if key in c.options]
            hint = f"add --executor {owners[0]}" if owners else "leave it out"
            raise ConfigError(f"{OPTION_FLAGS.get(key, key)} is for the {' or '.join(owners) or 'no'} "
                              f"executor: {hint}")
    return cls(**given)


@dataclass
class SweepResult(ShownAsPage):
    """What ``condlab.sweep`` did: counts, time, the table's rows and paths."""

    plan: Plan
    out: Path | str | None  # a local folder, or the object store URI
    trained: int = 0
    skipped: int = 0
    failed: int = 0
    pending: int = 0
    interrupted: bool = False
    seconds: float = 0.0
    train_seconds: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    tables: list[Path | str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    damaged: dict[str, str] = field(default_factory=dict)  # run folder -> why it is trained again
    # dry run: bytes of memory (largest batch) and disk, seconds of training (rough)
    estimate: dict[str, int] = field(default_factory=dict)

    def damage_lines(self) -> list[str]:
        """One line per finished-looking run whose record was damaged (it is trained again)."""
        verb = "to be trained again" if self.out is None else "trained again"
        return [f"run '{path}' was damaged ({why}): {verb}" for path, why in self.damaged.items()]

    def summary(self) -> str:
        """The one-line account printed at the end of a sweep."""
        table = self.tables[-1] if self.tables else "none"
        line = (f"sweep {self.plan.name}: trained {self.trained}, skipped {self.skipped} already done, "
                f"failed {self.failed}" + (f", {self.pending} not run" if self.pending else "")
                + f" in {self.seconds:.1f} s (training {self.train_seconds:.1f} s); table: {table}")
        if self.trained == 0 and self.failed == 0 and not self.pending:
            line += f" (nothing to train: all {self.skipped} runs were already done)"
        return line

    def to_pandas(self):
        """The table as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=self.columns)


def sweep(
    spec: str | Path | dict[str, Any],
    *,
    out: str | Path | None = None,
    executor: str | Executor = "local",
    address: str | None = None,
    dry_run: bool = False,
    progress: bool | None = None,
    cpus_per_batch: int | None = None,
    return_runs: bool = False,
    yes: bool = False,
    overwrite: bool = False,
) -> SweepResult:
    """Train every run of a sweep spec that is not finished in `out`; write the results table.

    `spec`: a YAML file or a mapping (format: docs/sweeps.md). `out`: a folder, or an object
    store URI (s3://bucket/prefix, ...). `executor`: 'local' (in this process), 'ray' (one task
    per batch on the cluster at `address`; `cpus_per_batch`, `return_runs`: see docs/sweeps.md,
    "Running on a cluster"), or an executor object. `dry_run` plans and counts without writing
    or training anything. A spec of more than ``MAX_RUNS`` runs (counted before any is planned)
    is refused unless `yes`. An `out` holding a sweep of another spec is refused unless
    `overwrite` (its finished runs with the same settings are reused, the table lists this
    spec's runs, the earlier spec is kept as spec-<time>.yaml); another kind of result, always.
    """
    options = {"address": address, "cpus_per_batch": cpus_per_batch, "return_runs": return_runs}
    with _old_objects_frozen():
        return _sweep(spec, out, executor, options, dry_run, progress, yes, overwrite)


@contextmanager
def _old_objects_frozen():
    """Leave the objects alive before the sweep (torch's, numba's, the caller's: ~270,000 after
    one sweep) out of the cyclic GC's full collections while it runs: each full collection
    walked them all, 0.12 s at a time, at moments of the allocator's choosing (gc.freeze;
    they are handed back with gc.unfreeze; nothing is done if the caller froze objects)."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _sweep(spec: str | Path | dict[str, Any], out: str | Path | None, executor: str | Executor,
           options: dict[str, Any], dry_run: bool, progress: bool | None, yes: bool = False,
           overwrite: bool = False) -> SweepResult:
    start = time.perf_counter()
    raw, text, base_dir = load_spec(spec)
    plan = make_plan(raw, base_dir, yes=yes)
    runner = make_executor(executor, **options)
    default = None if out is not None else folder_for("runs", plan.name, "sweep name", "sweep-{}")
    storage = open_storage(out if out is not None else default)
    _check_out(storage, text, overwrite)  # the one output-folder rule, local or object store
    if dry_run:
        damaged: dict[str, str] = {}
        done_rows, todo = _pending(plan, storage, damaged)
        result = SweepResult(plan, None, skipped=len(done_rows),
                             pending=sum(len(b.runs) for b in todo), damaged=damaged)
        if not plan.task and todo:  # condlab.train batches: what they will need
            from .._guards import batch_estimates
            from ._run import COST_PER_SECOND

            memory, disk = batch_estimates([(b.config, len(b.runs)) for b in todo])
            seconds = sum(b.cost for b in todo) / COST_PER_SECOND
            result.estimate = {"memory": memory, "disk": disk, "seconds": round(seconds)}
        result.seconds = time.perf_counter() - start
        return result
    runner.connect()  # an unreachable cluster fails here, before anything is written
    try:
        with storage.lock():  # a second sweep on the same --out is refused, naming this pid
            damaged = {}
            done_rows, todo = _pending(plan, storage, damaged)
            result = SweepResult(plan, storage.out, skipped=len(done_rows), damaged=damaged)
            runner.check(storage, todo)  # refusals (resources, storage, versions): still nothing written
            storage.drop_partials()
            show = sys.stderr.isatty() if progress is None else progress
            with ThreadPoolExecutor(max_workers=1) as side:  # two small files: not in the way
                inputs = side.submit(write_inputs, storage, text, plan)
                _run_batches(runner, todo, storage, result, done_rows, show)
            inputs.result()
            result.pending = len(plan.runs) - result.skipped - result.trained - result.failed
            _write_results(result, done_rows, storage)
    finally:
        runner.close()
    result.seconds = time.perf_counter() - start
    return result


def _check_out(storage: Any, text: str, overwrite: bool) -> None:
    """A sweep goes into a new or empty folder (or object-store prefix), or one holding a sweep
    of the same spec (read as YAML: comments and layout aside), which it resumes; a sweep of
    another spec only with `overwrite` (its finished runs of the same settings are reused, its
    spec kept as spec-<time>.yaml); another kind of result never."""
    import yaml

    from .._outputs import check_result_folder, differing

    earlier = storage.read_bytes("spec.yaml")
    try:
        before = yaml.safe_load(earlier) if earlier is not None else None
    except (yaml.YAMLError, UnicodeDecodeError):
        before = None
    now = yaml.safe_load(text)
    differ = [] if earlier is None or before == now else differing(
        before, now if isinstance(now, dict) else {})
    shown = [f"spec.yaml: {', '.join(differ)}"] if differ else ()
    resume = "run the same spec to resume it"
    if isinstance(storage, LocalStorage):
        check_result_folder(storage.root, "sweep", not differ, overwrite, differ=shown, resume=resume)
    else:
        _check_prefix(storage, earlier, not differ, overwrite, shown, resume)


def _check_prefix(storage: Any, spec: bytes | None, same: bool, overwrite: bool, differ: Any,
                  resume: str) -> None:
    """check_result_folder for an object-store prefix: what it holds is read from its file names
    (a sweep writes spec.yaml and plan.json first; runs/ alone is a sweep killed before them)."""
    from .._outputs import refuse_other_settings

    names = set(storage.names())
    if spec is not None and spec.startswith(b"task: phase-diagram"):
        held = "a phase diagram result"
    elif spec is not None or "plan.json" in names or (not names and storage.has_runs()):
        held = "sweep"
    else:
        held = "other files" if names else None
    if held is None:
        return
    if held != "sweep":
        raise ConfigError(f"--out '{storage.out}' already holds {held}, not a sweep: choose another "
                          "prefix (a place holding another kind of result is never replaced, not even "
                          "with --overwrite)")
    if not same and not overwrite:
        refuse_other_settings(f"--out '{storage.out}'", "sweep", differ, resume, keep="prefix")


def _pending(plan: Plan, storage: Any, damaged: dict[str, str]) -> tuple[dict[str, Any], list[Batch]]:
    """(rows of the finished runs by hash, batches of the runs still to train); a damaged run
    (path -> why) is among the latter."""
    done_rows = storage.finished_rows((r.hash for r in plan.runs), damaged)
    return done_rows, _batches(plan, set(done_rows))


def execute_batches(runner: Executor, todo: list[Batch], runs_dir: Path, result: SweepResult, done_rows: dict,
                    show: bool, inputs: Any = None) -> None:
    """Connect, check and run the batches into runs_dir's parent folder (the phase diagrams'
    sweeps: they hold their folder's lock); `inputs()`, which writes their inputs, is called
    once the executor is reached and has accepted the batches: nothing is written before."""
    storage = LocalStorage(Path(runs_dir).parent.absolute())
    runner.connect()
    try:
        runner.check(storage, todo)
        if inputs is not None:
            inputs()
        _run_batches(runner, todo, storage, result, done_rows, show)
    finally:
        runner.close()


def _run_batches(runner: Executor, todo: list[Batch], storage: Any, result: SweepResult, done_rows: dict,
                 show: bool) -> None:
    """Run the batches with one progress bar (ETA over the whole sweep); record each batch's end."""
    total_runs = sum(len(b.runs) for b in todo)
    with tqdm(total=sum(b.cost for b in todo), disable=not show, desc=f"sweep {result.plan.name}",
              mininterval=0.5,
              bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining}{postfix}") as bar:
        bar.set_postfix_str(f"runs 0/{total_runs}")

        def on_done(batch: Batch, done: BatchDone) -> None:
            _record(result, batch, done, done_rows)
            bar.set_postfix_str(f"runs {result.trained + result.failed}/{total_runs}")

        try:
            runner.run(todo, storage, bar if show else None, on_done)
        except KeyboardInterrupt:
            result.interrupted = True


def _batches(plan: Plan, finished: set[str]) -> list[Batch]:
    """Group the unfinished runs by batch; the batch config lists the union of their values."""
    from ..training import Config

    by_hash = {r.hash: r for r in plan.runs}
    batches = []
    for key, hashes in plan.batches.items():
        runs = [by_hash[h] for h in hashes if h not in finished]
        if not runs:
            continue
        config = Config.from_dict(runs[0].config).to_dict()
        for k in BATCHED_KEYS:
            assign_key(config, k, list(dict.fromkeys(v for r in runs for v in _get(r.config, k))))
        specs = [(r.hash, run_spec_fields(r.config)) for r in runs]
        epochs = config["train"]["epochs"]
        batches.append(Batch(key, config, specs, epochs, batch_cost(config, len(runs)), task=plan.task))
    return batches


def _record(result: SweepResult, batch: Batch, done: BatchDone, done_rows: dict) -> None:
    result.train_seconds += done.seconds
    if done.interrupted:
        result.interrupted = True
    elif done.error is not None:
        result.failed += len(batch.runs)
        result.errors.append(f"batch {batch.key} ({len(batch.runs)} runs): {done.error}")
        for h, _ in batch.runs:
            done_rows[h] = {"status": "failed", "error": done.error}
    else:
        result.trained += len(done.rows)
        done_rows.update(done.rows)


def write_inputs(out: Any, text: str, plan: Plan) -> None:
    """spec.yaml (an earlier, different one kept as spec-<time>.yaml) and plan.json, into the
    storage `out` (or a local folder)."""
    storage = open_storage(out) if isinstance(out, (str, Path)) else out
    earlier = storage.read_bytes("spec.yaml")
    if earlier is not None and earlier != text.encode():
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
        storage.write_bytes(f"spec-{stamp}.yaml", earlier)  # never lose the earlier spec
    storage.write_bytes("spec.yaml", text.encode())
    storage.write_bytes("plan.json", _plan_json(plan).encode())


def _plan_json(plan: Plan) -> str:
    """One run per line: readable, and json's C encoder (indent= falls back to pure Python)."""
    head = plan.to_dict()
    runs = head.pop("runs")
    body = json.dumps(head)[:-1]
    lines = ",\n".join(json.dumps(r) for r in runs)
    return f'{body}, "runs": [\n{lines}\n]}}\n'


def _write_results(result: SweepResult, done_rows: dict, storage: Any) -> None:
    rows = []
    for r in result.plan.runs:
        row = done_rows.get(r.hash, {"status": "pending"})
        rows.append({**r.settings, "run": r.hash, **row})
    result.rows = rows
    result.columns = table_columns(result.plan.columns, rows)
    result.tables = write_table(rows, result.columns, storage)
