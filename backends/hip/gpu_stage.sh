#!/bin/bash
# Stages the HIP backend's GPU session (run here, on the build machine): builds the plugin, the CUDA
# plugin it delegates to, htam-eval with its worker and the GPU test, and copies them, stripped,
# into build-hip/gpu-stage (git-ignored) — carry that path to the GPU machine and run
# backends/hip/gpu_run.sh there (docs/backends-hip.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${HTAM_HIP_BUILD:-build-hip}
cmake --build "$B" --target htam_backend_hip htam_backend_cuda htam-eval htam-eval-worker \
  hip_on_nvidia_gpu_test -j2
S=$B/gpu-stage
rm -rf "$S" && mkdir -p "$S"
cp "$B/backends/hip/libhtam_backend_hip.so" "$B/backends/cuda/libhtam_backend_cuda.so" \
   "$B/tools/eval/htam-eval" "$B/daemon/eval/htam-eval-worker" \
   "$B/tests/gpu/hip_on_nvidia_gpu_test" "$S/"
strip --strip-debug "$S"/*
echo "$(readlink -f "$B")" > "$S/build_dir"
du -sh "$S"
