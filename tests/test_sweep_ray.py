"""The Ray executor on a REAL two-node Ray cluster, kept on loopback (docs/sweeps.md, "Running on
a cluster").

Ray binds to the machine's network address even when told 127.0.0.1 (and probes 8.8.8.8 to
find it), so every process of these tests (the two Ray nodes, an S3 server, the sweeps) runs
inside one network and PID namespace (``unshare -n -p -f --mount-proc``, needs root): its only
interface is ``lo``, nothing can leave the machine, and killing the namespace's first process
ends every process in it. The cluster is started once for the module (Ray takes 10-30 s a node
on 2 cores); each test runs its commands inside the namespace with ``nsenter``.

The head has no CPUs for tasks (the driver and condlab's node checks run there); the worker
node, with one CPU, trains every batch. It is a machine of its own as far as condlab is
concerned: it runs in its own mount namespace, where a private tmpfs lies over ``WORK/out``
(what it writes there the driver never sees: "separate disks") and empty folders lie over
condlab's source folders (it has no condlab: the executor ships its own, runtime_env
py_modules). ``WORK/shared`` is seen by both nodes. The cluster requires Ray's
auth token (left in ~/.ray by a local ``ray.init()``), which condlab must send unasked. An
S3-compatible server (moto, in server mode) listens on 127.0.0.1 inside the namespace.
Slow: ``make test-slow``; CI runs this file explicitly with CONDLAB_REQUIRE_RAY_TEST=1.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import condlab

pytestmark = pytest.mark.slow

SPEC = """\
name: raytest
base: fig5
set: {train.epochs: 60, train.snapshots: "every:20", train.dtype: float64}
grid:
  model.width: [8, 12, 16]
seeds: {init: 2}
"""
FAILING = SPEC + """\
list:   # the mnist batches fail when they load their (missing) files: the others must be kept
  - {data.source: synthetic}
  - {data.source: mnist, data.d: 784, model.d_out: 10, data.data_dir: DATA_DIR}
"""
ADDRESS = "127.0.0.1:6379"
S3 = "127.0.0.1:5555"

CLUSTER = """\
set -u
ip link set lo up
# a Ray auth token in ~/.ray, as one local ray.init() leaves it: `ray start` then turns token
# authentication on for the whole cluster, and a driver must send the token
mkdir -p "$HOME/.ray" && printf %s "$TOKEN" > "$HOME/.ray/auth_token"
"$PY" -m moto.server -H 127.0.0.1 -p 5555 > "$WORK/moto.log" 2>&1 &
# the head trains nothing (no CPUs for tasks, as on many clusters): every batch goes to the worker
"$RAY" start --head --node-ip-address=127.0.0.1 --port=6379 --num-cpus=0 --temp-dir="$HEAD_TMP" \\
    --include-dashboard=false --disable-usage-stats > "$WORK/head.log" 2>&1 || exit 90
# the worker node: its own disk under WORK/out and no condlab (its source folders hidden)
unshare -m bash -c '
    mount -t tmpfs tmpfs "$WORK/out" || exit 1
    for d in $HIDE; do mount --bind "$WORK/empty" "$d" || exit 1; done
    env -u PYTHONPATH "$PY" -c "import condlab" 2> /dev/null && touch "$WORK/worker-has-condlab"
    exec env -u PYTHONPATH RAY_AUTH_MODE=token "$RAY" start --address=127.0.0.1:6379 \\
        --node-ip-address=127.0.0.1 --num-cpus=1 --temp-dir="$WORKER_TMP" --disable-usage-stats' \\
    > "$WORK/worker.log" 2>&1 || exit 91
RAY_AUTH_MODE=token "$PY" - <<'EOF' || exit 92
import json, os, time, ray
ray.init(address="127.0.0.1:6379", logging_level="ERROR")
while len([n for n in ray.nodes() if n["Alive"]]) < 2:
    time.sleep(0.2)
nodes = [{"id": n["NodeID"], "head": "node:__internal_head__" in n["Resources"],
          "ip": n["NodeManagerAddress"]} for n in ray.nodes() if n["Alive"]]
json.dump(nodes, open(os.environ["WORK"] + "/nodes.json", "w"))
EOF
ip -o link | cut -d: -f2 | tr -d " " > "$WORK/links.txt"
touch "$WORK/ready"
exec sleep infinity
"""


def _skip_reason() -> str | None:
    for module in ("ray", "moto", "pyarrow"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (CI: ray[default]==2.60.0, moto[server]==5.2.5)"
    for tool in ("unshare", "nsenter", "ip", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} (util-linux, iproute2) is not available"
    probe = subprocess.run(["unshare", "-n", "-p", "-f", "--mount-proc", "unshare", "-m", "true"],
                           capture_output=True)
    if probe.returncode != 0:
        return ("network/PID/mount namespaces are not permitted here (unshare needs root): a real "
                "Ray cluster cannot be kept on loopback")
    return None


def _condlab_sources() -> list[str]:
    """The folders a node imports condlab from: this test's, and the installed one (if another)."""
    mine = str(Path(condlab.__file__).parents[1])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", "import condlab, os; print(os.path.dirname("
                           "os.path.dirname(condlab.__file__)))"], capture_output=True, text=True, env=env)
    installed = proc.stdout.strip() if proc.returncode == 0 else ""
    return [mine] + ([installed] if installed and installed != mine else [])


class Cluster:
    """The namespace holding the two Ray nodes and the S3 server; run() runs bash inside it."""

    def __init__(self, work: Path):
        self.work = work
        tag = secrets.token_hex(3)  # Ray's socket paths must stay short: its temp dirs in /tmp
        self.temps = [f"/tmp/crh-{tag}", f"/tmp/crw-{tag}"]
        for name in ("out", "shared", "empty", "home", "tmp"):
            (work / name).mkdir()
        self.env = dict(os.environ, WORK=str(work), PY=sys.executable, OMP_NUM_THREADS="1",
                        RAY=str(Path(sys.executable).parent / "ray"), HOME=str(work / "home"),
                        PYTHONPATH=str(Path(condlab.__file__).parents[1]), HIDE=" ".join(_condlab_sources()),
                        HEAD_TMP=self.temps[0], WORKER_TMP=self.temps[1], RAY_USAGE_STATS_ENABLED="0",
                        TOKEN=secrets.token_hex(16), TMPDIR=str(work / "tmp"),
                        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                        AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
        for name in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
            self.env.pop(name, None)
        self.proc = subprocess.Popen(["unshare", "-n", "-p", "-f", "--mount-proc", "bash", "-c", CLUSTER],
                                     env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_ready(self, seconds: float = 300) -> None:
        deadline = time.monotonic() + seconds
        while not (self.work / "ready").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                logs = "".join(f"\n--- {n}:\n" + (self.work / n).read_text()[-1500:]
                               for n in ("head.log", "worker.log") if (self.work / n).exists())
                raise AssertionError(f"the Ray cluster did not start (exit {self.proc.poll()}){logs}")
            time.sleep(0.2)
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        self.init = int(children[0])  # the namespace's first process (its PID 1)
        self.nodes = json.loads((self.work / "nodes.json").read_text())

    def run(self, script: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(["nsenter", "-t", str(self.init), "-n", "-p", "-m", "bash", "-c", script],
                              env={**self.env, **env}, capture_output=True, text=True, timeout=timeout)

    def node(self, head: bool) -> str:
        return next(n["id"] for n in self.nodes if n["head"] == head)

    def stop(self) -> None:
        if getattr(self, "init", None):
            os.kill(self.init, signal.SIGKILL)  # every process of the namespace ends with it
        self.proc.kill()
        self.proc.wait()
        for path in self.temps:
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = _skip_reason()
    if reason and os.environ.get("CONDLAB_REQUIRE_RAY_TEST"):
        pytest.fail(reason)  # CI: these tests must run
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("ray")
    (work / "spec.yaml").write_text(SPEC)
    (work / "failing.yaml").write_text(FAILING.replace("DATA_DIR", str(work / "no-data")))
    start = time.perf_counter()
    cluster = Cluster(work)
    try:
        cluster.wait_ready()
        print(f"cluster up in {time.perf_counter() - start:.1f} s")
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def local_table(cluster):
    """The in-process (local executor) table of SPEC: what every Ray table must equal."""
    condlab.sweep(cluster.work / "spec.yaml", out=cluster.work / "local", progress=False)
    return _table(cluster.work / "local" / "results.csv")


def _table(path: Path):
    pd = pytest.importorskip("pandas")
    return pd.read_csv(path)


def _same_table(got, want) -> None:
    """Same runs, statuses and numbers (to 1e-9) as the local executor's; host, node and error
    say where and why, not what."""
    assert list(got["run"]) == list(want["run"]) and list(got["status"]) == list(want["status"])
    for column in want.columns:
        if column in ("error", "host", "node"):
            continue
        a, b = got[column].to_numpy(), want[column].to_numpy()
        if a.dtype.kind == "f":
            assert np.allclose(a, b, rtol=1e-9, atol=0, equal_nan=True), column
        else:
            assert got[column].equals(want[column]), column


def _errors(stderr: str) -> list[str]:
    """condlab's lines on stderr (Ray's own C++ warnings, e.g. that 8.8.8.8 is unreachable from
    the namespace, come before them)."""
    return [line for line in stderr.splitlines() if line.startswith("condlab:")]


def _sweep(out: str, *flags: str) -> str:
    return (f'"$PY" -m condlab sweep "$WORK/spec.yaml" --executor ray --address {ADDRESS} '
            f'--out "{out}" --no-progress {" ".join(flags)}')


def test_the_cluster_is_two_nodes_on_loopback_and_the_worker_has_no_condlab(cluster):
    assert (cluster.work / "links.txt").read_text().split() == ["lo"]
    assert len(cluster.nodes) == 2 and {n["ip"] for n in cluster.nodes} == {"127.0.0.1"}
    assert not (cluster.work / "worker-has-condlab").exists()


def test_a_head_that_requires_a_token_gets_the_one_at_hand_and_its_absence_is_one_line(cluster):
    # every other test connects to this token-authenticated cluster with RAY_AUTH_MODE unset
    # (Ray itself sends no token to an explicit --address): condlab sends ~/.ray/auth_token
    assert "Token authentication is enabled" in (cluster.work / "head.log").read_text()
    (cluster.work / "no-token").mkdir()
    proc = cluster.run(_sweep("$WORK/shared/no-token"), timeout=120, HOME=str(cluster.work / "no-token"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = _errors(proc.stderr)
    assert len(lines) == 1 and f"cannot reach the Ray cluster at {ADDRESS}" in lines[0], proc.stderr
    assert "RAY_AUTH_TOKEN" in lines[0] and "ray get-auth-token" in lines[0], lines
    assert not (cluster.work / "shared" / "no-token").exists()


def test_an_unreachable_address_fails_within_10_s_naming_it_and_writes_nothing(cluster):
    # 6390: nothing listens; 6391: something accepts connections and never answers (the hang
    # that was reported ran 537 s before it was stopped)
    cluster.run("\"$PY\" -c 'import socket, time; s = socket.socket(); "
                "s.bind((\"127.0.0.1\", 6391)); s.listen(); time.sleep(300)' > /dev/null 2>&1 &")
    time.sleep(1)
    for address in ("127.0.0.1:6390", "127.0.0.1:6391"):
        start = time.perf_counter()
        proc = cluster.run(_sweep("$WORK/shared/wrong").replace(ADDRESS, address), timeout=60)
        seconds = time.perf_counter() - start
        assert proc.returncode == 2, proc.stdout + proc.stderr
        lines = _errors(proc.stderr)
        assert len(lines) == 1 and f"cannot reach the Ray cluster at --address {address}" in lines[0], lines
        assert seconds <= 10, f"{address}: {seconds:.1f} s"
        print(f"{address}: refused in {seconds:.1f} s: {lines[0]}")
    assert not (cluster.work / "shared" / "wrong").exists()


def test_a_node_that_does_not_see_the_output_is_refused_before_anything_is_written(cluster):
    out = cluster.work / "out" / "refused"  # the worker writes its own tmpfs there
    proc = cluster.run(_sweep(str(out)), timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = _errors(proc.stderr)
    assert len(lines) == 1 and "does not see the sweep's output" in lines[0], proc.stderr
    assert f"node {cluster.node(head=False)[:12]}" in lines[0] and str(out / ".storage-check-") in lines[0]
    assert f"node {cluster.node(head=True)[:12]}" not in lines[0]
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # no spec, plan, runs, nor the marker


def test_gpu_batches_and_too_many_cpus_are_refused_clearly(cluster):
    spec = cluster.work / "cuda.yaml"
    spec.write_text(SPEC.replace("train.dtype: float64", "train.dtype: float64, train.device: cuda"))
    proc = cluster.run(_sweep("$WORK/shared/cuda").replace("$WORK/spec.yaml", str(spec)), timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = "".join(_errors(proc.stderr))
    assert "3 batch(es) have train.device: cuda but the Ray cluster at 127.0.0.1:6379 has no GPU" in line
    assert "(1 CPU)" in line and len(_errors(proc.stderr)) == 1
    proc = cluster.run(_sweep("$WORK/shared/cpus", "--cpus-per-batch 3"), timeout=120)
    assert proc.returncode == 2 and "--cpus-per-batch=3 is more than any node has (the largest has 1 CPUs)" \
        in proc.stderr, proc.stderr


def test_runs_come_back_through_the_object_store_from_a_node_without_condlab(cluster, local_table):
    # claim: with --return-runs the worker's runs (written to its own disk, trained with the
    # code condlab shipped to it) reach the driver's --out, which equals the local table;
    # the bar counts runs across the cluster; meta.json and the table name each run's node
    out = cluster.work / "out" / "returned"
    script = (f"import condlab; r = condlab.sweep('$WORK/spec.yaml', out='{out}', executor='ray', "
              f"address='{ADDRESS}', return_runs=True, progress=True); print(r.summary())")
    start = time.perf_counter()
    proc = cluster.run(f'"$PY" -c "{script}"', timeout=400)
    print(f"--return-runs sweep: {time.perf_counter() - start:.1f} s")
    assert proc.returncode == 0 and "trained 6, skipped 0" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert "runs 6/6" in proc.stderr and "100%" in proc.stderr, proc.stderr[-2000:]
    table = _table(out / "results.csv")
    _same_table(table, local_table)
    assert set(table["node"]) == {cluster.node(head=False)}  # the worker trained every run
    for run, node, host in zip(table["run"], table["node"], table["host"], strict=True):
        meta = json.loads((out / "runs" / run / "meta.json").read_text())
        assert meta["sweep"]["trained_on"]["node"] == node and meta["sweep"]["trained_on"]["host"] == host


S3_DRIVER = """\
import json, os, subprocess, sys, time
import pyarrow.fs as pafs
import condlab

work = os.environ["WORK"]
uri = "s3://sweeps/ray?endpoint_override=http://%(s3)s&region=us-east-1"
fs, base = pafs.FileSystem.from_uri(uri + "&allow_bucket_creation=true")
fs.create_dir("sweeps")
cmd = [sys.executable, "-m", "condlab", "sweep", work + "/spec.yaml", "--executor", "ray", "--address",
       "%(address)s", "--out", uri, "--no-progress"]

def metas():
    files = fs.get_file_info(pafs.FileSelector(base + "/runs", allow_not_found=True, recursive=True))
    return [f.path for f in files if f.base_name == "meta.json"]

first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
while not metas() and first.poll() is None:
    time.sleep(0.1)
first.kill()  # SIGKILL once the first runs are in the store, while other batches still train
first.wait()
at_kill = len(metas())
again = subprocess.run(cmd, capture_output=True, text=True)
runs = fs.get_file_info(pafs.FileSelector(base + "/runs", recursive=False))
open(work + "/s3-results.csv", "wb").write(fs.open_input_stream(base + "/results.csv").readall())
local = condlab.sweep(work + "/spec.yaml", out=uri.replace("/ray?", "/local?"), progress=False)
open(work + "/s3-local-results.csv", "wb").write(
    fs.open_input_stream(base.replace("/ray", "/local") + "/results.csv").readall())
json.dump({"first_rc": first.returncode, "at_kill": at_kill, "rc": again.returncode,
           "out": again.stdout, "err": again.stderr[-3000:], "folders": len(runs), "metas": len(metas()),
           "local": local.summary(), "marker_left": [f.path for f in fs.get_file_info(
               pafs.FileSelector(base, recursive=False)) if ".storage-check" in f.path]},
          open(work + "/s3.json", "w"))
"""


def test_an_object_store_sweep_killed_and_resumed_gives_the_local_table(cluster, local_table):
    # claim: the worker writes its runs to S3 (moto on 127.0.0.1), meta.json last; a driver
    # killed with SIGKILL mid-sweep leaves only whole runs counted, the resumed sweep trains
    # exactly the rest, and the table equals the local executor's (as does the table of the
    # local executor writing to the same store)
    start = time.perf_counter()
    proc = cluster.run(f'"$PY" - <<\'EOF\'\n{S3_DRIVER % {"s3": S3, "address": ADDRESS}}\nEOF', timeout=500)
    print(f"S3 sweep, kill and resume: {time.perf_counter() - start:.1f} s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads((cluster.work / "s3.json").read_text())
    assert got["first_rc"] == -signal.SIGKILL and 1 <= got["at_kill"] < 6, got
    assert got["rc"] == 0, got
    skipped = int(got["out"].split("skipped ")[1].split()[0])
    trained = int(got["out"].split("trained ")[1].split(",")[0])
    assert skipped >= got["at_kill"] and trained == 6 - skipped and trained >= 1, got["out"]
    assert got["folders"] == got["metas"] == 6 and got["marker_left"] == [], got
    assert "trained 6" in got["local"]
    _same_table(_table(cluster.work / "s3-results.csv"), local_table)
    _same_table(_table(cluster.work / "s3-local-results.csv"), local_table)


def test_other_condlab_code_on_the_nodes_is_refused_when_condlab_does_not_ship_its_own(cluster):
    copy = cluster.work / "copy"
    shutil.copytree(Path(condlab.__file__).parent, copy / "condlab",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "condlab" / "_version.py", "a") as fh:
        fh.write("# a local change\n")
    script = ("import condlab; from condlab.sweeps import RayExecutor; "
              f"condlab.sweep('$WORK/spec.yaml', out='$WORK/shared/copy', "
              f"executor=RayExecutor('{ADDRESS}', ship_code=False), progress=False)")
    proc = cluster.run(f'"$PY" -c "{script}"', timeout=120, PYTHONPATH=str(copy))
    assert proc.returncode != 0
    message = proc.stderr.strip().splitlines()[-1]
    assert f"node {cluster.node(head=True)[:12]}" in message and "runs other condlab code" in message, message
    assert f"node {cluster.node(head=False)[:12]}" in message and "cannot run condlab" in message, message
    assert not (cluster.work / "shared" / "copy" / "plan.json").exists()


KILLER = """\
"$PY" -m condlab sweep "$WORK/failing.yaml" --executor ray --address 127.0.0.1:6379 \\
    --out "$WORK/shared/killed" --no-progress > "$WORK/killed.out" 2> "$WORK/killed.err" &
sweep=$!
# kill -9 the first worker seen running a batch: Ray must retry that task, and lose nothing
for _ in $(seq 1 2400); do
    victim=$(pgrep -f "^ray::batch_task" | head -n 1)
    if [ -n "$victim" ]; then kill -9 "$victim" && echo "$victim" > "$WORK/killed.txt"; break; fi
    sleep 0.05
done
wait $sweep
echo $? > "$WORK/killed.rc"
"""


def test_a_killed_worker_is_retried_and_failing_batches_keep_the_others(cluster):
    proc = cluster.run(KILLER, timeout=400)
    out, err = (cluster.work / "killed.out").read_text(), (cluster.work / "killed.err").read_text()
    assert (cluster.work / "killed.txt").is_file(), "no Ray worker was seen running a batch"
    assert int((cluster.work / "killed.rc").read_text()) == 3, out + err + proc.stderr  # EXIT_DIVERGED
    assert "trained 6, skipped 0 already done, failed 6" in out, out + err
    local = condlab.sweep(cluster.work / "failing.yaml", out=cluster.work / "local-failing", progress=False)
    assert (local.trained, local.failed) == (6, 6)
    table = _table(cluster.work / "shared" / "killed" / "results.csv")
    _same_table(table, _table(cluster.work / "local-failing" / "results.csv"))
    assert list(table["status"]) == (["complete"] * 2 + ["failed"] * 2) * 3
