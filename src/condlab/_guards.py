"""Checks made before any work: output folders, memory, analysis options; one-line error messages.

A command must never replace results it did not write in the same invocation, must find a bad
``--out`` before hours of training, and must refuse a config that cannot fit in memory before
allocating it. Errors a user can cause become one line naming the file or value (exit 2).
"""

from __future__ import annotations

import errno
import os
import pickle
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
    text = (f"; the largest batch needs about {size(estimate['memory'])} of memory, the new records "
            f"about {size(estimate['disk'])} of disk")
    if "seconds" in estimate:
        text += (f", the training about {duration(estimate['seconds'])} on one CPU core (a rough estimate "
                 "from runs x epochs x samples x parameters, not a measurement)")
    return text


def duration(seconds: float) -> str:
    """'40 s', '12 min', '3.5 h', '2.1 days'."""
    for unit, length in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * length:
            return f"{seconds / length:.2g} {unit}"
    return f"{max(seconds, 1):.0f} s"


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
