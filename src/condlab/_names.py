"""Names that become folders (runs, sweeps, batches, experiments) are names, never paths.

A config's ``name`` or a spec's ``name:`` comes from a file that may be shared, and a folder is
made from it: ``../../x`` or ``/etc`` must not write outside the output root. The one rule is
``training._checks.name_problem`` (config validation uses it too; ``check_name`` here raises
it); ``folder_for`` is the one way a folder is made from a name (checked, and the resolved path
must lie inside the root, so a symlink cannot lead it out either).
"""

from __future__ import annotations

from pathlib import Path

from .training import NAME_RULE, ConfigError, name_problem


def check_name(name: object, what: str = "name") -> str:
    """`name` unchanged, or a one-line ConfigError naming it and the rule."""
    problem = name_problem(name)
    if problem is not None:
        shown = repr(name) if len(repr(name)) <= 60 else repr(name)[:57] + "..."
        raise ConfigError(f"{what}={shown} is not accepted ({problem}): {NAME_RULE}")
    return name


def folder_for(root: str | Path, name: str, what: str = "name", form: str = "{}") -> Path:
    """root/form(name) (e.g. form "sweep-{}"), `name` checked and the resolved path inside the
    resolved root."""
    path = Path(root) / form.format(check_name(name, what))
    if not inside(path, root):
        raise ConfigError(f"{what}={name!r} leads to '{path.resolve()}', outside '{Path(root).resolve()}': "
                          "choose another name")
    return path


def inside(path: str | Path, root: str | Path) -> bool:
    """Whether `path` (resolved: '..' and symlinks followed) lies inside `root`."""
    return Path(path).resolve().is_relative_to(Path(root).resolve())
