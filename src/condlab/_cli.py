"""The ``condlab`` command line: its parser, and the commands that list and train.

analyze, reduce and report, the commands that read records, are in _cli_records.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
import traceback
import warnings
from pathlib import Path

from ._cli_lists import cmd_activations, cmd_experiments, cmd_presets, cmd_reproduce
from ._cli_records import EXIT_BAD_INPUT, cmd_analyze, cmd_reduce, cmd_report
from .training import Config, ConfigError

EXIT_DIVERGED, EXIT_INTERRUPTED = 3, 130  # EXIT_BAD_INPUT (2): _cli_records
EXIT_INTERNAL, EXIT_BROKEN_PIPE = 1, 141


def _parse_seeds(text: str) -> list[int]:
    """'8' -> seeds 0..7; '0,3,5' or '3-6' -> those seeds."""
    try:
        if "," in text:
            return [int(s) for s in text.split(",") if s.strip()]
        if "-" in text.lstrip("-"):
            lo, hi = text.split("-", 1)
            return list(range(int(lo), int(hi) + 1))
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--seeds '{text}' is not accepted: give a count (8), a list (0,3,5) or a range (3-6)"
        ) from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"--seeds {count} is not accepted: the count must be >= 1")
    return list(range(count))


def _layer(text: str) -> str:
    """--layer: a layer name or glob (fnmatch) over layer names; a bare number K means layerK."""
    text = text.strip()
    if not text:
        raise argparse.ArgumentTypeError("--layer '' is not accepted: give a layer name, a glob or a number")
    return f"layer{int(text)}" if text.isdigit() else text


LAYER_HELP = ("a layer, by name or glob over layer names (fnmatch: 'layer*', 'fc*', 'h.0.attn.*'); "
              "a number K means layerK; repeatable")


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", help="YAML or JSON config file")
    p.add_argument("--preset", help="named config with a figure's caption settings (see `condlab presets`)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set train.lr=5e-4 (repeatable)")
    p.add_argument("--seeds", type=_parse_seeds,
                   help="seeds: a count (8 = 0..7), a list (0,3,5) or a range (3-6)")
    p.add_argument("--device", help="cpu, cuda, cuda:N or auto (CUDA when present)")
    p.add_argument("--dtype", choices=["float32", "float64"])
    p.add_argument("--epochs", type=int)


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


def cmd_phase_diagram(args: argparse.Namespace) -> int:
    from .phase import phase_diagram_command  # counts a --spec before torch is imported

    return phase_diagram_command(args)


def cmd_inspect(args: argparse.Namespace) -> int:
    from .models import run_inspect

    return run_inspect(args)


def _print_runs(result) -> None:
    print(f"{'run':<24} {'lr':>9} {'init_std':>9} {'loss@0':>10} {'loss@end':>10} {'70%-epoch':>9}  status")
    for run in result.runs:
        end = run.meta["last_epoch"]
        stage = "-" if run.initial_stage_epoch is None else str(run.initial_stage_epoch)
        print(f"{run.path.name:<24} {run.spec.lr:>9.3g} {run.spec.init_std:>9.3g} "
              f"{run.loss[0]:>10.4g} {run.loss[end]:>10.4g} {stage:>9}  {run.status}")
    print(f"{len(result.runs)} runs trained as one batch in {result.seconds:.1f} s; "
          f"records in {result.out}")


def _count_options(p: argparse.ArgumentParser) -> None:
    """The line counter's knobs (docs/analysis.md, "Counting orientations")."""
    p.add_argument("--penalty", type=float,
                   help="factor on the BIC cost a line must beat (default 1.5; larger: fewer lines)")
    p.add_argument("--negligible-mads", type=float,
                   help="set aside neurons whose log amplitude lies this many robust std below the "
                        "median (and >= 10x below it; default 5)")
    p.add_argument("--min-share", type=float,
                   help="smallest share of the active neurons on a line (default 0.05; at least 4 neurons)")


def build_parser() -> argparse.ArgumentParser:
    from ._version import __version__

    parser = _Parser(
        prog="condlab", description="Study condensation of neural networks at small initialization.")
    parser.add_argument("--version", action="version", version=f"condlab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("activations", help="list activations with their computed multiplicity p")
    p.add_argument("expr", nargs="?", help="an activation name or expression in x, e.g. 'x**3*tanh(x)'")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_activations)

    p = sub.add_parser("analyze", help="measure condensation of a run (or every run of a batch)")
    p.add_argument("path", help="a run directory, or a batch directory written by `condlab train`")
    p.add_argument("--epoch", type=int, help="snapshot epoch (default: last one inside the initial stage)")
    p.add_argument("--layer", type=_layer, action="append",
                   help=LAYER_HELP + " (default: every hidden layer)")
    p.add_argument("--out", help="output directory: OUT/RUN/NAME (default: RUN/analysis/NAME, NAME = "
                   "epochE plus the options that differ from their defaults, e.g. epoch120-pen2)")
    p.add_argument("--json", action="store_true",
                   help="print the analysis as JSON (with --no-figures and no --out: write nothing)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an analysis of another run or other settings in the same folder")
    p.add_argument("--no-figures", action="store_true")
    p.add_argument("--svg", action="store_true", help="figures as SVG too (default: PNG only)")
    p.add_argument("--no-replay", action="store_true", help="skip the leading-order replay prediction")
    _count_options(p)
    p.add_argument("--tensorboard", metavar="DIR",
                   help="also write the per-layer numbers (every recorded step of a Tracker run) and "
                   "the ordered heat maps as TensorBoard events")
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("inspect", help="condensation of every layer of a PyTorch checkpoint (any model)")
    p.add_argument("checkpoint", help="a state_dict saved with torch.save, a .safetensors file, a "
                   "Hugging Face save_pretrained folder (config.json + model.safetensors, sharded or "
                   "not), or (with --unsafe-pickle) a pickled nn.Module")
    p.add_argument("--layer", dest="layers", type=_layer, action="append", metavar="LAYER",
                   help=LAYER_HELP + " (default: every layer)")
    p.add_argument("--heads", type=int, help="attention heads, to split Q/K/V/O per head (a state_dict "
                   "does not record it; a save_pretrained folder's config.json does)")
    p.add_argument("--tensorboard", metavar="DIR",
                   help="also write the per-layer numbers and the ordered heat maps as TensorBoard events")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p.add_argument("--out", help="write inspect.csv, inspect.json, inspect.parquet (with pyarrow) and "
                   "cosine heat maps here")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an inspect result of another checkpoint or other settings in --out")
    p.add_argument("--no-figures", action="store_true", help="with --out: no heat maps")
    p.add_argument("--unsafe-pickle", action="store_true",
                   help="allow a pickled whole nn.Module: unpickling RUNS CODE from the file, so only "
                   "use it on files you trust")
    _count_options(p)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("reproduce",
                       help="reproduce an experiment of the papers, with a verdict on each claim")
    p.add_argument("name", help="an experiment (see `condlab experiments`) or all")
    p.add_argument("--seeds", type=_parse_seeds,
                   help="init seeds (default 3, or 1 with --quick; 5/2 where the data are fixed)")
    p.add_argument("--data-seeds", type=_parse_seeds, help="data draws (default 3, or 2 with --quick)")
    p.add_argument("--quick", action="store_true",
                   help="fewer pairs, no replay or diagnostic variants, data subsets: provisional verdicts")
    p.add_argument("--out", help="output directory (default: a new runs/reproduce/DATE-TIME, with "
                   "runs/reproduce/latest pointing at it); an existing experiment folder is refused, "
                   "except an interrupted facilitators run, which is continued")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the experiments' folders already in --out")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    p.add_argument("--data-dir", help="directory with MNIST / CIFAR files (else $CONDLAB_DATA)")
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="where the sweep-based experiment (facilitators) trains: in this process "
                   "(default) or on a Ray cluster (--address); refused for the others")
    p.add_argument("--address", help="the Ray head HOST:PORT for --executor ray (default: a local cluster)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the verdict rows as JSON instead of the table")
    p.set_defaults(func=cmd_reproduce)

    p = sub.add_parser("experiments", help="list the experiments `condlab reproduce` runs")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_experiments)

    p = sub.add_parser("reduce", help="merge each condensed group of neurons into one (a narrower network)")
    p.add_argument("path", help="a run directory, or a batch directory written by `condlab train`")
    p.add_argument("--epoch", type=int, help="snapshot epoch (default: last one inside the initial stage)")
    p.add_argument("--layer", type=_layer, default="layer1",
                   help="the hidden layer to reduce, by name or number K = layerK (default layer1)")
    p.add_argument("--negligible", choices=["merge", "drop", "keep"], default="merge",
                   help="neurons below the amplitude cutoff: merged into one (default), dropped or kept")
    p.add_argument("--amplitude-tol", type=float,
                   help="split each line into amplitude bands r_max <= (1 + tol) r_min before merging")
    p.add_argument("--out", help="output directory (default: RUN/reduce/epochE); one holding a reduction "
                   "of other settings is refused")
    p.add_argument("--overwrite", action="store_true", help="replace a reduction of other settings in --out")
    p.add_argument("--json", action="store_true", help="print the reduction as JSON")
    p.set_defaults(func=cmd_reduce)

    p = sub.add_parser("report", help="one self-contained HTML page of a result (opens from disk, "
                       "fetches nothing)")
    p.add_argument("path", help="a run or batch folder (condlab train), a sweep folder, a reproduce folder "
                   "(one experiment or all), a phase diagram, an `inspect --out` folder or a Tracker record")
    p.add_argument("--out", metavar="FILE.html", help="the page to write (default: PATH/report.html); an "
                   "earlier condlab report of the same result is replaced, one of another result "
                   "only with --overwrite, any other file never")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a condlab report of another result at --out")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("presets", help="list named configs (the paper's figure settings)")
    p.add_argument("--json", action="store_true", help="print JSON (the presets' settings)")
    p.set_defaults(func=cmd_presets)

    p = sub.add_parser("config", help="print the resolved config as JSON")
    _add_config_args(p)
    p.set_defaults(func=cmd_config)

    p = sub.add_parser("train", help="train a batch of runs and write one directory per run")
    _add_config_args(p)
    p.add_argument("--out", help="output directory (default: runs/NAME-TIMESTAMP); must be new or empty")
    p.add_argument("--overwrite", action="store_true",
                   help="write into a non-empty --out, replacing the run folders already there")
    p.add_argument("--resume", metavar="DIR",
                   help="continue the interrupted or killed batch in DIR from its checkpoint.pt")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print batch.json instead of the table")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("sweep", help="train every run of a sweep spec not done yet; write a results table")
    p.add_argument("spec", help="sweep spec (YAML; see docs/sweeps.md)")
    p.add_argument("--out", help="output folder, or an object store URI (s3://bucket/prefix, gs://..., "
                   "file://...) (default: runs/sweep-NAME); reused to resume the same spec; another "
                   "spec's sweep there is refused without --overwrite")
    p.add_argument("--executor", default="local", choices=["local", "ray"],
                   help="local: batches in this process (default); ray: one Ray task per batch")
    p.add_argument("--address", help="Ray cluster address, e.g. 127.0.0.1:6379 (default: a local Ray)")
    p.add_argument("--cpus-per-batch", type=int, metavar="N",
                   help="Ray: CPUs (and torch threads) per batch (default: one per 10^6 multiply-adds "
                   "of a training step, at most the largest node's CPUs)")
    p.add_argument("--return-runs", action="store_true",
                   help="Ray, without shared storage: tasks return their runs (at most 256 MiB a batch) "
                   "through Ray's object store, and this process writes them to --out")
    p.add_argument("--overwrite", action="store_true",
                   help="sweep into an --out holding a sweep of another spec: its finished runs of the "
                   "same settings are reused, its spec.yaml, plan.json and results table replaced")
    p.add_argument("--dry-run", action="store_true", help="plan and count runs; write and train nothing")
    p.add_argument("--yes", action="store_true", help="plan more than 100,000 runs (refused without it)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the results table's rows as JSON")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("phase-diagram", help="phase diagram of condensation via sweeps: two layers "
                       "(JMLR 2021) or three (--depth 3)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--smoke", action="store_true", help="5x5 grid, widths 1e2-1e4, 1 seed (CI, < 1 min)")
    size.add_argument("--quick", action="store_true", help="9x9 grid, widths 1e3-1e5, 2 seeds")
    p.add_argument("--target", default="authors", choices=["authors", "harder"],
                   help="authors: 3 points x=-0.5,0,0.5, y=-0.5,0,1 (default); harder: 4 alternating points")
    p.add_argument("--depth", dest="layers", type=int,
                   help="2: the JMLR two-layer diagram (default, or a --spec's `layers:`); 3: the empirical "
                   "three-layer diagram "
                   "(per-layer regimes of W1, W2, a; smoke: widths 64-256, quick: 64-512)")
    p.add_argument("--gamma2", type=float, metavar="G2",
                   help="with --depth 3: the slice gamma2 (middle layer's scale; default 0, see docs)")
    p.add_argument("--spec", help="a diagram spec YAML (gammas, gamma_primes, widths, seeds, schemes, "
                   "target, tol, max_steps; see docs/phase_diagram.md) instead of a preset")
    p.add_argument("--out", help="output directory (default runs/phase-MODE-TARGET, runs/phase3-MODE-TARGET "
                   "with --depth 3); reused to resume the same spec; another spec's diagram or another "
                   "kind of result there is refused")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the regimes, claims and figures of a diagram of another spec in --out")
    p.add_argument("--yes", action="store_true", help="train a diagram of more than 100,000 runs")
    p.add_argument("--dry-run", action="store_true", help="plan and count runs; write and train nothing")
    p.add_argument("--executor", default="local", choices=["local", "ray"])
    p.add_argument("--address", help="Ray cluster address (default: a local Ray)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true",
                   help="print claims.json (verdicts, regimes, provenance) instead of the account; with "
                   "--dry-run, the counts as JSON")
    p.set_defaults(func=cmd_phase_diagram)
    return parser


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line (no usage block) and exit status 2."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    return f"condlab: warning: {message}\n"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    warnings.formatwarning = _one_line_warning
    from ._guards import user_message

    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("condlab: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `condlab ... | head`: the reader left; nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as err:  # errors a user can cause: one line; anything else is a bug
        message = user_message(err)
        if message is None:
            traceback.print_exc()
            print("condlab: internal error: this is a bug in condlab; please report it with the "
                  "command you ran and the traceback above", file=sys.stderr)
            return EXIT_INTERNAL
        print(f"condlab: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
