"""Where sweeps write, and how the Ray executor fails fast, without a Ray cluster.

The object-store path (``ArrowStorage``: runs uploaded whole, meta.json last) runs here on
pyarrow's local file system; against a real S3-compatible server, and with Ray, in
tests/test_sweep_ray.py. The address probe runs against sockets on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import condlab
from condlab.sweeps._storage import ArrowStorage, LocalStorage, open_storage
from condlab.training import ConfigError

SMALL = {
    "name": "small",
    "base": "fig5",
    "set": {"train.epochs": 20, "train.snapshots": "every:10", "train.dtype": "float64"},
    "grid": {"model.width": [8, 12]},
    "seeds": {"init": 2},
}


def test_out_is_a_local_path_a_file_uri_or_a_pyarrow_uri_and_anything_else_is_one_line(tmp_path):
    assert open_storage(tmp_path / "a") == LocalStorage(tmp_path / "a", str(tmp_path / "a"))
    assert open_storage(f"file://{tmp_path}/b").root == tmp_path / "b"
    assert isinstance(open_storage("s3:bucket"), LocalStorage)  # no "//": a local folder, as before
    pytest.importorskip("pyarrow")
    assert isinstance(open_storage("mock:///x"), ArrowStorage)
    with pytest.raises(ConfigError, match=r"^--out 'nope://x/y' is not accepted: give a local path or a "
                                          r"pyarrow.fs URI") as err:
        open_storage("nope://x/y")
    assert "\n" not in str(err.value)


def _arrow(root: Path) -> ArrowStorage:
    import pyarrow.fs as pafs

    return ArrowStorage(pafs.LocalFileSystem(), str(root), f"arrow:{root}")


@pytest.fixture(autouse=True)
def _temp_files_in_tmp_path(tmp_path, monkeypatch):
    """Staging and lock folders (the OS temp folder) under tmp_path: nothing left in /tmp."""
    import tempfile

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


def test_an_object_store_sweep_resumes_after_an_interrupted_upload_and_gives_the_local_table(tmp_path):
    # claim: through a pyarrow file system (no rename) a sweep writes the same table as into a
    # local folder; a run whose upload was cut short (no meta.json) is removed and trained
    # again, and only it
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    local = condlab.sweep(SMALL, out=tmp_path / "local", progress=False)
    first = condlab.sweep(SMALL, out=_arrow(tmp_path / "store"), progress=False)
    uri = f"arrow:{tmp_path / 'store'}"
    assert (first.trained, first.out) == (4, uri)
    assert first.tables == [f"{uri}/results.csv", f"{uri}/results.parquet"]
    runs = sorted((tmp_path / "store" / "runs").iterdir())
    assert [p.name for p in runs] == sorted(r["run"] for r in local.rows)  # no .partial, no staging
    (runs[1] / "meta.json").unlink()  # an upload killed before its marker
    (runs[1] / "stray.npy").write_bytes(b"left by the killed upload")
    again = condlab.sweep(SMALL, out=_arrow(tmp_path / "store"), progress=False)
    assert (again.trained, again.skipped) == (1, 3)
    assert not (runs[1] / "stray.npy").exists() and (runs[1] / "meta.json").is_file()
    a, b = pd.read_csv(tmp_path / "store" / "results.csv"), pd.read_csv(tmp_path / "local" / "results.csv")
    assert a.drop(columns=["error"]).equals(b.drop(columns=["error"]))


def test_an_uploaded_run_sends_meta_json_last_and_replaces_what_an_earlier_try_left(tmp_path):
    pytest.importorskip("pyarrow")
    store = _arrow(tmp_path)
    order = []
    real = store.write_bytes
    object.__setattr__(store, "write_bytes", lambda name, data: order.append(name) or real(name, data))
    store.write_bytes("runs/h/old.npy", b"from an earlier try")
    order.clear()
    store.put_run("h", {"meta.json": b"{}", "config.json": b"{}", "snapshots/layer1.npy": b"x"})
    assert order[-1] == "runs/h/meta.json" and len(order) == 3
    assert store.manifest("h") == {"meta.json": 2, "config.json": 2, "snapshots/layer1.npy": 1}
    local = LocalStorage(tmp_path / "local")
    local.put_run("h", {"meta.json": b"{}", "snapshots/layer1.npy": b"x"})
    assert local.manifest("h") == {"meta.json": 2, "snapshots/layer1.npy": 1}
    assert not (tmp_path / "local" / "runs" / "h.partial").exists()


def test_the_driver_counts_only_runs_it_finds_in_the_storage_as_reported(tmp_path, monkeypatch):
    # claim: a run a task reports written but that the driver does not see (another disk) or
    # sees with other files fails its batch, naming the node and a missing path
    from condlab.sweeps import _ray as _sweep_ray
    from condlab.sweeps._run import BatchDone

    monkeypatch.setattr(_sweep_ray, "VERIFY_WAITS", ())
    storage = LocalStorage(tmp_path)
    storage.put_run("seen", {"meta.json": b"{}"})
    ok = BatchDone("b", {"seen": {}}, files={"seen": {"meta.json": 2}})
    assert _sweep_ray._unverified(storage, ok) == []
    files = {"seen": {"meta.json": 2}, "gone": {"meta.json": 2}}
    lost = BatchDone("b", {"seen": {}, "gone": {}}, files=files)
    assert _sweep_ray._unverified(storage, lost) == ["gone"]
    other = BatchDone("b", {"seen": {}}, files={"seen": {"meta.json": 3}})
    assert _sweep_ray._unverified(storage, other) == ["seen"]


def test_cpus_per_batch_follow_the_step_work_and_gpu_batches_ask_for_a_gpu():
    from condlab.sweeps._plan import make_plan
    from condlab.sweeps._ray import STEP_WORK, task_resources
    from condlab.sweeps._run import step_work
    from condlab.sweeps._sweep import _batches

    spec = dict(SMALL, grid={"model.width": [8, 100_000]})
    small, wide = _batches(make_plan(spec), set())
    assert step_work(wide.config, 2) > 4 * STEP_WORK  # 2 runs x n samples x 3e5 parameters
    assert task_resources(small, largest=16) == (1, 0)
    assert task_resources(wide, largest=64) == (-(-step_work(wide.config, 2) // STEP_WORK), 0)
    assert task_resources(wide, largest=2) == (2, 0)          # never more than a node has
    assert task_resources(wide, largest=16, cpus_per_batch=3) == (3, 0)
    cuda = _batches(make_plan(dict(spec, set={**SMALL["set"], "train.device": "cuda"})), set())[1]
    assert task_resources(cuda, largest=16) == (1, 1)


def _listener(answer: bytes | None):
    """A socket on 127.0.0.1 that accepts and sends `answer` (None: never answers)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve():
        conn, _ = server.accept()
        with conn:
            conn.recv(64)
            if answer is not None:
                conn.sendall(answer)
            time.sleep(3)

    threading.Thread(target=serve, daemon=True).start()
    return server


def test_the_address_probe_refuses_a_closed_port_a_silent_one_and_a_non_grpc_one_fast():
    from condlab.sweeps._ray_connect import probe, split_address

    assert split_address("10.0.0.5") == ("10.0.0.5", 6379)
    assert split_address("ray://head:10001") == ("head", 10001) and split_address("auto") is None
    assert split_address("[::1]:7000") == ("::1", 7000)
    with pytest.raises(ConfigError, match="'head:port' is not accepted"):
        split_address("head:port")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    cases = [(f"127.0.0.1:{port}", "Connection refused"),
             (None, "no answer within 1 s"),
             (b"HTTP/1.1 400 Bad Request\r\n\r\n", "something answers there, but not a Ray head")]
    for target, expected in cases:
        server = None if isinstance(target, str) else _listener(target)
        address = target if server is None else f"127.0.0.1:{server.getsockname()[1]}"
        start = time.perf_counter()
        with pytest.raises(ConfigError) as err:
            probe(address, seconds=2)
        assert time.perf_counter() - start < 2.5
        assert str(err.value).startswith(f"cannot reach the Ray cluster at --address {address}: {expected}")
        if server is not None:
            server.close()
    grpc = _listener(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # an HTTP/2 SETTINGS frame: a gRPC server
    probe(f"127.0.0.1:{grpc.getsockname()[1]}", seconds=2)
    grpc.close()


def test_a_ray_auth_token_at_hand_is_sent_unless_ray_auth_mode_says_otherwise(tmp_path, monkeypatch):
    from condlab.sweeps import _ray_connect as connect

    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert not connect.use_token_if_any() and "RAY_AUTH_MODE" not in connect.os.environ
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("abc")  # left by a local ray.init()
    assert connect.use_token_if_any() and connect.os.environ["RAY_AUTH_MODE"] == "token"
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert not connect.use_token_if_any()
    message = str(connect.init_failure("h:1", ConnectionError("Failed to connect"), token=False))
    assert message.startswith("cannot reach the Ray cluster at h:1: Failed to connect")
    assert "RAY_AUTH_TOKEN" in message


def test_run_meta_and_table_name_the_host_that_trained_each_run(tmp_path):
    result = condlab.sweep(SMALL, out=tmp_path, progress=False)
    assert result.columns[-3:] == ["host", "node", "error"]
    host = socket.gethostname()
    assert {r["host"] for r in result.rows} == {host} and {r["node"] for r in result.rows} == {None}
    run = next((tmp_path / "runs").iterdir())
    assert json.loads((run / "meta.json").read_text())["sweep"]["trained_on"] == {"host": host, "node": None}
    shutil.rmtree(tmp_path / "runs" / result.rows[0]["run"])
    again = condlab.sweep(SMALL, out=tmp_path, progress=False)  # the rows read back from meta.json
    assert [r["host"] for r in again.rows] == [host] * 4


def test_a_second_sweep_on_one_object_store_uri_is_refused_naming_the_uri(tmp_path, monkeypatch):
    import condlab.records._lock as lock

    pytest.importorskip("pyarrow")
    monkeypatch.setattr(lock, "GRACE_SECONDS", 0.1)
    store = _arrow(tmp_path)
    with store.lock():
        with pytest.raises(ConfigError, match=rf"^--out '{store.uri}' is in use by another sweep \(pid"):
            with _arrow(tmp_path).lock():
                pass
    with store.lock():  # released
        pass


def test_the_code_fingerprint_covers_all_of_condlab_and_changes_with_any_file(tmp_path):
    # the Ray executor refuses a node whose fingerprint differs from the driver's
    copy = tmp_path / "condlab"
    shutil.copytree(Path(condlab.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    ask = [sys.executable, "-c",
           "from condlab.sweeps._ray_node import code_fingerprint; print(code_fingerprint())"]
    same = subprocess.run(ask, capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path)}, check=True)
    from condlab.sweeps._ray_node import code_fingerprint

    assert same.stdout.strip() == code_fingerprint()
    with open(copy / "_version.py", "a") as fh:  # a file outside sweeps/
        fh.write("# a local change\n")
    other = subprocess.run(ask, capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path)}, check=True)
    assert other.stdout.strip() != code_fingerprint()


def test_an_object_store_prefix_follows_the_one_output_folder_rule(tmp_path):
    # claim: as for a local folder, a prefix holding a sweep of another spec is refused naming
    # --overwrite (nothing written), with --overwrite its spec is kept as spec-<time>.yaml; a
    # prefix holding files condlab did not write, or a phase diagram, is never used
    pytest.importorskip("pyarrow")
    store = tmp_path / "store"
    first = {**SMALL, "grid": {"model.width": [8]}, "seeds": {"init": 1}}
    condlab.sweep(first, out=_arrow(store), progress=False)
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    other = {**SMALL, "grid": {"model.width": [8, 12]}, "seeds": {"init": 1}}
    with pytest.raises(ConfigError, match=rf"^--out 'arrow:{store}' already holds results of a sweep with "
                                          r"other settings \(spec.yaml: grid\): .*--overwrite to replace it"):
        condlab.sweep(other, out=_arrow(store), progress=False)
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before
    done = condlab.sweep(other, out=_arrow(store), progress=False, overwrite=True)
    assert (done.trained, done.skipped) == (1, 1)  # the run of the same settings is reused
    assert len(list(store.glob("spec-*.yaml"))) == 1
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("a user's file")
    with pytest.raises(ConfigError, match=r"already holds other files, not a sweep: choose another prefix"):
        condlab.sweep(other, out=_arrow(tmp_path / "notes"), progress=False, overwrite=True)
    (tmp_path / "diagram").mkdir()
    (tmp_path / "diagram" / "spec.yaml").write_text("task: phase-diagram\n")
    with pytest.raises(ConfigError, match=r"already holds a phase diagram result, not a sweep"):
        condlab.sweep(other, out=_arrow(tmp_path / "diagram"), progress=False)
    assert (tmp_path / "notes" / "mine.txt").read_text() == "a user's file"
