#!/bin/bash
# Stages what `htam-bench world build|check` needs on a GPU machine into DEST (default
# .world-stage/, git-ignored): htam-eval, htam-eval-worker, the CUDA plugin and htam-world-compile
# (stripped),
# the shared libraries a bare CUDA image may lack (libboost_program_options, libcupti), the kernel
# ABI header, the Python package and the families. On the GPU machine (from DEST):
#   LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64 PYTHONPATH=$PWD/sdk/python \
#     python3 -m htam_agent world build --bin bin --jobs 4 --out TABLE
#   usage: tools/bench/world/stage.sh [BUILD_DIR] [DEST]
set -euo pipefail
cd "$(dirname "$0")/../../.."
B=${1:-build}
D=${2:-.world-stage}
EXCL="$(git rev-parse --git-common-dir)/info/exclude"
mkdir -p "$(dirname "$EXCL")"
grep -qx '/.world-stage/' "$EXCL" 2>/dev/null || echo '/.world-stage/' >> "$EXCL"
rm -rf "$D" && mkdir -p "$D/bin" "$D/lib" "$D/sdk/python/htam_agent" "$D/configs/world"
strip -o "$D/bin/htam-eval" "$B/tools/eval/htam-eval"
strip -o "$D/bin/htam-eval-worker" "$B/daemon/eval/htam-eval-worker"
strip -o "$D/bin/libhtam_backend_cuda.so" "$B/backends/cuda/libhtam_backend_cuda.so"
strip -o "$D/bin/htam-world-compile" "$B/tools/bench/htam-world-compile"
for f in "$D"/bin/*; do
  ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $3}' | while read -r l; do
    case "$(basename "$l")" in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
      libcuda.so*|libcudart.so*|libnvrtc*.so*|libcupti.so*|libnvidia-ml.so*) ;;
      *) cp -L "$l" "$D/lib/" ;;
    esac
  done
done
CUPTI=$(ls /usr/local/cuda/lib64/libcupti.so.13 /usr/local/cuda/lib/libcupti.so.13 \
          /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13 2>/dev/null | head -1 || true)
[ -n "$CUPTI" ] && cp -L "$CUPTI" "$D/lib/"
cp -r sdk/include "$D/sdk/"
cp sdk/python/htam_agent/__init__.py sdk/python/htam_agent/__main__.py \
   sdk/python/htam_agent/world_*.py \
   "$D/sdk/python/htam_agent/"
cp configs/seed_taxonomy.json "$D/configs/"
cp -r configs/world/families "$D/configs/world/"
[ -f configs/world/h100_table.jsonl.gz ] && cp configs/world/h100_table.jsonl.gz "$D/configs/world/"
git rev-parse HEAD > "$D/commit"
du -sh "$D"
