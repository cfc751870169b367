#!/bin/bash
# Stages the CUDA backend's GPU-side binaries (stripped) into .gpu-cuda/ for the GPU machine.
set -e
B=${1:-build-cuda}
mkdir -p .gpu-cuda
grep -qx '/.gpu-cuda/' .git/info/exclude 2>/dev/null || echo '/.gpu-cuda/' >> .git/info/exclude
for f in backends/cuda/libhtam_backend_cuda.so tools/eval/htam-eval daemon/eval/htam-eval-worker \
         backends/cuda/cuda_compile_test \
         backends/cuda/cuda_plugin_test backends/cuda/cuda_nvrtc_test tests/gpu/cuda_plugin_gpu_test \
         tests/gpu/cuda_hacks_gpu_test; do
  strip -o .gpu-cuda/$(basename $f) $B/$f
done
du -sh .gpu-cuda
