"""Where results go: names that become folders, and the one output-folder rule of every command.

Names (``check_name``, ``folder_for``): a config's ``name`` or a spec's ``name:`` comes from a
file that may be shared, and a folder is made from it: ``../../x`` or ``/etc`` must not write
outside the output root. The one rule is ``training._checks.name_problem`` (config validation
uses it too; ``check_name`` raises it); ``folder_for`` is the one way a folder is made from a
name (checked, and the resolved path must lie inside the root, so a symlink cannot lead it out).

Output folders:

train, reproduce, sweep, phase-diagram, reduce, analyze, inspect --out and report --out all
decide through ``check_result_folder`` (a folder of results) or ``check_same_result`` (a folder
or file whose settings are recorded in one file):

- a new or empty folder is used;
- one holding another kind of result (or files condlab did not write) is refused: nothing there
  is ever replaced, whatever the options;
- one holding the same kind of result made with the same settings is resumed, or written again
  the same (the command says which);
- one holding the same kind of result made with other settings is refused, naming the option
  that replaces it (``--overwrite``), the differing settings where they are known.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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


# ------------------------------------------------------------------------------ output folders

def fresh_dir(base: Path) -> Path:
    """`base`, or `base-2`, `base-3`, ... : the first name that does not exist yet."""
    path, k = base, 2
    while path.exists() or path.is_symlink():
        path, k = base.with_name(f"{base.name}-{k}"), k + 1
    return path


def stamp() -> str:
    return _dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def check_writable(out: Path, flag: str = "--out") -> None:
    """Raise a one-line ConfigError unless `out` is, or can be made as, a writable folder."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{flag} '{out}' is a file, not a folder: choose a folder path")
    probe = out
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{flag} '{out}' cannot be created: '{probe}' is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} '{out}' is not writable: no permission to write in '{probe}'")


def holds_files(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


def check_fresh_out(out: Path, overwrite: bool, resume_hint: bool = True, api: bool = False) -> None:
    """``condlab.train(out=...)``: refuse an `out` that already holds files (unless `overwrite`).

    `api`: the message names the Python options (``condlab.train(..., overwrite=True)``,
    ``condlab.resume``) instead of the command-line ones (the command uses check_result_folder).
    """
    flag = "out" if api else "--out"
    check_writable(out, flag)
    if holds_files(out) and not overwrite:
        example = sorted(p.name for p in out.iterdir())[0]
        how = f"condlab.resume('{out}')" if api else f"`condlab train --resume {out}`"
        resume = f"to continue an interrupted run there use {how}; " if resume_hint else ""
        replace = "overwrite=True" if api else "--overwrite"
        raise ConfigError(f"{flag} '{out}' already holds results (e.g. '{example}'): {resume}"
                          f"to keep them, choose a fresh folder; {replace} replaces them")


_MARKS = (  # (kind, files any of which marks it), in the order they are tried
    ("inspect", ("inspect.json", "inspect.csv")),
    ("analysis", ("analysis.json", "analysis.npz")),
    ("reduction", ("reduction.json", "reduced.npz")),
)


def result_kind(folder: Path) -> str | None:
    """What kind of result a folder holds (None: nothing): 'phase diagram', 'sweep', 'train batch',
    'run', 'reproduce', 'inspect', 'analysis', 'reduction', or 'other files'. Read from the files
    each command writes first."""
    folder = Path(folder)
    if not holds_files(folder):
        return None
    spec = folder / "spec.yaml"
    if spec.is_file() and spec.read_bytes().startswith(b"task: phase-diagram"):
        return "phase diagram"
    if (folder / "plan.json").is_file() or spec.is_file():
        return "sweep"
    if (folder / "meta.json").is_file():
        return "run"
    children = [c for c in folder.iterdir() if c.is_dir()]
    if any((folder / f).is_file() for f in ("batch.json", "checkpoint.pt")) or any(
            (c / "meta.json").is_file() for c in children):
        return "train batch"
    if (folder / "claims.json").is_file() or (folder / "summary.md").is_file() or any(
            (c / "claims.json").is_file() for c in children):
        return "reproduce"
    for kind, files in _MARKS:
        if any((folder / f).is_file() for f in files):
            return kind
    if any((g / "analysis.json").is_file() for c in children for g in c.iterdir() if g.is_dir()):
        return "analysis"  # analyze --out OUT: OUT/RUN/NAME/analysis.json
    if any(c.name.startswith("cosine_") and c.suffix == ".png" for c in folder.iterdir()):
        return "inspect"  # an inspect killed after its heat maps, before inspect.json
    names = {p.name for p in folder.iterdir()}
    if names <= {".lock", "runs"}:  # a sweep killed before writing spec.yaml (a diagram writes it first)
        return "sweep" if holds_files(folder / "runs") else None
    # empty folders (a tmp/ a test or a tool made) hold nothing to replace
    return "other files" if any(p.is_file() for p in folder.rglob("*")) else None


def _a(kind: str) -> str:
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def check_result_folder(out: Path, kind: str, same_settings: bool, overwrite: bool,
                        flag: str = "--out", *, differ: Iterable[str] = (), where: str | None = None,
                        resume: str = "run the same settings to resume it",
                        overwrite_flag: str = "--overwrite") -> None:
    """The one output-folder rule: an empty or new folder is used; one of the same kind and
    settings is resumed (`resume` says how); one of the same kind and other settings (`differ`:
    which) only with `overwrite`; one holding another kind of result (or other files) never.
    `where` names the place in the message (default: `flag` and `out`)."""
    check_writable(Path(out), flag)  # a file, or a path through one: named before anything else
    held = result_kind(out)
    if held is None:
        return
    if held != kind:
        what = "other files" if held == "other files" else f"{_a(held)} result"
        raise ConfigError(f"{flag} '{out}' already holds {what}, not {_a(kind)}: choose another folder "
                          f"(a folder of another kind of result is never replaced, not even with "
                          f"{overwrite_flag})")
    if not same_settings and not overwrite:
        refuse_other_settings(where or f"{flag} '{out}'", kind, differ, resume, overwrite_flag)


def refuse_other_settings(place: str, kind: str, differ: Iterable[str], resume: str,
                          overwrite_flag: str = "--overwrite", keep: str = "folder") -> None:
    """The one message for a result of the same kind and other settings."""
    shown = ", ".join(differ)
    raise ConfigError(f"{place} already holds results of {_a(kind)} with other settings"
                      f"{f' ({shown})' if shown else ''}: {resume}, choose another {keep} to keep it, "
                      f"or pass {overwrite_flag} to replace it")


def differing(before: Any, settings: dict[str, Any]) -> list[str]:
    """The keys of `settings` whose earlier value (`before`, a dict or None) differs; ['unknown
    settings'] when no earlier settings are recorded."""
    if not isinstance(before, dict):
        return ["unknown settings"]
    return sorted(k for k in set(settings) | set(before) if before.get(k) != settings.get(k))


def check_same_result(record: Path, settings: dict, overwrite: bool, kind: str, flag: str = "--out", *,
                      before: Any = None, folder: bool = True, overwrite_flag: str = "--overwrite",
                      legacy: dict | None = None) -> bool:
    """check_result_folder for a result whose settings are recorded in one file, `record` (its
    JSON's "settings"; `before` gives them instead where they are read otherwise; `folder`:
    False for a file that lies in a folder of another kind, as a report page does; `legacy`:
    the settings of a record written before records held them). Returns whether the record
    exists with the same settings (then it is written again, the same)."""
    settings = json.loads(json.dumps(settings))  # as a JSON record holds them: lists, not tuples
    if before is None and record.is_file():
        earlier = read_json(record)
        before = earlier.get("settings", legacy) if isinstance(earlier, dict) else None
    differ = differing(before, settings) if record.exists() else []
    resume = "run the same settings to write it again"
    if folder:
        check_result_folder(record.parent, kind, not differ, overwrite, flag, differ=differ,
                            where=f"'{record}'", overwrite_flag=overwrite_flag, resume=resume)
    elif differ and not overwrite:
        refuse_other_settings(f"{flag} '{record}'", kind, differ, resume, overwrite_flag, keep="file")
    return record.exists() and not differ


def remove_stale_runs(out: Path, keep: set[str]) -> list[str]:
    """After --overwrite: remove run folders of an earlier batch (they hold meta.json) not in `keep`."""
    removed = []
    for child in sorted(out.iterdir()):
        if child.is_dir() and child.name not in keep and (
                (child / "meta.json").is_file() or child.name.endswith(".partial")):
            shutil.rmtree(child)
            removed.append(child.name)
    return removed


def read_json(path: Path) -> object:
    """json.load with a one-line error naming the file."""
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(f"'{path}' is not valid JSON ({err.msg} at line {err.lineno}): "
                          "the file is corrupt; restore it or re-run the command that wrote it") from None
    except UnicodeDecodeError:
        raise ConfigError(f"'{path}' is not UTF-8 text: the file is corrupt") from None


def point_latest(folder: Path) -> Path:
    """Make folder.parent/latest point at `folder` (a symlink, else a text file naming it)."""
    link = folder.parent / "latest"
    tmp = folder.parent / f".latest-{os.getpid()}"
    try:
        if link.exists() and not link.is_symlink():
            raise OSError("not a symlink")
        tmp.unlink(missing_ok=True)
        os.symlink(folder.name, tmp, target_is_directory=True)
        os.replace(tmp, link)
        return link
    except OSError:
        tmp.unlink(missing_ok=True)
        from .records import atomic_write_text

        atomic_write_text(folder.parent / "LATEST", f"{folder.name}\n")
        return folder.parent / "LATEST"


# ------------------------------------------------------------------------------- per command

def train_folder(out: Path, config: dict, overwrite: bool, ignore: Iterable[str] = ()) -> str | None:
    """`condlab train --out`: the one rule for a batch folder. Returns None (train into it),
    'resume' (an interrupted batch of this config: continue it) or 'done' (this config's batch
    is there, complete: nothing to do). `ignore`: config keys that do not change a result
    (``condlab.sweeps.UNHASHED_KEYS``: train.device, ...), left out of the comparison."""
    from .training import Config

    before, held = None, result_kind(out)  # another kind: refused below, its files not read
    if held == "train batch" and (out / "config.json").is_file():
        before = read_json(out / "config.json")
    elif held == "train batch" and (out / "checkpoint.pt").is_file():
        from .training import read_checkpoint

        before = read_checkpoint(out).get("config")
    if isinstance(before, dict):
        try:
            before = Config.from_dict(before).to_dict()
        except ValueError:
            before = None
    def settings(tree: dict) -> dict:
        return {k: v for k, v in _flat(tree).items() if k not in set(ignore)}

    differ = [] if not holds_files(out) else differing(None if before is None else settings(before),
                                                         settings(config))
    check_result_folder(out, "train batch", not differ, overwrite, differ=differ,
                        resume=f"give the same config (or `condlab train --resume {out}`) to continue it")
    if differ or overwrite or held is None:
        return None
    return "resume" if (out / "checkpoint.pt").is_file() else "done"


def _flat(tree: dict, prefix: str = "") -> dict[str, Any]:
    """{"model.width": 4, ...}: a config's keys as the --set options name them."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def reproduce_out(out: str | None, names: list[str], overwrite: bool,
                  settings: dict[str, dict] | None = None) -> tuple[Path, bool]:
    """(folder for this invocation, whether it is a fresh stamped one under runs/reproduce).

    An experiment folder already in --out is refused (check_result_folder) unless it holds the
    same settings (`settings`: name -> reproduce_settings; reproduced_already says so) or is
    an interrupted sweep-based one (resumable); with --overwrite it is removed first."""
    if out is None:
        folder = fresh_dir(Path("runs") / "reproduce" / stamp())
        check_writable(folder, "the output folder")
        return folder, True
    folder = Path(out)
    check_result_folder(folder, "reproduce", True, overwrite)  # another kind: never
    same = reproduced_already(folder, names, settings)
    taken = [folder / n for n in names if holds_files(folder / n) and not resumable(folder / n)]
    taken += [folder / f for f in ("summary.md", "summary.csv") if len(names) > 1 and (folder / f).exists()]
    if taken and not same and not overwrite:
        differ = [_experiment_differ(p, (settings or {}).get(p.name)) for p in taken if p.is_dir()]
        check_result_folder(folder, "reproduce", False, False, where=f"--out '{folder}'", differ=differ,
                            resume="run the same experiments with the same seeds to see them again")
    for path in taken if overwrite else []:
        if path.is_dir():
            if not (path / "claims.json").is_file() and not (path / "runs").is_dir():
                raise ConfigError(f"'{path}' holds files condlab did not write: choose another --out")
            shutil.rmtree(path)  # --overwrite: no stale seed folders of the earlier run survive
    return folder, False


def _experiment_differ(experiment: Path, settings: dict | None) -> str:
    """'fig3: init_seeds': an experiment folder and how its claims.json's settings differ."""
    claims = experiment / "claims.json"
    earlier = read_json(claims) if claims.is_file() else None
    if settings is None or not isinstance(earlier, dict):
        return f"{experiment.name}: unknown settings"
    before = {k: earlier.get(k) for k in settings}
    return f"{experiment.name}: {', '.join(differing(before, settings)) or 'summary'}"


def reproduced_already(folder: Path, names: list[str], settings: dict[str, dict] | None) -> bool:
    """Whether every experiment of `names` is in `folder` (claims.json) with these `settings`."""
    if not settings:
        return False
    for name in names:
        claims = folder / name / "claims.json"
        earlier = read_json(claims) if claims.is_file() else None
        if not isinstance(earlier, dict) or any(earlier.get(k) != v for k, v in settings[name].items()):
            return False
    return len(names) == 1 or (folder / "summary.md").is_file()


def resumable(experiment: Path) -> bool:
    """An experiment folder that an interrupted sweep-based experiment left: only its sweeps
    (OUT/NAME/sweeps/<sweep>), no claims.json yet. Running it again continues those sweeps (they
    never retrain or overwrite a finished run) instead of being refused."""
    return (experiment / "sweeps").is_dir() and {p.name for p in experiment.iterdir()} == {"sweeps"}
