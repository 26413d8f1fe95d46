"""Where a sweep's results go: a local folder, or an object store through ``pyarrow.fs``.

``--out`` is a local path or a URI that ``pyarrow.fs.FileSystem.from_uri`` reads
(``s3://bucket/prefix``, ``gs://bucket/prefix``; ``file:///path`` is a local folder). Both
kinds offer the same small interface, and the storage object travels to Ray tasks as is
(pyarrow's file systems pickle with their options):

* a **local folder** is written in place: each run assembled under ``runs/<hash>.partial``
  and renamed when complete (``_records.commit_runs``), single files written then renamed;
* an **object store** has no rename: a run is assembled in a local temporary folder, then its
  files are uploaded with ``meta.json`` last, so ``meta.json`` marks a complete run there as it
  does everywhere (a run is finished when its meta.json says so); a run folder without one is
  the rest of an interrupted upload and is removed before the next sweep trains. A single file
  (spec.yaml, plan.json, results.csv) is one PUT, which the store applies whole or not at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..records import atomic_write_bytes, durable, folder_lock, fsync_path
from ..training import ConfigError

CHECK_NAME = ".storage-check"  # the marker every Ray node must see before a sweep trains


def open_storage(out: str | Path | Any) -> LocalStorage | ArrowStorage:
    """A local path (or file:// URI) -> LocalStorage; another pyarrow.fs URI -> ArrowStorage (a
    storage object is returned as it is)."""
    if not isinstance(out, (str, os.PathLike)):
        return out
    text = os.fspath(out)
    if isinstance(out, Path) or "://" not in text:
        return LocalStorage(Path(text).absolute(), text)
    if text.startswith("file://"):
        return LocalStorage(Path(unquote(urlparse(text).path)), text)
    try:
        import pyarrow.fs as pafs
    except ImportError:
        raise ConfigError(f"--out '{text}' needs pyarrow for its file system: pip install "
                          "'condlab[sweep]', or give a local path") from None
    try:
        fs, base = pafs.FileSystem.from_uri(text)
    except (ValueError, OSError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ConfigError(f"--out '{text}' is not accepted: give a local path or a pyarrow.fs URI "
                          f"(s3://bucket/prefix, gs://bucket/prefix, file:///path): {first}") from None
    return ArrowStorage(fs, base.rstrip("/"), text.split("?")[0])


@dataclass(frozen=True)
class LocalStorage:
    """A folder on this machine's file systems (a shared one, for a Ray cluster)."""

    root: Path        # absolute: the same path on every node that shares it
    shown: str = ""   # as the user gave it, for messages and SweepResult.out

    @property
    def out(self) -> Path:
        return Path(self.shown) if self.shown and "://" not in self.shown else self.root

    def where(self, name: str = "") -> str:
        return str(self.root / name) if name else str(self.root)

    def lock(self, what: str = "sweep"):
        return folder_lock(self.root, what)

    def finished_rows(self, hashes: Iterable[str], damaged: dict[str, str] | None = None
                      ) -> dict[str, dict[str, Any]]:
        """Rows of the finished runs by hash; a damaged one goes into `damaged` (path -> why)."""
        from ._run import finished_row

        runs = self.root / "runs"
        return {h: row for h in hashes if (row := finished_row(runs / h, damaged)) is not None}

    def drop_partials(self) -> None:
        """Remove the .partial directories of runs killed while being written."""
        for partial in (self.root / "runs").glob("*.partial"):
            shutil.rmtree(partial, ignore_errors=True)

    def write_bytes(self, name: str, data: bytes) -> None:
        atomic_write_bytes(self.root / name, data)

    def read_bytes(self, name: str) -> bytes | None:
        try:
            return (self.root / name).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def remove(self, name: str) -> None:
        (self.root / name).unlink(missing_ok=True)

    def names(self) -> list[str]:
        """The names of the files directly in the folder."""
        return [p.name for p in self.root.iterdir() if p.is_file()] if self.root.is_dir() else []

    @contextmanager
    def stage(self) -> Iterator[Path]:
        """The folder runs are written into: OUT/runs itself (renamed into place there)."""
        runs = self.root / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        yield runs

    def publish(self, runs_dir: Path, hashes: Iterable[str]) -> None:
        """Nothing to do: the runs were renamed into place where they were written."""

    def put_run(self, h: str, files: dict[str, bytes]) -> None:
        """Write one run's files (relative name -> bytes) as runs/<h>, atomically."""
        runs = self.root / "runs"
        partial, final = runs / f"{h}.partial", runs / h
        shutil.rmtree(partial, ignore_errors=True)
        written = []
        for name, data in files.items():
            (partial / name).parent.mkdir(parents=True, exist_ok=True)
            (partial / name).write_bytes(data)
            written.append(partial / name)
        dirs = sorted({str(p.parent) for p in written} | {str(partial)})
        durable(written, dirs)
        if final.exists():
            shutil.rmtree(final)
        os.replace(partial, final)
        fsync_path(runs)

    def manifest(self, h: str) -> dict[str, int]:
        """Relative name -> size of every file of runs/<h> (empty when it does not exist)."""
        return local_manifest(self.root / "runs" / h)


@dataclass(frozen=True)
class ArrowStorage:
    """A prefix in a pyarrow file system (S3, GCS, ...): runs uploaded whole, meta.json last."""

    fs: Any    # pyarrow.fs.FileSystem
    base: str  # the prefix inside it ("bucket/path")
    uri: str   # as the user gave it, without its query (which may hold options)

    @property
    def out(self) -> str:
        return self.uri

    def where(self, name: str = "") -> str:
        return f"{self.uri.rstrip('/')}/{name}" if name else self.uri

    def _path(self, name: str) -> str:
        return f"{self.base}/{name}"

    @contextmanager
    def lock(self, what: str = "sweep") -> Iterator[None]:
        """One sweep per URI on this machine (an object store has no lock that a kill -9
        releases: sweeps on two machines writing one prefix are not prevented)."""
        key = hashlib.sha256(self.uri.encode()).hexdigest()[:16]
        folder = Path(tempfile.gettempdir()) / f"condlab-lock-{key}"
        with ExitStack() as stack:
            try:
                stack.enter_context(folder_lock(folder, what))
            except ConfigError as err:  # name the URI, not the lock's folder
                raise ConfigError(str(err).replace(f"'{folder}'", f"'{self.uri}'")) from None
            yield

    def _files(self, prefix: str) -> list[Any]:
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self._path(prefix), allow_not_found=True, recursive=True)
        return [i for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File]

    def _run_files(self) -> dict[str, list[Any]]:
        """run hash -> its files (one listing of runs/)."""
        runs: dict[str, list[Any]] = {}
        skip = len(self._path("runs/"))
        for info in self._files("runs"):
            h, _, _ = info.path[skip:].partition("/")
            runs.setdefault(h, []).append(info)
        return runs

    def finished_rows(self, hashes: Iterable[str], damaged: dict[str, str] | None = None
                      ) -> dict[str, dict[str, Any]]:
        from ._run import meta_row

        listed = self._run_files()
        rows = {}
        for h in hashes:
            if any(i.path == self._path(f"runs/{h}/meta.json") for i in listed.get(h, ())):
                try:
                    meta = json.loads(self.read_bytes(f"runs/{h}/meta.json") or b"{}")
                except (json.JSONDecodeError, UnicodeDecodeError):
                    meta = None
                if not isinstance(meta, dict):  # trained again, and reported
                    if damaged is not None:
                        damaged[self.where(f"runs/{h}")] = "meta.json is not a JSON object"
                    continue
                row = meta_row(meta, lambda h=h: self._summary(h))
                if row is not None:
                    rows[h] = row
        return rows

    def _summary(self, h: str) -> dict[str, Any]:
        """The table row of a run written by something other than a sweep: downloaded to a
        temporary folder and measured there."""
        from ..records import load_run
        from ._run import summarize

        with tempfile.TemporaryDirectory(prefix="condlab-run-") as tmp:
            for info in self._files(f"runs/{h}"):
                rel = info.path[len(self._path(f"runs/{h}/")):]
                (Path(tmp) / rel).parent.mkdir(parents=True, exist_ok=True)
                (Path(tmp) / rel).write_bytes(self.read_bytes(f"runs/{h}/{rel}") or b"")
            return summarize(load_run(tmp))

    def drop_partials(self) -> None:
        """Remove run folders without meta.json: uploads that a kill interrupted."""
        for h, files in self._run_files().items():
            if not any(i.base_name == "meta.json" for i in files):
                self.fs.delete_dir(self._path(f"runs/{h}"))

    def write_bytes(self, name: str, data: bytes) -> None:
        path = self._path(name)
        try:
            stream = self.fs.open_output_stream(path)
        except FileNotFoundError:  # a file system with real folders (object stores have none)
            self.fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
            stream = self.fs.open_output_stream(path)
        with stream as fh:
            fh.write(data)

    def read_bytes(self, name: str) -> bytes | None:
        try:
            with self.fs.open_input_stream(self._path(name)) as fh:
                return fh.readall()
        except FileNotFoundError:
            return None

    def remove(self, name: str) -> None:
        try:
            self.fs.delete_file(self._path(name))
        except FileNotFoundError:
            pass

    def names(self) -> list[str]:
        """The names of the files directly under the prefix."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self.base, allow_not_found=True, recursive=False)
        return [i.base_name for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File]

    def has_runs(self) -> bool:
        """Whether anything lies under runs/ (one listing of its first level)."""
        import pyarrow.fs as pafs

        return bool(self.fs.get_file_info(pafs.FileSelector(self._path("runs"), allow_not_found=True)))

    @contextmanager
    def stage(self) -> Iterator[Path]:
        """A local temporary folder that runs are written into before ``publish`` uploads them."""
        tmp = Path(tempfile.mkdtemp(prefix="condlab-stage-"))
        try:
            yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def publish(self, runs_dir: Path, hashes: Iterable[str]) -> None:
        """Upload each written run folder runs_dir/<h> (meta.json last), then remove it here."""
        for h in hashes:
            folder = Path(runs_dir) / h
            self.put_run(h, _read_folder(folder))
            shutil.rmtree(folder, ignore_errors=True)

    def put_run(self, h: str, files: dict[str, bytes]) -> None:
        """Upload one run's files as runs/<h>: whatever an earlier try left there is removed
        first, and meta.json (the marker of a complete run) goes last."""
        self.fs.delete_dir_contents(self._path(f"runs/{h}"), missing_dir_ok=True)
        for name in sorted(files, key=lambda n: n == "meta.json"):
            self.write_bytes(f"runs/{h}/{name}", files[name])

    def manifest(self, h: str) -> dict[str, int]:
        prefix = len(self._path(f"runs/{h}/"))
        return {i.path[prefix:]: i.size for i in self._files(f"runs/{h}")}


def local_manifest(folder: Path) -> dict[str, int]:
    """Relative name -> size of every file under `folder` ({} when it does not exist)."""
    out = {}
    for dirpath, _, names in os.walk(folder):
        for name in names:
            path = Path(dirpath) / name
            out[path.relative_to(folder).as_posix()] = path.stat().st_size
    return out


def _read_folder(folder: Path) -> dict[str, bytes]:
    return {rel: (folder / rel).read_bytes() for rel in local_manifest(folder)}


def read_runs(runs_dir: Path, hashes: Iterable[str], limit: int,
              too_big: Callable[[int], Exception]) -> dict[str, dict[str, bytes]]:
    """The files of each run folder runs_dir/<h>, for returning them through Ray's object store;
    `too_big(total bytes)` is raised when they add up to more than `limit` bytes."""
    sizes = {h: local_manifest(Path(runs_dir) / h) for h in hashes}
    total = sum(sum(files.values()) for files in sizes.values())
    if total > limit:
        raise too_big(total)
    return {h: _read_folder(Path(runs_dir) / h) for h in sizes}
