#!/bin/bash
# The CUDA backend's whole GPU session in one command (device time is scarce): environment, unit +
# GPU tests, the hack catalogue, suite throughput through htam-eval, compile times, timing
# fidelity (triton do_bench, ncu), the KernelBench compile path. Run from the repository root on the
# GPU machine, with the binaries staged in .gpu-cuda/ (backends/cuda/bench/stage.sh). Writes
# logs to $OUT; phases have their own time limits so that partial results come back.
#   usage: backends/cuda/bench/gpu_run.sh [phases...]   (default: all)
set -u
OUT=${OUT:-/tmp/htam-out}
mkdir -p "$OUT"
ROOT=$PWD
PHASES=${*:-"info tests hacks fidelity ncu suite compile kernelbench"}
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
# The test binaries name their plugin, htam-eval and its worker by the build path on the build
# machine.
B=/work/main/build-cuda
if [ ! -e /work/main ]; then mkdir -p /work && ln -s "$ROOT" /work/main; fi
mkdir -p $B/backends/cuda $B/tests/gpu $B/tools/eval $B/daemon/eval
cp .gpu-cuda/htam-eval $B/tools/eval/
cp .gpu-cuda/htam-eval-worker $B/daemon/eval/
cp .gpu-cuda/libhtam_backend_cuda.so .gpu-cuda/cuda_compile_test \
   .gpu-cuda/cuda_plugin_test .gpu-cuda/cuda_nvrtc_test $B/backends/cuda/
cp .gpu-cuda/cuda_plugin_gpu_test .gpu-cuda/cuda_hacks_gpu_test $B/tests/gpu/
CLI=$B/tools/eval/htam-eval
NVCC_FLAGS="-shared -Xcompiler -fPIC,-fvisibility=hidden -cudart shared -gencode=arch=compute_90a,code=sm_90a -Isdk/include -Xptxas -v -lineinfo -O3"
now() { date +%s.%N; }
phase() { echo; echo "=== $1 ($(date -u +%H:%M:%S))"; }

for p in $PHASES; do
case $p in
info)
  phase info
  { date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,memory.total --format=csv;
    nvcc --version | tail -2; ls /usr/local/cuda/lib64/libcudart.so* /usr/local/cuda/lib64/libnvrtc.so* 2>&1 | head -4;
    which ncu; nproc; } 2>&1 | tee "$OUT/info.txt"
  ;;
tests)
  phase tests
  for t in ${TESTS:-backends/cuda/cuda_compile_test backends/cuda/cuda_plugin_test backends/cuda/cuda_nvrtc_test tests/gpu/cuda_plugin_gpu_test}; do
    timeout -s KILL 150 $B/$t 2>&1 | tee -a "$OUT/tests.log" | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|FAILED  \]|Failure|^device|^roofline|^relu|^10 rep|Expected|Which is|actual"
  done
  ;;
hacks)
  phase hacks
  timeout -s KILL 240 $B/tests/gpu/cuda_hacks_gpu_test --gtest_filter=${HACKS_FILTER:-*} 2>&1 | tee -a "$OUT/tests.log" | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|FAILED  \]|Failure|Expected|Which is|actual" | head -60
  ;;
fidelity)
  phase fidelity
  mkdir -p /tmp/fid && cp tests/gpu/tasks/relu_large/reference.cu /tmp/fid/relu.cu
  nvcc $NVCC_FLAGS -o /tmp/fid/relu.so /tmp/fid/relu.cu > /dev/null 2>&1
  for i in 1 2 3; do
    timeout -s KILL 60 $CLI --task tests/gpu/tasks/relu_large --reference --seeds 1 --reps 100 2>/dev/null
  done | tee "$OUT/fidelity_htam.jsonl" | python3 -c "import sys,json; [print('htam reference relu_large: median %.2f us IQR %.2f us n=%d clocks %s/%s' % (j['median_us'], j['spread_us'], j['repetitions'], j['sm_clock_mhz'], j['mem_clock_mhz'])) for j in map(json.loads, sys.stdin)]"
  timeout -s KILL 120 python3 backends/cuda/bench/fidelity.py /tmp/fid/relu.so 16777216 2>&1 | tee "$OUT/fidelity_triton.json" | tail -2
  ;;
ncu)
  phase ncu
  timeout -s KILL 120 ncu --clock-control none --metrics gpu__time_duration.sum,launch__grid_size --kernel-name relu_ref --csv \
    $CLI --in-process --task tests/gpu/tasks/relu_large --reference --seeds 1 --reps 30 > "$OUT/ncu.csv" \
    2> "$OUT/ncu.err"
  python3 - "$OUT/ncu.csv" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
hdr = rows[0]; body = rows[1:]
i_id, i_name, i_val = hdr.index("ID"), hdr.index("Metric Name"), hdr.index("Metric Value")
by = {}
for r in body:
    by.setdefault(r[i_id], {})[r[i_name]] = r[i_val].replace(",", "")
big = [float(v["gpu__time_duration.sum"]) for v in by.values() if v.get("launch__grid_size") == "65536"]
unit = [r for r in body if r[i_name] == "gpu__time_duration.sum"][0][hdr.index("Metric Unit")]
print("ncu gpu__time_duration of relu_ref at N=16M: %d launches, median %.3f %s" % (len(big), statistics.median(big), unit))
PY
  ;;
suite)
  phase suite
  rm -rf /tmp/htam-cc; t0=$(now); n=0
  for d in configs/tasks/*/; do
    [ -f "$d/reference.cu" ] || continue
    if [ $SECONDS -gt ${SUITE_DEADLINE_S:-500} ]; then echo "time is up: skipping $d and later tasks"; break; fi
    srcs=""; for f in "$d"/variants/cuda/*.cu; do [ -f "$f" ] && srcs="$srcs --source $f"; done
    timeout -s KILL 45 $CLI --task "$d" --reference $srcs --cache /tmp/htam-cc --compile-threads 8 --seeds 1 --reps 20 \
      2>>"$OUT/suite.err" >> "$OUT/suite.jsonl"
    echo "$d done at $(date -u +%T)"
  done
  t1=$(now)
  python3 - "$OUT/suite.jsonl" "$t0" "$t1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
wall = float(sys.argv[3]) - float(sys.argv[2])
print("suite: %d candidates in %.1f s = %.1f candidates/min (compile+verify+time, pool of 8)" % (len(rows), wall, 60 * len(rows) / wall))
from collections import Counter
print("status:", dict(Counter(r["status"] for r in rows)))
for r in rows:
    print("%-16s %-40s %-12s %9.2f us  x%5.2f  sol %.2f  regs %s" % (r["task"], r["source"].split("/")[-1], r["status"], r["median_us"], r["speedup"], r["sol_fraction"], r["registers"]))
PY
  ;;
compile)
  phase compile
  mkdir -p /tmp/ct; : > "$OUT/compile_times.txt"
  for f in configs/tasks/*/reference.cu $(ls configs/tasks/*/variants/cuda/*.cu | awk 'NR%5==1'); do
    a=$(now); nvcc $NVCC_FLAGS -o /tmp/ct/x.so "$f" > /dev/null 2>&1; b=$(now)
    nvcc -cubin -gencode=arch=compute_90a,code=sm_90a -Isdk/include -O3 -o /tmp/ct/x.cubin "$f" > /dev/null 2>&1; c=$(now)
    echo "$f $(awk "BEGIN{print $b - $a}") $(awk "BEGIN{print $c - $b}")" >> "$OUT/compile_times.txt"
  done
  python3 -c "
import statistics
rows=[l.split() for l in open('$OUT/compile_times.txt')]
s=[float(r[1]) for r in rows]; c=[float(r[2]) for r in rows]
print('nvcc -shared (the plugin path): %d kernels, median %.2f s, max %.2f s; nvcc -cubin (device only): median %.2f s' % (len(s), statistics.median(s), max(s), statistics.median(c)))"
  ;;
clifid)
  phase clifid
  for sets in ${CLIFID_SETS:-4 4 4 3 1}; do
    timeout -s KILL 60 $CLI --task tests/gpu/tasks/relu_large --reference --seeds 1 --reps 100 --sets $sets 2>/dev/null | \
      python3 -c "import sys,json; [print('htam-eval relu_large reference, %d input sets: median %.2f us IQR %.2f us n=%d wall %.1f s clocks %s/%s' % ($sets, j['median_us'], j['spread_us'], j['repetitions'], j['wall_ms']/1000, j['sm_clock_mhz'], j['mem_clock_mhz'])) for j in map(json.loads, sys.stdin)]"
  done
  ;;
onetask)
  phase "onetask ${ONE_TASK:-gelu}"
  d=configs/tasks/${ONE_TASK:-gelu}
  srcs=""; for f in "$d"/variants/cuda/*.cu; do srcs="$srcs --source $f"; done
  t0=$(now)
  timeout -s KILL 170 $CLI --task "$d" --reference $srcs --compile-threads 8 --seeds 1 --reps 20 2>"$OUT/onetask.err" | tee "$OUT/onetask.jsonl" | \
    python3 -c "
import sys, json
for l in sys.stdin:
    r = json.loads(l)
    print('%-28s %-12s %9.2f us x%5.2f sol %.2f compile %6.0f ms cached %s wall %6.1f s %s' % (r['source'].split('/')[-1], r['status'], r['median_us'], r['speedup'], r['sol_fraction'], r['compile_ms'], r['compile_cached'], r['wall_ms']/1000, r['diagnostics'][:100].replace(chr(10),' ')))"
  t1=$(now); echo "onetask wall $(awk "BEGIN{print $t1 - $t0}") s"
  ;;
kernelbench)
  phase kernelbench
  timeout -s KILL 150 python3 backends/cuda/bench/kernelbench_compile.py 2>&1 | tail -3 | tee "$OUT/kernelbench.json"
  ;;
esac
done
echo "=== end $(date -u +%H:%M:%S)"
