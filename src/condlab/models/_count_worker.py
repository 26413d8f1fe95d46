"""The Tracker's count, off the training thread: a worker process that counts what it is sent.

Why a process: the count of a small model's layers takes as long as dozens of its training
steps, and it is Python-heavy numpy work, so a thread would hold the GIL the training loop needs.
Why ``subprocess`` and not ``multiprocessing``: spawn and forkserver import the parent's
``__main__`` in the child, which re-runs a user's training script that has no ``if __name__ ==
"__main__"`` guard; fork copies a process that runs torch's threads. The worker here is
``python -m condlab.models._count_worker``: it imports numpy and condlab.analysis (no torch),
reads jobs from its stdin and writes results to its stdout, pickled, in order. It ends when
its stdin closes (the Tracker closed, or its process died). With ``--preload`` it first imports
the arc search's Lanczos solver (a model with large layers: ``Tracker``).

A job is (key, matrices, count keywords); a result is (key, list of Orientations) or (key,
None, error text). ``CountWorker`` is the parent's side: ``submit`` sends a job, ``poll``
returns the next result if it came back, ``wait`` blocks for it. If the worker cannot
start or dies, ``failed`` says why and the Tracker counts in its own process instead.

``submit`` pickles the job in the calling thread (the matrices may be views of weights that
go on training) and a sender thread writes it: a job is larger than the pipe's buffer, so a
write waits until the worker reads, and a worker still counting the last job would otherwise
hold the training loop there (measured: 14 ms a measurement, 11 % of a 1000-step MLP loop).
"""

from __future__ import annotations

import os
import pickle
import queue
import subprocess
import sys
import threading
from typing import Any

_END = object()


class CountWorker:
    """The parent's end of one worker process."""

    def __init__(self, preload: bool = False) -> None:
        """`preload`: the worker imports the arc search's Lanczos solver before its first job
        (``analysis.preload_lanczos``), so that no count in the loop pays that import."""
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        self.failed: str | None = None
        self._out: queue.Queue = queue.Queue()
        # items put in _out by the reader thread, and taken by this one: `poll` (called at every
        # step while counts are out) compares the two instead of taking the queue's lock
        self._arrived = self._taken = 0
        argv = [sys.executable, "-m", "condlab.models._count_worker", *(["--preload"] if preload else [])]
        self._proc = subprocess.Popen(argv,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self._reader = threading.Thread(target=self._read, name="condlab-count-reader", daemon=True)
        self._reader.start()
        self._send: queue.Queue = queue.Queue()
        self._sender = threading.Thread(target=self._write, name="condlab-count-sender", daemon=True)
        self._sender.start()

    def _read(self) -> None:
        try:
            while True:
                self._put(pickle.load(self._proc.stdout))
        except EOFError:
            self._put(_END)
        except Exception as err:  # a broken stream: the same as a dead worker
            self._put((_END, repr(err)))

    def _put(self, item: Any) -> None:
        self._out.put(item)
        self._arrived += 1  # only the reader thread writes it

    def _write(self) -> None:
        while (data := self._send.get()) is not _END:
            try:
                self._proc.stdin.write(data)
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError) as err:
                self.failed = f"the count worker stopped ({err})"
                return

    def submit(self, key: Any, matrices: list, kwargs: dict[str, Any]) -> bool:
        """Queue a job for the worker; False when the worker is known to be gone (``failed``)."""
        if self.failed is not None:
            return False
        self._send.put(pickle.dumps((key, matrices, kwargs), protocol=pickle.HIGHEST_PROTOCOL))
        return True

    def _take(self, block: bool) -> tuple | None:
        if not block and self._arrived == self._taken:
            return None  # nothing came back: no lock taken
        try:
            item = self._out.get(block=block)
        except queue.Empty:
            return None
        self._taken += 1
        if item is _END or (isinstance(item, tuple) and item[0] is _END):
            detail = "" if item is _END else f": {item[1]}"
            self.failed = f"the count worker exited with status {self._proc.wait()}{detail}"
            return None
        return item

    def poll(self) -> tuple | None:
        """The next result if it came back (never blocks); None otherwise."""
        return None if self.failed is not None else self._take(block=False)

    def wait(self) -> tuple | None:
        """The next result, waiting for it; None when the worker is gone (``failed`` says why)."""
        return None if self.failed is not None else self._take(block=True)

    def close(self) -> None:
        """Write the jobs still queued, close the worker's stdin (it exits) and reap it."""
        self._send.put(_END)
        self._sender.join(timeout=60)  # the worker reads each job when it has counted the last
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=10)  # it ends at the worker's end of output
        self._proc.stdout.close()


def _serve(jobs, results) -> None:
    """Count each job read from `jobs` and write its result to `results`, until `jobs` ends."""
    from ._counts import count_weights

    while True:
        try:
            key, matrices, kwargs = pickle.load(jobs)
        except EOFError:
            return
        try:
            result = (key, count_weights(matrices, kwargs))
        except Exception as err:  # the parent reports it and counts this job itself
            result = (key, None, f"{type(err).__name__}: {err}")
        pickle.dump(result, results, protocol=pickle.HIGHEST_PROTOCOL)
        results.flush()


if __name__ == "__main__":
    # stdout carries the results; anything printed (a warning) goes to stderr instead
    _results = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    if "--preload" in sys.argv[1:]:  # before the first job: while the tracker starts, not in its loop
        from condlab.analysis import preload_lanczos

        preload_lanczos()
    _serve(sys.stdin.buffer, _results)
