"""The ``condlab`` command line: its parser (one function per command family) and ``main``.

The commands: listing and reproduce in _cli_lists; config, train, sweep, analyze, reduce and
report in _cli_records; inspect and phase-diagram in their subpackages (models, phase).
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
import traceback
import warnings
from typing import NoReturn

from ._cli_lists import cmd_activations, cmd_experiments, cmd_presets, cmd_reproduce
from ._cli_records import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    cmd_analyze,
    cmd_config,
    cmd_reduce,
    cmd_report,
    cmd_sweep,
    cmd_train,
)

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


def cmd_phase_diagram(args: argparse.Namespace) -> int:
    from .phase import phase_diagram_command  # counts a --spec before torch is imported

    return phase_diagram_command(args)


def cmd_inspect(args: argparse.Namespace) -> int:
    from .models import run_inspect

    return run_inspect(args)


def _count_options(p: argparse.ArgumentParser) -> None:
    """The line counter's knobs (docs/analysis.md, "Counting orientations")."""
    p.add_argument("--penalty", type=float,
                   help="factor on the BIC cost a line must beat (default 1.5; larger: fewer lines)")
    p.add_argument("--negligible-mads", type=float,
                   help="set aside neurons whose log amplitude lies this many robust std below the "
                        "median (and >= 10x below it; default 5)")
    p.add_argument("--min-share", type=float,
                   help="smallest share of the active neurons on a line (default 0.05; at least 4 neurons)")


def _add_list_commands(sub) -> None:
    """Activations, experiments, presets and config: print, train nothing."""
    p = sub.add_parser("activations", help="list activations with their computed multiplicity p")
    p.add_argument("expr", nargs="?", help="an activation name or expression in x, e.g. 'x**3*tanh(x)'")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_activations)

    p = sub.add_parser("experiments", help="list the experiments `condlab reproduce` runs")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_experiments)

    p = sub.add_parser("presets", help="list named configs (the paper's figure settings)")
    p.add_argument("--json", action="store_true", help="print JSON (the presets' settings)")
    p.set_defaults(func=cmd_presets)

    p = sub.add_parser("config", help="print the resolved config as JSON")
    _add_config_args(p)
    p.set_defaults(func=cmd_config)


def _add_record_commands(sub) -> None:
    """Analyze, reduce and report: read a run's records."""
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


def _add_inspect(sub) -> None:
    """Inspect: any PyTorch model's layers."""
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


def _add_reproduce(sub) -> None:
    """Reproduce: the documents' experiments, with verdicts."""
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
    p.add_argument("--executor", default="local", metavar="NAME",
                   help="where the sweep-based experiment (facilitators) trains, by the executor registry's "
                   "name: local (default: in this process), ray (a Ray cluster, --address), or an executor "
                   "an installed package registers; refused for the others")
    p.add_argument("--address", help="the Ray head HOST:PORT for --executor ray (default: a local cluster)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the verdict rows as JSON instead of the table")
    p.set_defaults(func=cmd_reproduce)


def _add_train(sub) -> None:
    """Train: one batch of runs."""
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


def _add_sweep(sub) -> None:
    """Sweep: a spec's runs, in batches, locally or on Ray."""
    p = sub.add_parser("sweep", help="train every run of a sweep spec not done yet; write a results table")
    p.add_argument("spec", help="sweep spec (YAML; see docs/sweeps.md)")
    p.add_argument("--out", help="output folder, or an object store URI (s3://bucket/prefix, gs://..., "
                   "file://...) (default: runs/sweep-NAME); reused to resume the same spec; another "
                   "spec's sweep there is refused without --overwrite")
    p.add_argument("--executor", default="local", metavar="NAME",
                   help="where the batches train, by the executor registry's name: local (default: in this "
                   "process), ray (one Ray task per batch), or an executor an installed package registers "
                   "(docs/sweeps.md, \"Your own executor\")")
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


def _add_phase_diagram(sub) -> None:
    """Phase-diagram: the two- or three-layer diagram."""
    p = sub.add_parser("phase-diagram", help="phase diagram of condensation via sweeps: two layers "
                       "(JMLR 2021) or three (--depth 3)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--smoke", action="store_true", help="5x5 grid, widths 1e2-1e4, 1 seed (CI, < 1 min)")
    size.add_argument("--quick", action="store_true", help="9x9 grid, widths 1e3-1e5, 2 seeds")
    p.add_argument("--target", default="authors", choices=["authors", "harder"],
                   help="authors: 3 points x=-0.5,0,0.5, y=-0.5,0,1 (default); harder: 4 alternating points")
    p.add_argument("--depth", dest="layers", type=int, metavar="DEPTH",
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
    p.add_argument("--executor", default="local", metavar="NAME",
                   help="where the batches train, by the executor registry's name: local (default), ray, "
                   "or an executor an installed package registers")
    p.add_argument("--address", help="Ray cluster address (default: a local Ray)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true",
                   help="print claims.json (verdicts, regimes, provenance) instead of the account; with "
                   "--dry-run, the counts as JSON")
    p.set_defaults(func=cmd_phase_diagram)


def build_parser() -> argparse.ArgumentParser:
    from ._version import __version__

    parser = _Parser(
        prog="condlab", description="Study condensation of neural networks at small initialization.")
    parser.add_argument("--version", action="version", version=f"condlab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    _add_list_commands(sub)
    _add_record_commands(sub)
    _add_inspect(sub)
    _add_reproduce(sub)
    _add_train(sub)
    _add_sweep(sub)
    _add_phase_diagram(sub)
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
    except KeyboardInterrupt as err:  # Ctrl-C, or a stop the command explains (e.g. reproduce's)
        print("condlab: interrupted" + (f": {err.args[0]}" if err.args else ""), file=sys.stderr)
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


def console_main() -> NoReturn:
    """The `condlab` console script and ``python -m condlab``: ``main()``, then exit_now."""
    exit_now(main())


def exit_now(code: int) -> NoReturn:
    """Exit with `code` once the atexit handlers have run, without the interpreter's teardown.

    Freeing every module and object of a process that imported torch costs ~0.4 s of CPU and
    of wall time here, a tenth of a short sweep, and nothing a command wrote depends on it:
    results are written, synced and closed before ``main`` returns. The ordinary exit is kept
    where teardown does matter: under a profiler or tracer (cProfile, coverage write their data
    then) and while a non-daemon thread still runs (it would be cut off).
    """
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)  # CPython's; elsewhere: the ordinary exit
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if run_exitfuncs is None or sys.getprofile() is not None or sys.gettrace() is not None or others:
        sys.exit(code)
    run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that left, a closed stream: as Python's exit
            pass
    os._exit(code)


if __name__ == "__main__":
    console_main()
