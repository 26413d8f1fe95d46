"""The ``condlab`` commands that write and read run records: ``config``, ``train``, ``sweep``,
``analyze``, ``reduce`` and ``report`` (their parser is in _cli).

analyze and reduce take a run folder or a batch folder (one with batch.json: every run of it);
``analyze`` reports one corrupt run of a batch and goes on with the others.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path

from .training import Config, ConfigError

EXIT_BAD_INPUT = 2  # every command's exit status for input it cannot take (_cli uses it too)
EXIT_DIVERGED, EXIT_INTERRUPTED = 3, 130


def _load_config(args: argparse.Namespace) -> Config:
    from .training import preset

    if args.config and args.preset:
        raise ConfigError("give a config file or --preset, not both")
    cfg = preset(args.preset) if args.preset else (
        Config.from_file(args.config) if args.config else Config())
    extra = list(args.overrides)
    if args.seeds is not None:
        extra.append(f"train.seeds={args.seeds}")
    for key, value in (("device", args.device), ("dtype", args.dtype), ("epochs", args.epochs)):
        if value is not None:
            extra.append(f"train.{key}={value}")
    return cfg.with_overrides(extra) if extra else cfg


def cmd_config(args: argparse.Namespace) -> int:
    print(_load_config(args).to_json())
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from ._outputs import folder_for, fresh_dir, train_folder
    from .sweeps import UNHASHED_KEYS
    from .training import resume, train

    if args.resume:
        return cmd_resume(args)
    cfg = _load_config(args)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else fresh_dir(folder_for("runs", cfg.name, "name", "{}-" + stamp))
    state = train_folder(out, cfg.to_dict(), args.overwrite, UNHASHED_KEYS)  # the one output-folder rule
    progress = not args.no_progress and sys.stderr.isatty()
    if state == "done":
        print(f"'{out}' already holds this config's batch, complete: nothing trained "
              f"(batch.json lists its runs; --overwrite trains it again)", file=sys.stderr)
        if args.json:
            print((out / "batch.json").read_text())
        return 0
    if state == "resume":
        return _train_outcome(args, out, resume(out, progress=progress))
    # an empty folder, one of other settings with --overwrite: replaced (stale run folders removed)
    result = train(cfg, out=out, progress=progress, overwrite=True)
    return _train_outcome(args, out, result)


def cmd_resume(args: argparse.Namespace) -> int:
    """`condlab train --resume DIR`: continue a batch from DIR/checkpoint.pt."""
    from .training import resume

    conflicts = _resume_conflicts(args)
    if conflicts:
        raise ConfigError(f"--resume continues the saved config: drop {conflicts}")
    out = Path(args.resume)
    result = resume(out, progress=not args.no_progress and sys.stderr.isatty())
    return _train_outcome(args, out, result)


def _train_outcome(args: argparse.Namespace, out: Path, result) -> int:
    if args.json:
        print((out / "batch.json").read_text())
    else:
        _print_runs(result)
    for run in result.runs:
        if run.status == "diverged":
            print(f"condlab: error: run {run.path.name} diverged: loss not finite at epoch "
                  f"{run.diverged_epoch}; snapshots before it are kept", file=sys.stderr)
    if any(r.status == "interrupted" for r in result.runs):
        print(f"condlab: interrupted; what was recorded is in {out}; continue with "
              f"`condlab train --resume {out}`", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_DIVERGED if any(r.status == "diverged" for r in result.runs) else 0


def _resume_conflicts(args: argparse.Namespace) -> str:
    """The config options given with --resume (which takes its config from the checkpoint)."""
    given = [name for name, value in (("a config file", args.config), ("--preset", args.preset),
                                      ("--set", args.overrides), ("--seeds", args.seeds),
                                      ("--device", args.device), ("--dtype", args.dtype),
                                      ("--epochs", args.epochs), ("--out", args.out)) if value]
    return ", ".join(given)


def cmd_sweep(args: argparse.Namespace) -> int:
    from ._guards import estimate_text
    from .sweeps import sweep

    result = sweep(args.spec, out=args.out, executor=args.executor, address=args.address,
                   dry_run=args.dry_run, progress=not args.no_progress and sys.stderr.isatty(),
                   cpus_per_batch=args.cpus_per_batch, return_runs=args.return_runs, yes=args.yes,
                   overwrite=args.overwrite)
    for line in result.damage_lines():
        print(f"condlab: warning: {line}", file=sys.stderr)
    if args.dry_run:
        batches = len({r.batch for r in result.plan.runs})
        print(f"sweep {result.plan.name}: {len(result.plan.runs)} runs in {batches} batches; "
              f"{result.skipped} already done, {result.pending} to train{estimate_text(result.estimate)} "
              "(dry run: nothing written)")
        return 0
    for error in result.errors:
        print(f"condlab: error: {error}", file=sys.stderr)
    print(json.dumps(result.rows, indent=2, default=str) if args.json else result.summary())
    if result.interrupted:
        print(f"condlab: interrupted; finished runs are kept in {result.out}; run again to resume",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_DIVERGED if result.failed else 0


def _print_runs(result) -> None:
    print(f"{'run':<24} {'lr':>9} {'init_std':>9} {'loss@0':>10} {'loss@end':>10} {'70%-epoch':>9}  status")
    for run in result.runs:
        end = run.meta["last_epoch"]
        stage = "-" if run.initial_stage_epoch is None else str(run.initial_stage_epoch)
        print(f"{run.path.name:<24} {run.spec.lr:>9.3g} {run.spec.init_std:>9.3g} "
              f"{run.loss[0]:>10.4g} {run.loss[end]:>10.4g} {stage:>9}  {run.status}")
    print(f"{len(result.runs)} runs trained as one batch in {result.seconds:.1f} s; "
          f"records in {result.out}")


def _run_dirs(path: Path) -> list[Path]:
    """A run directory, or every run of a batch directory (one with batch.json)."""
    from ._outputs import read_json

    if not path.is_dir():
        raise ConfigError(f"'{path}' is not a folder: give a run folder or a batch folder "
                          "written by `condlab train`")
    if (path / "batch.json").is_file():
        batch = read_json(path / "batch.json")
        try:
            return [path / r["dir"] for r in batch["runs"]]
        except (KeyError, TypeError):
            raise ConfigError(f"'{path / 'batch.json'}' does not list runs: the file is corrupt") from None
    return [path]


def hidden_layers(run, selectors: list[str]) -> list[int]:
    """Indices (0-based) of the run's hidden layers that `selectors` (names or globs) name, in order."""
    import fnmatch

    names = [f"layer{k + 1}" for k in range(run.architecture.depth)]
    picked = [i for i, name in enumerate(names) if any(fnmatch.fnmatchcase(name, s) for s in selectors)]
    if not picked:
        raise ConfigError(f"--layer {' '.join(selectors)} matches no hidden layer of {run.path}: "
                          f"its layers are {', '.join(names)}")
    return picked


def cmd_analyze(args: argparse.Namespace) -> int:
    from ._guards import check_count_options, user_message
    from ._outputs import check_result_folder
    from .analysis import analyze_run
    from .records import load_run

    check_count_options(args.penalty, args.negligible_mads, args.min_share)
    counting = {k: v for k, v in (("penalty", args.penalty),
                                  ("negligible_mads", args.negligible_mads),
                                  ("min_share", args.min_share)) if v is not None}
    layers = None if args.layer is None else args.layer  # names or globs, resolved per run
    # --json --no-figures answers on stdout alone: nothing is written (read-only records work)
    write = bool(args.out) or not (args.json and args.no_figures)
    results, failed = [], 0
    if args.out:  # OUT/RUN/NAME: a folder of analyses, or a new one (the one output-folder rule)
        check_result_folder(Path(args.out), "analysis", True, args.overwrite)
    for run_dir in _run_dirs(Path(args.path)):
        out = None
        try:  # one corrupt run of a batch (or a folder refused) is reported; the others are analysed
            run = load_run(run_dir)
            picked = None if layers is None else hidden_layers(run, layers)
            analysis = analyze_run(run, args.epoch, picked, replay=not args.no_replay,
                                   count_kwargs=counting)
            if write:
                out, settings = _analysis_out(run_dir, analysis.name, args)
        except Exception as err:
            message = user_message(err)
            if message is None:
                raise
            where = "" if str(run_dir) in message else f"{run_dir}: "
            print(f"condlab: error: {where}{message}", file=sys.stderr)
            failed += 1
            continue
        figures = []
        if out is not None:
            analysis.write(out, settings)
            formats = ("png", "svg") if args.svg else ("png",)
            figures = [] if args.no_figures else _figures(run, analysis, out, formats)
        if args.tensorboard:  # one TensorBoard run per condlab run: DIR/RUN
            from .models import write_analysis

            write_analysis(run, analysis, Path(args.tensorboard) / run_dir.resolve().name)
        results.append(analysis.to_dict() | {"figures": [str(f) for f in figures],
                                             "out": None if out is None else str(out)})
        if not args.json:
            _print_analysis(analysis, out, figures)
    if args.json and results:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2))
    return EXIT_BAD_INPUT if failed else 0


def _analysis_out(run_dir: Path, name: str, args: argparse.Namespace) -> tuple[Path, dict]:
    """(the folder of this analysis, its settings), checked by the one output-folder rule: the
    options (defaults aside) name the folder; under --out, OUT/RUN/NAME, the run is recorded too
    (another run of the same folder name must not replace it)."""
    from ._outputs import check_same_result

    out = _analysis_dir(run_dir, name, args.out)
    settings = {"analysis": name, **({"run": str(run_dir.resolve())} if args.out else {})}
    check_same_result(out / "analysis.json", settings, args.overwrite, "analysis",
                      legacy={"analysis": out.name})
    return out, settings


def _analysis_dir(run_dir: Path, name: str, out: str | None) -> Path:
    """OUT/RUN/NAME, else RUN/analysis/NAME, else (a run we cannot write to) a folder here, said."""
    if out:
        return Path(out) / run_dir.name / name
    target = run_dir / "analysis" / name
    if _can_write(target):
        return target
    here = Path("condlab-analysis") / run_dir.resolve().parent.name / run_dir.name / name
    if not _can_write(here):
        raise ValueError(f"cannot write the analysis into '{run_dir}' nor '{here}': give --out DIR, "
                         "or --json --no-figures to write nothing")
    print(f"condlab: note: '{run_dir}' is not writable; the analysis goes to '{here}'", file=sys.stderr)
    return here


def _can_write(directory: Path) -> bool:
    """Whether files can be created in `directory` (made if missing), tried for real."""
    import tempfile

    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            return True
    except OSError:
        return False


def _figures(run, analysis, out: Path, formats: tuple[str, ...]) -> list[Path]:
    from .analysis import is_external
    from .plotting import analysis_figures

    if is_external(run):  # any layer size: heat maps of a stated sample of rows
        from .models import external_run_figures

        return external_run_figures(run, analysis, out)

    return analysis_figures(run, analysis, out, formats)


def _print_analysis(analysis, out: Path | None, figures: list[Path]) -> None:
    import numpy as np

    keys = ["gradient@snapshot", "gradient@init", "sign@init", "replay"]
    print(f"{analysis.run}  epoch {analysis.epoch}  (optimizer {analysis.optimizer})")
    if analysis.divergence:
        print(f"  WARNING: {analysis.divergence}")
    print(f"  {'layer':<7} {'activation':<10} {'p':>2} {'bound':>5} {'lines':>5} {'dirs':>4} "
          f"{'stable':>6}  {'shares':<22}" + "".join(f"{k:>18}" for k in keys) + "  best")
    for r in analysis.layers:
        o = r.orientations
        shares = " ".join(f"{c.share:.2f}" for c in o.lines[:5]) + (" ..." if len(o.lines) > 5 else "")
        p = "-" if r.p is None else str(r.p)
        bound = "-" if r.p is None else f"{r.p}/{2 * r.p}" + ("!" if r.within_bound is False else "")
        cells = []
        for k in keys:
            angles = r.angles.get(k)
            cells.append(f"{np.mean(angles):>17.1f}°" if angles else f"{'-':>18}")
        print(f"  {r.layer:<7} {r.activation:<10} {p:>2} {bound:>5} {o.n_lines:>5} "
              f"{o.n_directions:>4} {'yes' if o.stable else 'no':>6}  {shares:<22}"
              + "".join(cells) + f"  {r.best or '-'}")
        if r.within_bound is False:
            print(f"          BOUND VIOLATED: {o.n_lines} lines > p = {r.p} (Proposition 1)")
        elif r.bound_status == "nothing condensed":
            print(f"          nothing condensed: 0 lines, nothing to hold against the bound p = {r.p}")
        if o.n_arcs:
            print(f"          {o.n_arcs} arc(s) of neurons (a continuous band, not lines): widths "
                  + ", ".join(f"{c.width_deg:.0f}°" for c in o.arcs))
        if r.note:
            print(f"          note: {r.note}")
    print("  bound: p lines / 2p directions; angles: mean over measured lines of the angle "
          "to the nearest predicted line")
    if analysis.model_rank and "skipped" in analysis.model_rank:
        print(f"  model rank: skipped ({analysis.model_rank['skipped']})")
    elif analysis.model_rank:
        r = analysis.model_rank
        at = ", ".join(f"{k}: {v}" for k, v in r["rank_at"].items())
        print(f"  model rank rank DF(theta) on {r['inputs']} training inputs: {r['rank']} of {r['n_params']} "
              f"parameters, {r['n_outputs']} outputs ({r['rule']}; at rtol {at})")
    for f in analysis.polyfits:
        print(f"  polynomial fit of the output, degree {f.degree}: R^2 = {f.r2:.6f}")
    for note in analysis.notes:
        print(f"  note: {note}")
    if out is not None:
        print(f"  written: {out / 'analysis.json'}" + (f" and {len(figures)} figures" if figures else ""))


def cmd_reduce(args: argparse.Namespace) -> int:
    from ._guards import check_amplitude_tol
    from ._outputs import check_same_result
    from .analysis import reduce
    from .records import atomic_write_json, atomic_write_npz, load_run, provenance

    check_amplitude_tol(args.amplitude_tol)
    done = []  # every run reduced and every folder checked before anything is written
    for run_dir in _run_dirs(Path(args.path)):
        run = load_run(run_dir)
        layer = hidden_layers(run, [args.layer])
        if len(layer) != 1:
            raise ConfigError(f"--layer {args.layer} names {len(layer)} layers: reduce takes one")
        red = reduce(run, epoch=args.epoch, layer=layer[0], negligible=args.negligible,
                     amplitude_tol=args.amplitude_tol)
        out = Path(args.out) / run_dir.name if args.out else run_dir / "reduce" / f"epoch{red.epoch}"
        settings = {"layer": f"layer{layer[0] + 1}", "epoch": red.epoch, "negligible": args.negligible,
                    "amplitude_tol": args.amplitude_tol}
        check_same_result(out / "reduction.json", settings, args.overwrite, "reduction")
        done.append((run_dir, run, red, out, settings))
    results = []
    for run_dir, run, red, out, settings in done:
        names = run.architecture.names
        atomic_write_npz(out / "reduced.npz", {n: w.detach().numpy() for n, w in zip(names, red.net.layers,
                                                                                      strict=True)})
        atomic_write_json(out / "reduction.json", {"run": str(run_dir), **red.to_dict(), "settings": settings,
                                                   "provenance": provenance()})
        results.append({"run": str(run_dir), **red.to_dict(), "out": str(out)})
        if not args.json:
            e = red.errors
            print(f"{run_dir}  epoch {red.epoch}  layer{layer[0] + 1}: "
                  f"width {red.width} -> {red.reduced_width} "
                  f"({red.n_lines} merged lines, {sum(red.exact)} exact; {len(red.kept)} kept, "
                  f"{len(red.dropped)} dropped)")
            print(f"  relative output error: train {e['train_error']:.3g}, test {e['test_error']:.3g}; "
                  f"loss {e['loss']:.6g} -> {e['reduced_loss']:.6g}; model rank {e['rank']:.0f} -> "
                  f"{e['reduced_rank']:.0f}")
            print(f"  written: {out / 'reduction.json'} and reduced.npz")
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    import time

    from .report import NAMES, detect, write_report

    start = time.perf_counter()
    kind = NAMES[detect(Path(args.path))]
    out = write_report(args.path, args.out, args.overwrite)
    print(f"{kind} page ({out.stat().st_size / 1e6:.2f} MB, {time.perf_counter() - start:.1f} s): {out}")
    return 0
