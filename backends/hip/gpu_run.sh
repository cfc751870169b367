#!/bin/bash
# The HIP backend's GPU session on an NVIDIA machine, in one command (run from the repository root
# there, with build-hip/gpu-stage carried; see gpu_stage.sh): the GPU test (HIP through
# htam/hip_on_cuda.h on the CUDA path, the gate over every reference.hip and the rowsum HIP
# variants), then every task's reference timed on the hip and on the cuda backend for comparison.
# Logs go to $OUT.
set -u
OUT=${OUT:-/tmp/htam-hip-out}
mkdir -p "$OUT"
ROOT=$PWD
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
# The binaries name the plugins, htam-eval and its worker by their build path on the build machine.
B=$(cat build-hip/gpu-stage/build_dir)
if [ ! -e "$B" ]; then mkdir -p "$(dirname "$(dirname "$B")")" && ln -sfn "$ROOT" "$(dirname "$B")" 2>/dev/null; fi
mkdir -p "$B/backends/hip" "$B/backends/cuda" "$B/tests/gpu" "$B/tools/eval" "$B/daemon/eval"
S=$ROOT/build-hip/gpu-stage
cp "$S/libhtam_backend_hip.so" "$B/backends/hip/"
cp "$S/libhtam_backend_cuda.so" "$B/backends/cuda/"
cp "$S/htam-eval" "$B/tools/eval/"
cp "$S/htam-eval-worker" "$B/daemon/eval/"
cp "$S/hip_on_nvidia_gpu_test" "$B/tests/gpu/"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv; nvcc --version | tail -2; } 2>&1 | tee "$OUT/info.txt"
echo "=== hip_on_nvidia_gpu_test"
timeout -s KILL 420 "$B/tests/gpu/hip_on_nvidia_gpu_test" 2>&1 | tee "$OUT/gpu_test.log" |
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|FAILED  \]|Failure|Expected|Which is|^hip on|^rowsum|reference.hip"
echo "=== references: hip vs cuda"
for t in configs/tasks/*/; do
  [ -f "$t/reference.hip" ] || continue
  for be in hip cuda; do
    timeout -s KILL 120 "$B/tools/eval/htam-eval" --backend $be --option hip_platform=nvidia \
      --task "$t" --reference --seeds 1 --reps 50 2>/dev/null | sed "s|^{|{\"backend_run\":\"$be\",\"task_dir\":\"$t\",|"
  done
done | tee "$OUT/references.jsonl" | python3 -c "
import sys, json
for l in sys.stdin:
    j = json.loads(l); print('%-28s %-5s %-6s median %9.2f us  IQR %7.2f' % (j['task_dir'], j['backend_run'], j.get('status'), j.get('median_us', 0), j.get('spread_us', 0)))"
