"""``condlab.sweep``: plan a spec into runs, train what is not done yet in batches, gather a table.

    OUT/
      spec.yaml            the spec as given (a different earlier one is kept as spec-<time>.yaml)
      plan.json            every planned run: hash, batch, swept settings, single-run config
      runs/<hash>/         one run directory per run (condlab's run record, summary in meta.json)
      results.csv          one row per run (and results.parquet when pyarrow is installed)

A run is finished when its directory holds a meta.json with status complete or diverged;
directories appear complete or not at all, so a sweep killed at any moment (SIGKILL too)
resumes where it stopped, and a finished sweep trains nothing when run again.
"""

from __future__ import annotations

import datetime as _dt
import gc
import json
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from .._display import ShownAsPage
from ..records import atomic_write_text, folder_lock
from ._plan import BATCHED_KEYS, Plan, _get, assign_key, load_spec, make_plan, run_spec_fields
from ._run import Batch, BatchDone, finished_row, make_executor
from ._table import table_columns, write_table


@dataclass
class SweepResult(ShownAsPage):
    """What ``condlab.sweep`` did: counts, time, the table's rows and paths."""

    plan: Plan
    out: Path | None
    trained: int = 0
    skipped: int = 0
    failed: int = 0
    pending: int = 0
    interrupted: bool = False
    seconds: float = 0.0
    train_seconds: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

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
    executor: str = "local",
    address: str | None = None,
    dry_run: bool = False,
    progress: bool | None = None,
) -> SweepResult:
    """Train every run of a sweep spec that is not finished in `out`; write the results table.

    `spec`: a YAML file or a mapping (format: docs/sweeps.md). `executor`: 'local' (in this
    process) or 'ray' (one task per batch on the cluster at `address`). `dry_run` plans and
    counts without writing or training anything.
    """
    with _old_objects_frozen():
        return _sweep(spec, out, executor, address, dry_run, progress)


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


def _sweep(spec: str | Path | dict[str, Any], out: str | Path | None, executor: str, address: str | None,
           dry_run: bool, progress: bool | None) -> SweepResult:
    start = time.perf_counter()
    raw, text, base_dir = load_spec(spec)
    plan = make_plan(raw, base_dir)
    runner = make_executor(executor, address)
    out_dir = Path(out) if out is not None else Path("runs") / f"sweep-{plan.name}"
    if dry_run:
        done_rows, todo = _pending(plan, out_dir / "runs")
        result = SweepResult(plan, None, skipped=len(done_rows),
                             pending=sum(len(b.runs) for b in todo))
        result.seconds = time.perf_counter() - start
        return result
    with folder_lock(out_dir):  # a second sweep on the same --out is refused, naming this pid
        done_rows, todo = _pending(plan, out_dir / "runs")
        result = SweepResult(plan, out_dir, skipped=len(done_rows))
        _drop_partials(out_dir / "runs")
        show = sys.stderr.isatty() if progress is None else progress
        with ThreadPoolExecutor(max_workers=1) as side:  # two small synced files: not in the way
            inputs = side.submit(write_inputs, out_dir, text, plan)
            execute_batches(runner, todo, out_dir / "runs", result, done_rows, show)
        inputs.result()
        result.pending = len(plan.runs) - result.skipped - result.trained - result.failed
        _write_results(result, done_rows)
    result.seconds = time.perf_counter() - start
    return result


def _pending(plan: Plan, runs_dir: Path) -> tuple[dict[str, dict[str, Any]], list[Batch]]:
    """(rows of the finished runs by hash, batches of the runs still to train)."""
    done_rows = {r.hash: row for r in plan.runs if (row := finished_row(runs_dir / r.hash)) is not None}
    return done_rows, _batches(plan, set(done_rows))


def execute_batches(runner, todo: list[Batch], runs_dir: Path, result: SweepResult, done_rows: dict,
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
            runner.run(todo, runs_dir, bar if show else None, on_done)
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
        batches.append(Batch(key, config, specs, epochs, _cost(config, len(runs)), task=plan.task))
    return batches


def _cost(config: dict[str, Any], runs: int) -> float:
    """Work of a batch in arbitrary units: epochs x runs x samples x parameters, plus overhead."""
    m, d, t = config["model"], config["data"], config["train"]
    params = m["width"] * (d["d"] + 1) + (m["depth"] - 1) * m["width"] * (m["width"] + 1) \
        + m["d_out"] * (m["width"] + 1)
    return t["epochs"] * (runs * d["n"] * params + 2e5)  # 2e5: a step's fixed cost, measured roughly


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


def write_inputs(out: Path, text: str, plan: Plan) -> None:
    spec_file = out / "spec.yaml"
    if spec_file.is_file() and spec_file.read_text() != text:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
        shutil.copy2(spec_file, out / f"spec-{stamp}.yaml")  # never lose the earlier spec
    atomic_write_text(spec_file, text)
    atomic_write_text(out / "plan.json", _plan_json(plan))


def _drop_partials(runs_dir: Path) -> None:
    """Remove the .partial directories of runs killed while being written (before any is made)."""
    for partial in runs_dir.glob("*.partial"):
        shutil.rmtree(partial, ignore_errors=True)


def _plan_json(plan: Plan) -> str:
    """One run per line: readable, and json's C encoder (indent= falls back to pure Python)."""
    head = plan.to_dict()
    runs = head.pop("runs")
    body = json.dumps(head)[:-1]
    lines = ",\n".join(json.dumps(r) for r in runs)
    return f'{body}, "runs": [\n{lines}\n]}}\n'


def _write_results(result: SweepResult, done_rows: dict) -> None:
    rows = []
    for r in result.plan.runs:
        row = done_rows.get(r.hash, {"status": "pending"})
        rows.append({**r.settings, "run": r.hash, **row})
    result.rows = rows
    result.columns = table_columns(result.plan.columns, rows)
    assert result.out is not None
    result.tables = write_table(rows, result.columns, result.out)
