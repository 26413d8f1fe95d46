"""Count a diagram spec file's runs before anything heavy is imported (``phase-diagram --spec``).

Planning a diagram imports torch and matplotlib (seconds); a spec of millions of runs must be
refused at once. The count here reads only the YAML: (gammas x gamma_primes + schemes) x seeds
x widths, with a key left out counted at its smallest (schemes 0, seeds and widths 1), so a
spec refused here is over the limit whatever the defaults; ``plan_diagram`` counts exactly.
"""

from __future__ import annotations

from pathlib import Path


def precount(path: str | Path, yes: bool) -> None:
    """Refuse (ConfigError) a spec file whose runs surely exceed the sweeps' MAX_RUNS, unless `yes`."""
    import yaml

    from ..sweeps import check_run_count

    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # the spec's loader names the problem
    if not isinstance(raw, dict):
        return

    def length(key: str, missing: int) -> int:
        value = raw.get(key)
        return len(value) if isinstance(value, list) else missing

    points = length("gammas", 0) * length("gamma_primes", 0) + length("schemes", 0)
    factors = [points, length("seeds", 1), length("widths", 1)]
    keys = ("gammas", "gamma_primes", "schemes", "seeds", "widths")
    exact = all(isinstance(raw.get(k), list) for k in keys)
    check_run_count(points * factors[1] * factors[2], factors, f"diagram spec '{path}'", yes,
                    least=not exact)


def phase_diagram_command(args) -> int:
    """``condlab phase-diagram``: a --spec's runs counted first (a fraction of a second), then
    the diagram (``_report.phase_diagram_cli``, which imports torch)."""
    if args.spec:
        precount(args.spec, args.yes)
    from ._report import phase_diagram_cli

    return phase_diagram_cli(args)
