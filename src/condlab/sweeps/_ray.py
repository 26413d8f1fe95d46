"""The Ray executor: one Ray task per batch on a cluster (docs/sweeps.md, "Running on a cluster").

Before anything is written, ``connect`` probes ``--address`` (``_ray_connect``: an
unreachable head is one line within seconds) and joins the cluster; ``check`` refuses what
cannot work: batches that ask for a GPU on a cluster without one, more CPUs per batch than
any node has, and any node that runs other condlab code or does not see the sweep's output
(the driver writes a marker file there, and each node must read it back). Each task then
gets the CPUs its batch needs (``--cpus-per-batch``, else one per 10^6 multiply-adds of a
training step, ``STEP_WORK``), a GPU when ``train.device`` is cuda, and the driver's condlab
(``runtime_env`` ``py_modules``). It writes its runs into the storage (a shared folder or an
object store), or with ``--return-runs`` hands their files back through Ray's object store for
the driver to write (``RETURN_LIMIT`` bytes a batch at most). The driver checks that every run
a task reports is in the storage, file by file, before it counts it as done.
"""

from __future__ import annotations

import importlib.util
import math
import secrets
import time
from pathlib import Path
from typing import Any

from ..training import ConfigError
from ._executors import Executor, OnDone, register_executor
from ._ray_node import RETURN_LIMIT, NotShared, TaskPlan, TooBig, TransientBatchError
from ._run import Batch, BatchDone, step_work
from ._storage import CHECK_NAME

RAY_MAX_RETRIES = 3
STEP_WORK = 1e6       # multiply-adds of one training step (runs x samples x parameters) per CPU
CHECK_SECONDS = 300   # how long each node may take to set up condlab and answer the check
VERIFY_WAITS = (0.5, 1, 2, 4, 8, 16)  # a shared file system may show a new folder late (NFS)


@register_executor
class RayExecutor(Executor):
    """One Ray task per batch on the cluster at `address` (a new local one when None)."""

    name = "ray"
    options = ("address", "cpus_per_batch", "return_runs")

    def __init__(self, address: str | None = None, cpus_per_batch: int | None = None,
                 return_runs: bool = False, *, ship_code: bool = True,
                 max_retries: int = RAY_MAX_RETRIES, return_limit: int = RETURN_LIMIT):
        if importlib.util.find_spec("ray") is None:
            raise ConfigError("the Ray executor needs Ray: pip install 'condlab[ray]'")
        whole = isinstance(cpus_per_batch, int) and not isinstance(cpus_per_batch, bool)
        if cpus_per_batch is not None and not (whole and cpus_per_batch >= 1):
            raise ConfigError(f"--cpus-per-batch={cpus_per_batch} is not accepted: give a whole number >= 1")
        self.address, self.cpus_per_batch, self.return_runs = address, cpus_per_batch, return_runs
        self.ship_code, self.max_retries, self.return_limit = ship_code, max_retries, return_limit
        self._started = False
        self._marker: tuple[str, str] | None = None
        self._storage: Any = None
        self._largest = 1  # CPUs of the largest node
        self._ship = False  # whether tasks get this process's condlab (runtime_env py_modules)

    # -- connect and check: before anything is written --------------------------------------

    def connect(self) -> None:
        import os

        import ray

        from ._ray_connect import init_failure, probe, use_token_if_any

        if ray.is_initialized():
            return  # the caller's own Ray session
        address = self.address or os.environ.get("RAY_ADDRESS")
        if address:
            probe(address)
        token = use_token_if_any()
        try:
            ray.init(address=self.address, logging_level="ERROR", log_to_driver=False)
        except Exception as err:  # ConnectionError, AuthenticationError, RuntimeError, ...
            raise init_failure(address, err, token) from None
        self._started = True

    def check(self, storage: Any, batches: list[Batch]) -> None:
        import ray

        if not batches:
            return  # nothing to train: nothing to check
        nodes = _alive()
        self._largest = max(int(n["Resources"].get("CPU", 0)) for n in nodes) if nodes else 1
        self._check_resources(batches, ray.cluster_resources())
        for name in _stale_markers(storage):
            storage.remove(name)
        if not self.return_runs:
            token = secrets.token_hex(8)
            self._marker, self._storage = (f"{CHECK_NAME}-{token}", token), storage
            storage.write_bytes(self._marker[0], token.encode())
        self._check_nodes(nodes, storage)

    def _check_resources(self, batches: list[Batch], total: dict[str, float]) -> None:
        gpu = [b for b in batches if _wants_gpu(b)]
        if gpu and total.get("GPU", 0) < 1:
            have = ", ".join(f"{v:g} {k}" for k, v in sorted(total.items()) if k in ("CPU", "GPU", "TPU"))
            raise ConfigError(f"{len(gpu)} batch(es) have train.device: {gpu[0].config['train']['device']} "
                              f"but the Ray cluster at {self.address or 'local'} has no GPU ({have}): add "
                              "a node with one (ray start --num-gpus=1 ...) or set train.device: cpu")
        if self.cpus_per_batch is not None and self.cpus_per_batch > self._largest:
            raise ConfigError(f"--cpus-per-batch={self.cpus_per_batch} is more than any node has (the "
                              f"largest has {self._largest} CPUs): no batch could ever be placed")

    def _check_nodes(self, nodes: list[dict], storage: Any) -> None:
        """Every node runs this process's condlab and (unless runs come back through the object
        store) sees the marker, else one line naming each node and what is wrong. A node's own
        condlab is used where it is this one (its compiled kernels are cached there); where any
        node lacks it or has another, condlab ships this one to every task (runtime_env)."""
        from ._ray_node import code_fingerprint

        mine = code_fingerprint()
        facts = self._node_facts(nodes, storage)
        if self.ship_code and self._started and any(isinstance(f, str) or f["fingerprint"] != mine
                                                    for f in facts.values()):
            self._reconnect_shipping()
            nodes = _alive()  # the same nodes, unless this process had started a local cluster
            facts = self._node_facts(nodes, storage)
        problems = [p for n in nodes if (p := self._problem(n, facts[n["NodeID"]], mine, storage))]
        if problems:
            raise ConfigError("; ".join(problems))

    def _reconnect_shipping(self) -> None:
        """Join the cluster again with this process's condlab as the job's runtime_env (Ray
        uploads a local folder only for a whole job, at ray.init)."""
        import ray

        ray.shutdown()
        import condlab

        env = {"py_modules": [str(Path(condlab.__file__).parent)], "excludes": ["__pycache__", "*.pyc"]}
        ray.init(address=self.address, logging_level="ERROR", log_to_driver=False, runtime_env=env)
        self._ship = True

    def _node_facts(self, nodes: list[dict], storage: Any) -> dict[str, Any]:
        """node id -> node_facts() run on that node (or the first line of its error)."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from ._ray_node import node_facts

        facts = ray.remote(num_cpus=0, max_retries=0)(node_facts)
        refs = {facts.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                .remote(storage, self._marker): n["NodeID"] for n in nodes}
        _, late = ray.wait(list(refs), num_returns=len(refs), timeout=CHECK_SECONDS)
        out: dict[str, Any] = {}
        for ref, node in refs.items():
            if ref in late:
                out[node] = f"did not answer condlab's check within {CHECK_SECONDS} s"
                continue
            try:
                out[node] = ray.get(ref)
            except Exception as err:
                out[node] = f"cannot run condlab: {_first(err)}"
        return out

    def _problem(self, node: dict, facts: Any, mine: str, storage: Any) -> str:
        """What is wrong with one node ('' when nothing)."""
        from .._version import __version__

        if isinstance(facts, str):
            if self._ship:
                hint = (" (condlab shipped its code there: its dependencies, torch and numpy, must be "
                        "installed)")
            elif self.ship_code:
                hint = (" (condlab ships its code only when it starts the Ray connection itself: call "
                        "ray.init with runtime_env={'py_modules': [condlab's folder]})")
            else:
                hint = " (condlab does not ship its code: ship_code=False)"
            return f"{_node(node)} {facts}{hint}"
        if facts["fingerprint"] != mine:
            return (f"{_node(node)} runs other condlab code ({facts['version']}, source "
                    f"{facts['fingerprint'][:12]}) than this process ({__version__}, {mine[:12]}): "
                    "let condlab ship its code (the default) or install the same condlab there")
        if not facts["sees"]:
            why = f" ({facts['why']})" if facts["why"] else ""
            return (f"{_node(node)} does not see the sweep's output: {storage.where(self._marker[0])}, "
                    f"written here, is not there{why}. --out must be storage every node shares (a shared "
                    "file system, or an object store: s3://...), or pass --return-runs")
        return ""

    # -- run ----------------------------------------------------------------------------------

    def run(self, batches: list[Batch], storage: Any, bar: Any, on_done: OnDone) -> None:
        import ray

        from ._ray_node import ProgressBoard, batch_task

        board = ray.remote(num_cpus=0)(ProgressBoard).remote() if bar else None
        task = ray.remote(max_retries=self.max_retries, retry_exceptions=[TransientBatchError])(batch_task)
        pending = {}
        for slot, batch in enumerate(batches):
            cpus, gpus = self.resources(batch)
            plan = TaskPlan(threads=cpus, marker=self._marker, board=board, slot=slot,
                            return_limit=self.return_limit if self.return_runs else 0,
                            device="cuda" if gpus else None)
            ref = task.options(num_cpus=cpus, num_gpus=gpus).remote(batch, storage, plan)
            pending[ref] = (slot, batch)
        shown: dict[int, float] = {}
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5 if board else None)
                if board is not None:
                    _advance(bar, ray.get(board.read.remote()), batches, shown)
                for ref in ready:
                    slot, batch = pending.pop(ref)
                    done = self._collect(ref, batch, storage)
                    if bar is not None:
                        bar.update(max(batch.cost - shown.get(slot, 0.0), 0.0))
                        shown[slot] = batch.cost
                    on_done(batch, done)
        finally:
            for ref in pending:  # Ctrl-C or an error: stop what still runs
                ray.cancel(ref, force=True)

    def resources(self, batch: Batch) -> tuple[int, int]:
        """(CPUs, GPUs) of a batch's task (``task_resources``)."""
        return task_resources(batch, self._largest, self.cpus_per_batch)

    def _collect(self, ref: Any, batch: Batch, storage: Any) -> BatchDone:
        """A finished task's BatchDone, its returned runs written, every run verified in storage."""
        import ray

        try:
            done = ray.get(ref)
        except Exception as err:  # after the retries: this batch failed, the others go on
            return BatchDone(batch.key, {}, error=_first(err))
        if done.payload is not None:
            for h, files in done.payload.items():
                storage.put_run(h, files)
            done.files = {h: {k: len(v) for k, v in files.items()} for h, files in done.payload.items()}
            done.payload = None
        missing = _unverified(storage, done)
        if missing:
            where = done.where or {}
            return BatchDone(batch.key, {}, done.seconds, where=where, error=(
                f"{len(missing)} run(s) that node {str(where.get('node'))[:12]} ({where.get('host')}) wrote "
                f"are not in the sweep's output as written, e.g. {storage.where('runs/' + missing[0])}: "
                "--out must be storage every node shares (or pass --return-runs)"))
        return done

    def close(self) -> None:
        import ray

        try:
            if self._marker is not None:
                self._storage.remove(self._marker[0])
        finally:
            self._marker = None
            if self._started:
                ray.shutdown()
                self._started = False


def task_resources(batch: Batch, largest: int, cpus_per_batch: int | None = None) -> tuple[int, int]:
    """(CPUs, GPUs) of a batch's Ray task: a GPU when train.device is cuda; `cpus_per_batch`
    CPUs, else 1 for a GPU or task batch and one per STEP_WORK multiply-adds of a training step
    (runs x samples x parameters), at most `largest` (the largest node's CPUs)."""
    gpus = 1 if _wants_gpu(batch) else 0
    if cpus_per_batch is not None:
        return cpus_per_batch, gpus
    if gpus or batch.task:
        return 1, gpus
    work = step_work(batch.config, len(batch.runs))
    return max(1, min(largest, math.ceil(work / STEP_WORK))), gpus


def _unverified(storage: Any, done: BatchDone) -> list[str]:
    """Hashes of the runs reported written whose files the storage does not show (after waits)."""
    if done.error is not None or done.interrupted or done.files is None:
        return []
    missing = [h for h, files in done.files.items() if storage.manifest(h) != files]
    for wait in VERIFY_WAITS:
        if not missing:
            break
        time.sleep(wait)
        missing = [h for h in missing if storage.manifest(h) != done.files[h]]
    return missing


def _advance(bar: Any, epochs: dict[int, int], batches: list[Batch], shown: dict[int, float]) -> None:
    """Move the bar by the epochs the tasks reported (in cost units; a batch's share at most)."""
    for slot, n in epochs.items():
        batch = batches[slot]
        target = min(n * batch.cost / max(batch.epochs, 1), batch.cost * 0.99)
        if target > shown.get(slot, 0.0):
            bar.update(target - shown.get(slot, 0.0))
            shown[slot] = target


def _alive() -> list[dict]:
    import ray

    return [n for n in ray.nodes() if n.get("Alive")]


def _stale_markers(storage: Any) -> list[str]:
    """Markers left by earlier sweeps that were killed (one sweep per --out holds the lock)."""
    return [name for name in storage.names() if name.startswith(f"{CHECK_NAME}-")]


def _wants_gpu(batch: Batch) -> bool:
    return str(batch.config.get("train", {}).get("device", "cpu")).startswith("cuda")


def _node(node: dict) -> str:
    return (f"node {node['NodeID'][:12]} (host {node.get('NodeManagerHostname')}, "
            f"{node.get('NodeManagerAddress')})")


def _first(err: BaseException) -> str:
    cause = getattr(err, "cause", None) or err
    lines = [line for line in str(cause).strip().splitlines() if line.strip()]
    if isinstance(cause, (NotShared, TooBig)) or not lines:
        return lines[0] if lines else type(cause).__name__
    return f"{type(cause).__name__}: {lines[-1] if 'Traceback' in lines[0] else lines[0]}"
