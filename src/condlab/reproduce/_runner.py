"""Run experiments by name: one folder each with claims.json, figures and run records."""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

from ._claims import ExperimentResult, write_summary
from ._context import RECEIVED, Context, Experiment, stop_if_signalled
from ._embedding import embedding
from ._facilitators import facilitators
from ._multidim import fig3, fig4, fig4_plain, relu, simple_target
from ._one_d import evolution, fig5, fig6
from ._optimistic_exp import optimistic
from ._real import fig2, mnist
from ._transformer import transformer

EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in [
    Experiment("fig2", "NeurIPS 2022, Fig. 2", "CIFAR-10 ResNet18-like + FC head: 1 line (2 for xtanh)",
               fig2, dataset="cifar10"),
    Experiment("fig3", "NeurIPS 2022, Fig. 3", "5-50-1 with five activations: 1, 2, 3, 1, 1 lines", fig3),
    Experiment("fig4", "NeurIPS 2022, Fig. 4", "six-layer residual net: 3, 2, 1, 1, 1 lines", fig4),
    Experiment("fig4-plain", "NeurIPS 2022, A.5", "Fig. 4 without residual connections", fig4_plain),
    Experiment("fig5", "NeurIPS 2022, Fig. 5", "1-D output ~ polynomial of degree p at epoch 1000", fig5),
    Experiment("fig6", "NeurIPS 2022, Fig. 6", "direction field with p stable lines at epoch 200", fig6),
    Experiment("evolution", "NeurIPS 2022, A.6", "snapshots through the initial stage", evolution),
    Experiment("relu", "two-layer paper, Fig. 1(d)", "ReLU: 3 directions, two of them opposite", relu),
    Experiment("simple-target", "two-layer paper, Fig. 2(a)", "simpler target: x2tanh on < 3 lines",
               simple_target),
    Experiment("mnist", "two-layer paper, Fig. 2(b)", "MNIST, 30 x2tanh neurons: one line", mnist,
               dataset="mnist"),
    Experiment("optimistic", "talk: optimistic sample size", "teacher-student: recovery near O_f* at small "
               "init, far more samples at large init", optimistic, data_grid=False),
    Experiment("embedding", "talk: embedding principle", "loss plateaus of a wide tanh net = narrow "
               "critical points, embedded", embedding, data_grid=False),
    Experiment("transformer", "issue 12; talk (004)", "small transformer: W_Q, W_K condense at small init",
               transformer, data_grid=False),
    Experiment("facilitators", "the talk (Xu et al.)", "smaller init, weight decay, dropout, large lr "
               "condense more", facilitators, data_grid=False),
]}
# The default grid: 3 data draws x 3 init seeds (9 pairs); --quick: 2 data draws x 1 init seed,
# whose verdicts are provisional. Real-data experiments and those that draw their own data
# (optimistic, embedding, transformer) use init seeds only (5 / 2).
DEFAULT_SEEDS, QUICK_SEEDS = 3, 1
DEFAULT_DATA_SEEDS, QUICK_DATA_SEEDS = 3, 2
FIXED_DATA_SEEDS, FIXED_DATA_QUICK_SEEDS = 5, 2


def unknown(name: str) -> ValueError:
    return ValueError(f"unknown experiment '{name}': choose one of {', '.join(EXPERIMENTS)} or all")


def check_data_dir(data_dir: str | Path | None) -> None:
    """A named data directory ($CONDLAB_DATA when none) must exist: no silent stand-in."""
    import os

    from ..training import ENV_VAR, ConfigError

    named, where = (data_dir, "--data-dir") if data_dir else (os.environ.get(ENV_VAR), ENV_VAR)
    if named and not Path(named).expanduser().is_dir():
        raise ConfigError(f"{where} '{named}' is not an existing folder: give the folder that holds "
                          "the MNIST / CIFAR files (or name none: MNIST then runs on the bundled "
                          "8x8 digits, labelled a STAND-IN)")


def seed_grid(name: str, seeds: list[int] | None, data_seeds: list[int] | None,
              quick: bool) -> tuple[list[int], list[int] | None]:
    """(init seeds, data seeds or None where the experiment's data are fixed)."""
    if EXPERIMENTS[name].dataset is not None or not EXPERIMENTS[name].data_grid:
        n = FIXED_DATA_QUICK_SEEDS if quick else FIXED_DATA_SEEDS
        return (seeds if seeds is not None else list(range(n))), None
    init = seeds if seeds is not None else list(range(QUICK_SEEDS if quick else DEFAULT_SEEDS))
    data = data_seeds if data_seeds is not None else list(
        range(QUICK_DATA_SEEDS if quick else DEFAULT_DATA_SEEDS))
    return init, data


def reproduce(name: str, *, seeds: list[int] | None = None, quick: bool = False,
              out: str | Path = "runs/reproduce", device: str = "cpu",
              data_dir: str | Path | None = None, progress: bool = False,
              smoke: bool = False, data_seeds: list[int] | None = None,
              diagnose: bool | None = None, executor: str = "local",
              address: str | None = None) -> ExperimentResult:
    """Run one experiment; writes OUT/NAME/claims.json, its figures and its run records.

    `seeds` are init seeds, `data_seeds` data draws (every pair is trained). `diagnose`
    (default: not with --quick) reruns failing claims under the diagnostic variants.
    `smoke` (set by ``reproduce all --quick``) picks the CI-sized version of the slower
    experiments (optimistic, embedding); the others ignore it. `executor` / `address`: where the
    experiments built on the sweep engine (facilitators) train: 'local' or 'ray' (docs/sweeps.md).
    """
    if name not in EXPERIMENTS:
        raise unknown(name)
    check_executor(name, executor, address)
    check_data_dir(data_dir)
    seeds, data = seed_grid(name, seeds, data_seeds, quick)
    ctx = Context(seeds, quick, Path(out) / name, device, Path(data_dir) if data_dir else None, progress,
                  smoke=smoke, data_seeds=data if data is not None else [0], executor=executor,
                  address=address)
    with signals_stop(), stop_message(ctx):  # the diagnostic variants too: a stop ends the command
        result = EXPERIMENTS[name].run(ctx)
        stop_if_signalled(name)
        result.settings["quick"] = quick
        result.data_seeds = data
        result.provisional = quick
        result.notes += ctx.warnings
        if diagnose if diagnose is not None else not quick:
            from ._diagnose import diagnose_result

            diagnose_result(EXPERIMENTS[name], ctx, result)
        stop_if_signalled(f"{name}: diagnostic variants")
    result.write(ctx.out)
    return result


@contextmanager
def signals_stop():
    """Within: SIGINT and SIGTERM stop an experiment (KeyboardInterrupt), also between training
    batches (Python's default would kill on SIGTERM without a word), and each is recorded in
    ``_context.RECEIVED``, so that one whose KeyboardInterrupt CPython dropped (raised inside a
    finalizer) still stops the experiment at its next check (``stop_if_signalled``). Main thread
    only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        RECEIVED.append(signum)
        raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")

    def dropped(unraisable) -> None:
        # our stop, raised inside a finalizer (e.g. tqdm's __del__) and dropped by CPython, which
        # would print it with a traceback: silent here, since stop_if_signalled raises it again
        if not (isinstance(unraisable.exc_value, KeyboardInterrupt) and RECEIVED):
            hook(unraisable)

    RECEIVED.clear()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    hook, sys.unraisablehook = sys.unraisablehook, dropped
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def stop_message(ctx: Context):
    """A stop says what was kept: one that arrived between training batches (a bare
    KeyboardInterrupt, or the signal handler's "stopped by signal ...", which lands there when
    the signal comes outside a batch's training loop) gets where the records are added; one
    that names the output folder already (``_context.stopped``) is left as it is."""
    try:
        yield
    except KeyboardInterrupt as err:
        said = str(err.args[0]) if err.args else "stopped"
        if str(ctx.out) in said:
            raise
        raise KeyboardInterrupt(f"{said}; the records trained so far are kept in {ctx.out} "
                                "(no claims.json: nothing was judged)") from None


SWEEP_BASED = ("facilitators",)  # the experiments that train through condlab.sweep (and its executors)


def check_executor(name: str, executor: str, address: str | None) -> None:
    """--executor/--address do what they say or are refused: only sweep-based experiments use them."""
    from ..sweeps import executor_class, make_executor  # noqa: F401  (importing make_executor registers the built-ins)
    from ..training import ConfigError

    executor_class(executor)  # the sweep engine's registry and installed packages' executors, or refused
    if (executor != "local" or address) and name not in SWEEP_BASED:
        flag = f"--executor {executor}" if executor != "local" else "--address"
        raise ConfigError(f"{flag} is not accepted for '{name}': only {', '.join(SWEEP_BASED)} trains "
                          "through the sweep engine (the other experiments train in this process); "
                          "leave it out")


def reproduce_all(*, out: str | Path = "runs/reproduce", **kwargs) -> tuple[list[ExperimentResult], str]:
    """Run every experiment; writes OUT/summary.md and OUT/summary.csv; returns results and table."""
    check_executor("all", kwargs.get("executor", "local"), kwargs.get("address"))
    smoke = bool(kwargs.get("quick"))
    results = [reproduce(name, out=out, smoke=smoke, **kwargs) for name in EXPERIMENTS]
    return results, write_summary(results, Path(out))
