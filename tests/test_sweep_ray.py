"""The Ray executor against a REAL local Ray head, kept on loopback.

Ray binds to the machine's network address even when told 127.0.0.1 (and probes 8.8.8.8 to
find it), so the head, its workers and the sweep all run inside new network and PID
namespaces (``unshare -n -p -f --mount-proc``, needs root): the only interface there is
``lo``, nothing can leave the machine, and ``ray stop`` sees (and stops) only this test's
Ray processes; when the namespace's first process exits, every process in it ends.
One worker is killed (SIGKILL) while it runs a batch: Ray retries that task, and the table
must still equal the in-process one. Slow (a Ray head takes 10-30 s to start on 2 cores):
``make test-slow``; CI runs it explicitly.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
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
list:   # the mnist batches fail when they load their (missing) files: the others must be kept
  - {data.source: synthetic}
  - {data.source: mnist, data.d: 784, model.d_out: 10, data.data_dir: DATA_DIR}
seeds: {init: 2}
"""

SCRIPT = """\
set -u
ip link set lo up
export RAY_USAGE_STATS_ENABLED=0
"$RAY" start --head --node-ip-address=127.0.0.1 --port=6379 --num-cpus=2 \\
    --include-dashboard=false --disable-usage-stats > "$WORK/ray-start.log" 2>&1 || exit 90
"$PY" -m condlab sweep "$WORK/spec.yaml" --executor ray --address 127.0.0.1:6379 \\
    --out "$WORK/ray" --no-progress > "$WORK/sweep.out" 2> "$WORK/sweep.err" &
sweep=$!
# kill -9 the first worker seen running a batch (this PID namespace holds only this test's
# processes): Ray must retry that task on another worker, and no result may be lost
for _ in $(seq 1 1200); do
    victim=$(pgrep -f "^ray::_ray_task" | head -n 1)
    if [ -n "$victim" ]; then kill -9 "$victim" && echo "$victim" > "$WORK/killed.txt"; break; fi
    sleep 0.05
done
wait $sweep
echo $? > "$WORK/sweep.rc"
"$PY" -c 'import json, ray; ray.init(address="127.0.0.1:6379", logging_level="ERROR"); \\
json.dump([n["NodeManagerAddress"] for n in ray.nodes()], open("'"$WORK"'/nodes.json", "w"))'
ip -o link | cut -d: -f2 | tr -d " " > "$WORK/links.txt"
"$RAY" stop > /dev/null 2>&1
"""


def _skip_reason() -> str | None:
    if importlib.util.find_spec("ray") is None:
        return "ray is not installed (pip install 'condlab[ray]')"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "unshare (util-linux) or ip (iproute2) is not available"
    probe = subprocess.run(["unshare", "-n", "-p", "-f", "--mount-proc", "true"], capture_output=True)
    if probe.returncode != 0:
        return ("network/PID namespaces are not permitted here (unshare -n -p needs root): "
                "a real Ray head cannot be kept on loopback")
    return None


def test_ray_executor_on_a_loopback_head_gives_the_in_process_table(tmp_path):
    reason = _skip_reason()
    if reason and os.environ.get("CONDLAB_REQUIRE_RAY_TEST"):
        pytest.fail(reason)  # CI: this test must run
    if reason:
        pytest.skip(reason)
    (tmp_path / "spec.yaml").write_text(SPEC.replace("DATA_DIR", str(tmp_path / "no-data")))
    # HOME in tmp_path: Ray keeps per-user state in ~/.ray (an auth token left there by another
    # Ray session makes this head refuse its own workers); the test must not depend on it
    (tmp_path / "home").mkdir()
    env = dict(os.environ, WORK=str(tmp_path), PY=sys.executable, OMP_NUM_THREADS="1",
               HOME=str(tmp_path / "home"), RAY=str(Path(sys.executable).parent / "ray"),
               PYTHONPATH=str(Path(condlab.__file__).parents[1]))
    start = time.perf_counter()
    proc = subprocess.run(["unshare", "-n", "-p", "-f", "--mount-proc", "bash", "-c", SCRIPT],
                          env=env, capture_output=True, text=True, timeout=400)
    seconds = time.perf_counter() - start
    log = (tmp_path / "ray-start.log").read_text() if (tmp_path / "ray-start.log").exists() else ""
    assert proc.returncode == 0, f"ray start failed: {log[-2000:]}{proc.stderr[-2000:]}"
    assert (tmp_path / "links.txt").read_text().split() == ["lo"]
    assert set(json.loads((tmp_path / "nodes.json").read_text())) == {"127.0.0.1"}
    rc = int((tmp_path / "sweep.rc").read_text())
    out, err = (tmp_path / "sweep.out").read_text(), (tmp_path / "sweep.err").read_text()
    assert rc == 3, f"expected the failed mnist batches to give exit 3: {out}{err}"  # EXIT_DIVERGED
    assert "trained 6, skipped 0 already done, failed 6" in out, out + err
    assert (tmp_path / "killed.txt").is_file(), "no Ray worker was seen running a batch"

    local = condlab.sweep(tmp_path / "spec.yaml", out=tmp_path / "local", progress=False)
    assert (local.trained, local.failed) == (6, 6)
    pd = pytest.importorskip("pandas")
    ray_table = pd.read_csv(tmp_path / "ray" / "results.csv")
    local_table = pd.read_csv(tmp_path / "local" / "results.csv")
    assert list(ray_table["run"]) == list(local_table["run"])
    assert list(ray_table["status"]) == list(local_table["status"]) == (["complete"] * 2 + ["failed"] * 2) * 3
    for column in local_table.columns:
        if column == "error":
            continue
        a, b = ray_table[column].to_numpy(), local_table[column].to_numpy()
        if a.dtype.kind == "f":
            assert np.allclose(a, b, rtol=1e-9, atol=0, equal_nan=True), column
        else:
            assert ray_table[column].equals(local_table[column]), column  # NaN equals NaN here
    print(f"ray test: {seconds:.1f} s in the namespace (head start, sweep, checks, stop)")
