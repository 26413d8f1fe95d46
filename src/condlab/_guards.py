"""Checks made before any work: output folders, memory, analysis options; one-line error messages.

A command must never replace results it did not write in the same invocation, must find a bad
``--out`` before hours of training, and must refuse a config that cannot fit in memory before
allocating it. Errors a user can cause become one line naming the file or value (exit 2).
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import pickle
import shutil
import zipfile
from pathlib import Path

from .training import Config, ConfigError, snapshot_epochs

_ERRNO_HINTS = {
    errno.EACCES: "permission denied", errno.EPERM: "permission denied",
    errno.ENOTDIR: "a part of this path is a file, not a folder",
    errno.EISDIR: "is a folder where a file was expected",
    errno.ENOSPC: "no space left on the device", errno.EROFS: "the file system is read-only",
    errno.ENAMETOOLONG: "the file name is too long", errno.EEXIST: "already exists",
}  # fmt: skip


def one_line(text: str) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def user_message(err: BaseException) -> str | None:
    """The one-line message for an error a user can cause, or None for a bug (traceback)."""
    import yaml

    if isinstance(err, OSError) and err.errno is not None and err.filename is not None:
        what = _ERRNO_HINTS.get(err.errno, err.strerror or "cannot be used")
        other = f" -> '{err.filename2}'" if getattr(err, "filename2", None) else ""
        return f"'{err.filename}'{other}: {what}"
    if isinstance(err, pickle.UnpicklingError):
        return f"{one_line(str(err))}; the file was not loaded"
    if isinstance(err, yaml.YAMLError):
        return f"invalid YAML: {one_line(str(err))}"
    if isinstance(err, zipfile.BadZipFile | EOFError):
        return f"a file is truncated or not in the expected format: {one_line(str(err))}"
    if isinstance(err, MemoryError):
        return "out of memory: reduce the sizes (model.width, data.n, seeds, epochs, snapshots)"
    if isinstance(err, ValueError | OSError):  # ConfigError, RecordError, DatasetMissing, ...
        return one_line(str(err))
    return None


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
    """Refuse an --out that already holds files (unless --overwrite); check it is writable.

    `api`: the message names the Python options (``condlab.train(..., overwrite=True)``,
    ``condlab.resume``) instead of the command-line ones.
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


def result_kind(folder: Path) -> str | None:
    """What kind of result a folder holds (None: nothing): 'phase diagram', 'sweep', 'train batch',
    'run', 'reproduce', or 'other files'. Read from the files each command writes first."""
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
    if (folder / "batch.json").is_file() or any((c / "meta.json").is_file() for c in folder.iterdir()):
        return "train batch"
    if (folder / "claims.json").is_file() or (folder / "summary.md").is_file() or any(
            (c / "claims.json").is_file() for c in folder.iterdir() if c.is_dir()):
        return "reproduce"
    names = {p.name for p in folder.iterdir()}
    if names <= {".lock", "runs"}:  # a sweep killed before writing spec.yaml (a diagram writes it first)
        return "sweep" if holds_files(folder / "runs") else None
    # empty folders (a tmp/ a test or a tool made) hold nothing to replace
    return "other files" if any(p.is_file() for p in folder.rglob("*")) else None


def check_result_folder(out: Path, kind: str, same_settings: bool, overwrite: bool,
                        flag: str = "--out") -> None:
    """The one output-folder rule of the result commands: an empty or new folder is used; one of
    the same kind and settings is resumed; one of the same kind and other settings only with
    --overwrite; one holding another kind of result (or other files) never."""
    check_writable(Path(out), flag)  # a file, or a path through one: named before anything else
    held = result_kind(out)
    if held is None:
        return
    if held != kind:
        what = "other files" if held == "other files" else f"a {held} result"
        raise ConfigError(f"{flag} '{out}' already holds {what}, not a {kind}: choose another "
                          "folder (nothing there is replaced)")
    if not same_settings and not overwrite:
        raise ConfigError(f"{flag} '{out}' holds a {kind} of other settings: run the same settings to "
                          "resume it, choose another folder to keep it, or pass --overwrite to replace "
                          "its results")


def remove_stale_runs(out: Path, keep: set[str]) -> list[str]:
    """After --overwrite: remove run folders of an earlier batch (they hold meta.json) not in `keep`."""
    removed = []
    for child in sorted(out.iterdir()):
        if child.is_dir() and child.name not in keep and (
                (child / "meta.json").is_file() or child.name.endswith(".partial")):
            shutil.rmtree(child)
            removed.append(child.name)
    return removed


def reproduce_out(out: str | None, names: list[str], overwrite: bool) -> tuple[Path, bool]:
    """(folder for this invocation, whether it is a fresh stamped one under runs/reproduce)."""
    if out is None:
        folder = fresh_dir(Path("runs") / "reproduce" / stamp())
        check_writable(folder, "the output folder")
        return folder, True
    folder = Path(out)
    check_writable(folder)
    taken = [folder / n for n in names if holds_files(folder / n) and not resumable(folder / n)]
    taken += [folder / f for f in ("summary.md", "summary.csv") if len(names) > 1 and (folder / f).exists()]
    if taken and not overwrite:
        raise ConfigError(f"--out '{folder}' already holds results of an earlier run ('{taken[0]}'): "
                          "choose a fresh folder (or leave --out out: each run gets its own folder "
                          "under runs/reproduce), or pass --overwrite to replace them")
    for path in taken:
        if path.is_dir():
            if not (path / "claims.json").is_file() and not (path / "runs").is_dir():
                raise ConfigError(f"'{path}' holds files condlab did not write: choose another --out")
            shutil.rmtree(path)  # --overwrite: no stale seed folders of the earlier run survive
    return folder, False


def resumable(experiment: Path) -> bool:
    """An experiment folder that an interrupted sweep-based experiment left: only its sweeps
    (OUT/NAME/sweeps/<sweep>), no claims.json yet. Running it again continues those sweeps (they
    never retrain or overwrite a finished run) instead of being refused."""
    return (experiment / "sweeps").is_dir() and {p.name for p in experiment.iterdir()} == {"sweeps"}


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


# ------------------------------------------------------------------------------------- memory

def run_count(cfg: Config) -> int:
    """Runs of a batch: every combination of the per-run lists (``condlab.training._api.run_specs``)."""
    t, m = cfg.train, cfg.model
    return (len(t.seeds) * len(m.init_std) * len(t.lr) * len(t.weight_decay) * len(t.momentum)
            * len(m.dropout))


def train_bytes(cfg: Config, n: int, d: int, d_out: int) -> int:
    """Bytes a batch needs: weights, optimizer state, workspaces, loss and snapshots (estimate).

    Mirrors _models.BatchedNet and _training.train_batch: the flat parameters with their
    gradient, per-run lr and Adam's four buffers; per hidden layer pre-activations, outputs and
    slopes (R, n, m) plus two backward buffers; the loss; the snapshots, copied once into host
    arrays in the training dtype when taken (``train.snapshot_neurons = K``: K rows of each
    hidden layer, and the whole network at two epochs).
    """
    m, depth, t = cfg.model.width, cfg.model.depth, cfg.train
    runs = run_count(cfg)
    size = 4 if t.dtype == "float32" else 8
    params, stored = snapshot_values(cfg, runs, d, d_out)
    optimizer = (7 if t.optimizer == "adam" else 3) * params
    work = runs * n * (m * (3 * depth + 2) + (d + 1) + 3 * d_out) + params
    device = (optimizer + work + (t.epochs + 1) * runs) * size
    host = stored * size + (t.epochs + 1) * runs * 16 + n * (d + d_out) * 16
    return device + host


def snapshot_values(cfg: Config, runs: int, d: int, d_out: int) -> tuple[int, int]:
    """(parameters of `runs` runs, values their snapshots keep): every parameter at every
    snapshot, or with ``train.snapshot_neurons = K`` K rows of each hidden layer at every snapshot
    and the whole network at two epochs."""
    m, depth, t = cfg.model.width, cfg.model.depth, cfg.train
    params = runs * (m * (d + 1) + (depth - 1) * m * (m + 1) + d_out * (m + int(cfg.model.output_bias)))
    snaps = len(snapshot_epochs(t.snapshots, t.epochs))
    kept = t.snapshot_neurons if 0 < t.snapshot_neurons < m else m
    thin = runs * (kept * (d + 1) + (depth - 1) * kept * (m + 1) + d_out * (m + 1))
    return params, snaps * params if kept == m else snaps * thin + 2 * params


def batch_estimates(configs: list[tuple[dict, int]]) -> tuple[int, int]:
    """(memory of the largest batch, disk of all their records) in bytes, estimated from each
    batch's config dict and run count (train_bytes; a record: its snapshots, loss and data)."""
    memory = disk = 0
    for raw, runs in configs:
        cfg = Config.from_dict(raw)
        d, m, t = cfg.data, cfg.model, cfg.train
        memory = max(memory, train_bytes(cfg, d.n, d.d, m.d_out))
        stored = snapshot_values(cfg, runs, d.d, m.d_out)[1]
        size = 4 if t.dtype == "float32" else 8
        disk += stored * size + runs * ((t.epochs + 1) * 8 + d.n * (d.d + m.d_out) * 8)
    return memory, disk


def estimate_text(estimate: dict[str, int]) -> str:
    """batch_estimates' numbers as the dry run prints them ("" when there are none)."""
    def size(nbytes: float) -> str:
        units = ((30, "GiB"), (20, "MiB"), (10, "KiB"), (0, "B"))
        return next(f"{nbytes / 2**k:.3g} {unit}" for k, unit in units if nbytes >= 2**k or k == 0)

    if not estimate:
        return ""
    return (f"; the largest batch needs about {size(estimate['memory'])} of memory, the new records "
            f"about {size(estimate['disk'])} of disk")


def available_bytes() -> int | None:
    """Memory this process can still get: MemAvailable, capped by a cgroup limit; None if unknown."""
    avail = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
        if limit != "max":
            avail = min(avail, int(limit) - used)
    except (OSError, ValueError):
        pass
    return avail


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.3g} GiB" if nbytes >= 2**27 else f"{nbytes / 2**20:.3g} MiB"


def check_memory(cfg: Config, n: int, d: int, d_out: int) -> None:
    """Refuse, before allocating, a batch whose estimated memory exceeds what is available."""
    need, have = train_bytes(cfg, n, d, d_out), available_bytes()
    if have is not None and need > have:
        runs = run_count(cfg)
        raise ConfigError(
            f"this config needs about {_gib(need)} of memory ({runs} run{'s' * (runs != 1)} of width "
            f"{cfg.model.width}, depth {cfg.model.depth}, {n} samples, {cfg.train.epochs} epochs) "
            f"but about {_gib(have)} is available: reduce model.width, data.n, the seeds, "
            "train.epochs or train.snapshots")


# ----------------------------------------------------------------------------- analysis options

def check_count_options(penalty: float | None, negligible_mads: float | None,
                        min_share: float | None) -> None:
    """Range-check the counting options of `condlab analyze` / `inspect` (NaN fails every range)."""
    if penalty is not None and not 0 < penalty < float("inf"):
        raise ConfigError(f"--penalty {penalty} is not accepted: it must be a number > 0")
    if negligible_mads is not None and not 0 < negligible_mads < float("inf"):
        raise ConfigError(f"--negligible-mads {negligible_mads} is not accepted: it must be a number > 0")
    if min_share is not None and not 0 <= min_share <= 1:
        raise ConfigError(f"--min-share {min_share} is not accepted: it must lie in [0, 1]")


def check_amplitude_tol(tol: float | None) -> None:
    """`reduce --amplitude-tol`: None (no bands) or a finite number >= 0 (NaN fails the range)."""
    if tol is not None and not 0 <= tol < float("inf"):
        raise ConfigError(f"--amplitude-tol {tol} is not accepted: it must be a finite number >= 0 "
                          "(leave it out for one band per line)")


def check_same_result(record: Path, settings: dict, overwrite: bool, command: str) -> None:
    """The one output rule for a result file: absent, or written with the same `settings` (then
    it is written again, the same), else refused unless --overwrite names the replacement."""
    if not record.exists() or overwrite:
        return
    earlier = read_json(record)
    before = earlier.get("settings") if isinstance(earlier, dict) else None
    if before != settings:
        differ = sorted(k for k in settings if not isinstance(before, dict) or before.get(k) != settings[k])
        what = f"other settings ({', '.join(differ)})" if isinstance(before, dict) else "unknown settings"
        raise ConfigError(f"'{record}' already holds a {command} result of {what}: choose another --out "
                          "to keep it, or pass --overwrite to replace it")


def read_json(path: Path) -> object:
    """json.load with a one-line error naming the file."""
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(f"'{path}' is not valid JSON ({err.msg} at line {err.lineno}): "
                          "the file is corrupt; restore it or re-run the command that wrote it") from None
    except UnicodeDecodeError:
        raise ConfigError(f"'{path}' is not UTF-8 text: the file is corrupt") from None
