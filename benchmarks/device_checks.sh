#!/usr/bin/env bash
# The checks that need the GPU machine, in one call (issue 20: timm, Lightning and the Tracker on
# CUDA; issue 24: the batched step against batched autograd on another CPU). Installs nothing:
# it uses that machine's python3 (torch with CUDA, timm, torchvision, transformers, lightning,
# tensorboard) and this tree's src/. Each part has its own time limit; everything is printed and
# kept in $OUT (default ./device-checks). From the repository root:
#
#   bash benchmarks/device_checks.sh        # about 4 minutes
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-checks}
PY=${PY:-python3}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
{
    lscpu | grep -E "Model name|^CPU\(s\)"
    echo "vector ISA flags: $(grep -o -w -E 'avx512f|avx2|fma' /proc/cpuinfo | sort | uniq -c | tr '\n' ' ')"
    "$PY" -c "import sys, torch, numpy; print('python', sys.version.split()[0], 'torch', torch.__version__,
      torch.backends.cpu.get_cpu_capability(), 'numpy', numpy.__version__, 'cuda', torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" 2>&1
    "$PY" -c "import timm, torchvision; print('timm', timm.__version__, 'torchvision', torchvision.__version__)" 2>&1
} | tee "$OUT/machine.txt"
echo "== tests (real models incl. timm, Lightning, Tracker)"
timeout 170 "$PY" -m pytest -q -p no:cacheprovider -rs tests/test_real_models.py tests/test_lightning.py \
    tests/test_tracker.py 2>&1 | tee "$OUT/tests.txt" | tail -25
echo "== bench_tracker.py --device cuda"
timeout 80 "$PY" benchmarks/bench_tracker.py --device cuda --pairs 3 --steps 300 2>&1 | tee "$OUT/tracker_cuda.txt"
echo "== bench_batched.py, R = 64"
timeout 100 "$PY" benchmarks/bench_batched.py --threads 1,2 --repeat 3 --only condlab,autograd 2>&1 \
    | tee "$OUT/batched.txt"
