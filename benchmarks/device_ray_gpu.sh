#!/usr/bin/env bash
# A `train.device: cuda` sweep through `--executor ray` on a one-GPU machine: does each batch
# land on the GPU, and what does it cost? Installs nothing and needs no network: it uses the
# Python environment given as $PY (default .venv/bin/python, else python3) with torch (CUDA),
# ray[default], pandas and condlab's dependencies, and this tree's src/ (PYTHONPATH). It starts
# a Ray head on 127.0.0.1 (inside a loopback-only network namespace when `unshare -n` is
# permitted) with one GPU, runs the sweep twice (the first compiles the line counter), then the
# same spec with the local executor on the same GPU, and prints the cluster's resources, per run
# the node, host, device and threads that trained it, the times, and the largest difference
# between the two tables. Everything goes to $OUT (default ./device-ray-gpu). From the repo root:
#
#   bash benchmarks/device_ray_gpu.sh        # a few minutes: Ray's start-up, the first compile
#   DEVICE=cpu WIDTHS=8,16 EPOCHS=100 bash benchmarks/device_ray_gpu.sh   # the scaffolding, no GPU
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
RAY="$(dirname "$PY")/ray"
[ -x "$RAY" ] || RAY=$(command -v ray || true)
[ -n "$RAY" ] || { echo "no ray command next to $PY: install ray[default] in that environment"; exit 2; }
DEVICE=${DEVICE:-cuda}
WIDTHS=${WIDTHS:-1000, 10000, 100000}
EPOCHS=${EPOCHS:-300}
OUT=${OUT:-$PWD/device-ray-gpu}
mkdir -p "$OUT/home"
if [ "$DEVICE" = cuda ]; then
    "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else "no CUDA device here")'
fi
export PY RAY OUT DEVICE PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" RAY_USAGE_STATS_ENABLED=0
export HOME="$OUT/home" RAY_TMP="/tmp/crg-$$"   # a fresh HOME: no Ray token left by other sessions

cat > "$OUT/spec.yaml" <<EOF
name: gpu
base: fig5
set: {train.epochs: $EPOCHS, train.snapshots: "every:100", train.device: $DEVICE}
grid: {model.width: [$WIDTHS]}
seeds: {init: 2}
EOF

cat > "$OUT/report.py" <<'EOF'
"""Per run: where it trained; then Ray's table against the local executor's."""
import json
import sys
from pathlib import Path

import pandas as pd

out = Path(sys.argv[1])
ray, local = pd.read_csv(out / "ray-again" / "results.csv"), pd.read_csv(out / "local" / "results.csv")
for _, row in ray.iterrows():
    meta = json.loads((out / "ray-again" / "runs" / row["run"] / "meta.json").read_text())
    where = meta["sweep"]["trained_on"]
    print(f"width {row['model.width']:>6} seed {row['seed']}: node {str(where['node'])[:12]} "
          f"host {where['host']} device {where.get('device', 'cpu')} threads {where.get('threads')} "
          f"final_loss {row['final_loss']:.6g}")
assert list(ray["run"]) == list(local["run"]), "the two tables list other runs"
rel = ((ray["final_loss"] - local["final_loss"]).abs() / local["final_loss"].abs()).max()
print(f"largest relative final_loss difference, Ray vs local executor (same device): {rel:.3g}")
lines = [c for c in ray.columns if c.endswith("_lines") or c.endswith("_lines_final")]
print("line counts equal:", all((ray[c] == local[c]).all() for c in lines))
EOF

cat > "$OUT/run.sh" <<'EOF'
set -euo pipefail
ip link set lo up 2> /dev/null || true
trap '"$RAY" stop --force > /dev/null 2>&1 || true; rm -rf "$RAY_TMP"' EXIT
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
t=$(date +%s%N)
"$RAY" start --head --node-ip-address=127.0.0.1 --port=6379 --num-gpus=1 --temp-dir="$RAY_TMP" \
    --include-dashboard=false --disable-usage-stats > "$OUT/ray-start.log" 2>&1 \
    || { tail -20 "$OUT/ray-start.log"; exit 1; }
echo "ray head up in $(ms "$t") ms"
"$PY" -c 'import ray; ray.init(address="127.0.0.1:6379", logging_level="ERROR"); print("cluster:", ray.cluster_resources())'
for round in first again; do   # again: the line counter compiled, Ray's workers warm
    rm -rf "$OUT/ray-$round"
    t=$(date +%s%N)
    "$PY" -m condlab sweep "$OUT/spec.yaml" --executor ray --address 127.0.0.1:6379 \
        --out "$OUT/ray-$round" --no-progress
    echo "ray sweep ($round): $(ms "$t") ms wall"
done
rm -rf "$OUT/local"
t=$(date +%s%N)
"$PY" -m condlab sweep "$OUT/spec.yaml" --out "$OUT/local" --no-progress
echo "local executor sweep, same device: $(ms "$t") ms wall"
"$PY" "$OUT/report.py" "$OUT"
EOF

if unshare -n true 2> /dev/null; then
    echo "running inside a loopback-only network namespace"
    unshare -n bash "$OUT/run.sh" 2>&1 | tee "$OUT/log.txt"
else
    echo "unshare -n is not permitted: running on 127.0.0.1 in this machine's namespace"
    bash "$OUT/run.sh" 2>&1 | tee "$OUT/log.txt"
fi
