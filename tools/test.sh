#!/usr/bin/env bash
# The test command: installs dependencies, builds, and runs every test that this machine can run
# (GPU tests skip with a message where there is no GPU). Then a sanitizer build (address,
# undefined) runs the unit tests again. HTAM_SANITIZE_TESTS=0 skips that second build.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
JOBS=${HTAM_JOBS:-$(nproc)}

# KernelBench's problems, where the project's shared folder has them (../shared beside the
# checkout): the tests that read them run (a CPU sample, the static checker's parity); else skip.
if [ -z "${HTAM_KERNELBENCH_DIR:-}" ] && [ -d ../shared/kernelbench/KernelBench ]; then
  export HTAM_KERNELBENCH_DIR=$(cd ../shared/kernelbench && pwd)
fi
echo "== build (RelWithDebInfo) =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHTAM_KERNELBENCH_DIR="${HTAM_KERNELBENCH_DIR:-}" >/dev/null
cmake --build build -j"$JOBS"
echo "== tests =="
ctest --test-dir build --output-on-failure -j"$JOBS" --timeout 900

if [ "${HTAM_SANITIZE_TESTS:-1}" != "0" ]; then
  echo "== sanitizer build (address, undefined): unit tests =="
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DHTAM_SANITIZE=ON -DHTAM_WITH_CUDA=OFF \
        -DHTAM_WITH_HIP=OFF >/dev/null
  cmake --build build-asan -j"$JOBS"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j"$JOBS" -L unit --timeout 900
fi
echo "== all tests passed =="
