#!/bin/bash
# Builds (here, on the x86-64 build machine) and stages everything the one GPU session needs into
# .gpu-stage/ (git-ignored through the repository's info/exclude, carried to the GPU machine):
# the CUDA, HIP and CPU plugins (the CPU one for the world's CPU families), htam-eval (and htam-eval-worker, which it runs), htam-bench, htamd,
# htam-worker, htam-world-compile (for `one_run.sh world`), the GPU tests, and libcupti (the GPU machine's toolkit may keep it where the loader does not look). Then checks that the staged
# binaries start here and skip cleanly without a GPU.
#   usage: bash tools/gpu/stage_all.sh [BUILD_DIR]     (default build-gpu; configured if missing)
# Then, on the GPU machine (repository root): bash tools/gpu/one_run.sh   (writes to $OUT)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-${HTAM_GPU_BUILD:-build-gpu}}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/htam-ccache} CCACHE_BASEDIR=${CCACHE_BASEDIR:-/work}
if [ ! -f "$B/CMakeCache.txt" ]; then
  cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHTAM_WITH_CUDA=ON -DHTAM_WITH_HIP=ON > /dev/null
fi
TARGETS="htam_backend_cuda htam_backend_hip htam_backend_cpu htam-eval htam-bench htam_python cuda_plugin_gpu_test
         cuda_hacks_gpu_test cuda_kernelbench_gpu_test cuda_daemon_gpu_test hip_on_nvidia_gpu_test
         htamd htam-worker htam-eval-worker htam-world-compile"
nice -n 5 cmake --build "$B" --target $TARGETS -j2
S=.gpu-stage
rm -rf "$S" && mkdir -p "$S/lib"
EXCL="$(git rev-parse --git-common-dir)/info/exclude"
mkdir -p "$(dirname "$EXCL")"
grep -qx '/.gpu-stage/' "$EXCL" 2>/dev/null || echo '/.gpu-stage/' >> "$EXCL"
for f in backends/cuda/libhtam_backend_cuda.so backends/hip/libhtam_backend_hip.so backends/cpu/libhtam_backend_cpu.so \
         tools/eval/htam-eval tools/bench/htam-bench tests/gpu/cuda_plugin_gpu_test \
         tests/gpu/cuda_hacks_gpu_test tests/gpu/cuda_kernelbench_gpu_test tests/gpu/cuda_daemon_gpu_test \
         tests/gpu/hip_on_nvidia_gpu_test daemon/htamd daemon/eval/worker/htam-worker \
         daemon/eval/htam-eval-worker tools/bench/htam-world-compile; do
  strip -o "$S/$(basename "$f")" "$B/$f"
done
# CUPTI of the toolkit this was built with (the plugin finds it through LD_LIBRARY_PATH there).
CUPTI=$(ldd "$S/libhtam_backend_cuda.so" | awk '/libcudart.so/ {print $3}' | xargs -r dirname)/libcupti.so.13
[ -f "$CUPTI" ] || CUPTI=$(ls /usr/local/cuda/lib64/libcupti.so.13 /usr/local/cuda/lib/libcupti.so.13 \
                             /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13 2>/dev/null | head -1)
if [ -n "$CUPTI" ] && [ -f "$CUPTI" ]; then cp -L "$CUPTI" "$S/lib/"; else echo "note: libcupti.so.13 not found here"; fi
# Shared libraries outside glibc / libstdc++ / the CUDA toolkit that the GPU machine may lack.
for f in "$S"/*; do
  [ -f "$f" ] || continue
  ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $3}' | while read -r l; do
    case "$(basename "$l")" in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
      libcuda.so*|libcudart.so*|libnvrtc*.so*|libcupti.so*|libnvidia-ml.so*) ;;
      *) [ -f "$S/lib/$(basename "$l")" ] || cp -L "$l" "$S/lib/" ;;
    esac
  done
done
# The libraries travel compressed (htam-bench's FAISS brings OpenBLAS: about 50 MiB unpacked);
# tools/gpu/one_run.sh unpacks them into /tmp/htam-gpu-lib.
ls -la "$S/lib"
tar -C "$S/lib" -czf "$S/lib.tar.gz" .
rm -rf "$S/lib"
# The Python SDK as built (with its generated schema modules) and Debian's pure-Python
# flatbuffers, for `one_run.sh worldlive` (pyzmq must be the GPU machine's own: a compiled module).
P=$(mktemp -d)
cp -r "$B/python/htam" "$P/"
cp -r "$(/usr/bin/python3 -c 'import flatbuffers, os; print(os.path.dirname(flatbuffers.__file__))')" "$P/"
tar -C "$P" -czf "$S/py.tar.gz" . && rm -rf "$P"
git rev-parse HEAD > "$S/commit"
du -sh "$S"; ls -la "$S"
SIZE=$(du -sm "$S" | cut -f1)
[ "$SIZE" -le 60 ] || { echo "staged $SIZE MiB: over the carry limit"; exit 1; }
# Starts here and skips cleanly without a GPU (a GPU test binary and the CLI).
L=$(mktemp -d)
tar -C "$L" -xzf "$S/lib.tar.gz"
export HTAM_EVAL=$PWD/$S/htam-eval HTAM_CUDA_PLUGIN_PATH=$PWD/$S/libhtam_backend_cuda.so \
       HTAM_HIP_PLUGIN_PATH=$PWD/$S/libhtam_backend_hip.so LD_LIBRARY_PATH=$L:${LD_LIBRARY_PATH:-}
if nvidia-smi -L > /dev/null 2>&1; then
  echo "a GPU is visible here: skipping the no-GPU check"
else
  set +e
  for t in cuda_plugin_gpu_test hip_on_nvidia_gpu_test; do
    out=$(timeout 120 "$S/$t" --gtest_filter='*Describes*' 2>&1)
    echo "$out" | tail -3
    case "$out" in *"[  SKIPPED ]"*) ;; *) echo "staged $t did not skip cleanly"; exit 1 ;; esac
  done
  # htam-bench starts with the staged libraries only (no GPU needed to print its usage error)
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH=$L "$S/htam-bench" eval --no-such-flag > /dev/null 2>&1
  [ $? = 2 ] || { echo "staged htam-bench does not start with the staged libraries"; exit 1; }
  "$S/htam-eval" --task tests/gpu/tasks/relu_small --source tests/hacks/cuda/good_vec4.cu > /dev/null 2>&1
  rc=$?
  set -e
  [ "$rc" = 4 ] || { echo "staged htam-eval exit $rc, expected 4 (no device)"; exit 1; }
  echo "staged binaries start and skip cleanly without a GPU"
  rm -rf "$L"
fi
echo "staged in $S; on the GPU machine: bash tools/gpu/one_run.sh   (carry: .gpu-stage)"
