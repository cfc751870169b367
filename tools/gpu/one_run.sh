#!/bin/bash
# The whole GPU session of the CUDA and HIP backends in ONE command, on the GPU machine, from the
# repository root, with .gpu-stage/ carried (built here by tools/gpu/stage_all.sh). About 300 s
# wall; every part has its own time limit so that one hang cannot eat the run:
#   info | the KernelBench load_inline path (in the background from the start, CPU-bound) | CUDA
#   plugin GPU tests | CUDA hack catalogue + timing modes | HIP on NVIDIA (each in-process test in
#   its own process, the rowsum HIP variants through the gate) | htam-bench eval (candidates/min
#   over the suite's lineage variants) | every reference.hip through the gate | timing fidelity
#   against ncu if time is left | summary.json
# Writes 8 files to $OUT: info.txt, cuda_tests.log, cuda_hacks.log, hip.log, bench_eval.log,
# kernelbench.jsonl, fidelity.log, summary.json (the last one gathers the numbers).
# kbmodelnew (ModelNew candidates of language kernelbench through htam-eval; by name only).
# kbdevice (ModelNew at full size with the golden data on the device, and the same candidate three
# times within 3 %; by name only, about 3 minutes).
# loadpaths (tools/kernelbench/bench_load_paths.py: load_inline against htam.load_cuda, cold, one
# JSON line in $OUT/load_paths.json; by name only, about 2 minutes).
# kbfull (every KernelBench problem of levels 1-3 as its own ModelNew, 9 min or more), kbstable (one
# candidate evaluated three times in one run, about 90 s), kbcompile (torch-extension build routes,
# about 3 min): KernelBench at full size, by name only; see their comments below.
# By name only as well: modes (evaluation settings side by side), runner, klsuite (the KernelBench
# load_inline path over the suite's own variants), world (`htam-bench world build`), workers
# (remote-worker scaling on a multi-GPU host), worldlive (`htam-bench world bench --live`). This
# is the one GPU runner; tools/gpu/stage_all.sh
# is the one staging script.
# Parts (arguments; default all, in this order): tests (CUDA plugin, hack catalogue + timing
# modes + ncu profile, htamd with sandboxed CUDA workers, KernelBench on CUDA, HIP on NVIDIA), bench
# (htam-bench eval against the KernelBench load_inline path), fidelity (relu 16M modes against ncu,
# the suite's kernels under triton.testing.do_bench, then against ncu with
# tools/gpu/fidelity_suite.sh; FID_TASKS narrows the list). One call of at most 10 minutes fits
# "tests", another "bench fidelity".
# Limits (seconds) can be changed by environment: T_CUDA, T_HACKS, T_DAEMON, T_KB, T_HIP, T_BENCH,
# T_TOTAL.
# KernelBench needs a python3 with PyTorch+CUDA: HTAM_KB_PYTHON (default: python3 on PATH).
set -u
PARTS=" ${*:-tests bench fidelity} "
has() { case "$PARTS" in *" $1 "*) return 0 ;; esac; return 1; }
# "tests" is cuda + hacks + daemon + kb + hip; each can also be asked alone.
part() { has tests || has "$1"; }
ROOT=$PWD
OUT=${OUT:-/tmp/htam-gpu-out}
mkdir -p "$OUT"
S=$ROOT/.gpu-stage
T0=$(date +%s)
rm -f /tmp/htam-bench-eval.json
T_TOTAL=${T_TOTAL:-560}
elapsed() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( T_TOTAL - $(elapsed) )); }
export PATH=/usr/local/cuda/bin:$PATH
ORIG_LD=${LD_LIBRARY_PATH:-}
# Shared libraries the GPU machine lacks (and libcupti), staged compressed by stage_all.sh.
LIBS=/tmp/htam-gpu-lib
mkdir -p $LIBS && tar -C $LIBS -xzf "$S/lib.tar.gz"
export LD_LIBRARY_PATH=$LIBS:/usr/local/cuda/lib64:/usr/local/cuda/lib:/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
export HTAM_EVAL=$S/htam-eval HTAM_CUDA_PLUGIN_PATH=$S/libhtam_backend_cuda.so \
       HTAM_HTAMD=$S/htamd HTAM_EVAL_WORKER=$S/htam-eval-worker HTAM_SOURCE_ROOT=$ROOT \
       HTAM_HIP_PLUGIN_PATH=$S/libhtam_backend_hip.so PYTHONUNBUFFERED=1 \
       HTAM_KERNELBENCH_HELPER=$ROOT/tools/kernelbench/kb_helper.py
chmod +x "$S"/htam-eval "$S"/htam-eval-worker "$S"/htam-bench "$S"/*_test 2>/dev/null
GREP='^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|^\[  FAILED|Failure|Expected|Which is|actual|^device|^roofline|^relu|^10 rep| mode( asked)?:|^hip on|^rowsum|reference.hip|lost in'
# run LIMIT LOG CMD...: a part with a wall limit (KILL), output appended to LOG.
run() {
  local lim=$1 log=$2; shift 2
  local l; l=$(left); [ "$lim" -gt "$l" ] && lim=$l
  if [ "$lim" -lt 5 ]; then echo "--- skipped (no time left): $*" | tee -a "$log"; return 124; fi
  echo "--- $(date -u +%T) [${lim}s] $*" >> "$log"
  timeout -s KILL "$lim" "$@" >> "$log" 2>&1
  local rc=$?
  echo "--- exit $rc after $(elapsed)s total" >> "$log"
  return $rc
}

# ---- info
{ date -u; cat "$S/commit" 2>/dev/null; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,memory.total --format=csv
  nvcc --version | tail -2; nproc; which ncu python3
  ls -la "$S" $LIBS; for b in "$S"/*.so "$S"/htam-* "$S"/*_test; do ldd "$b" | grep -E "not found" | sed "s|^|$b: |"; done
  ldd "$S/libhtam_backend_cuda.so" | grep -E "cudart|nvrtc"; } > "$OUT/info.txt" 2>&1
echo "info done at $(elapsed)s"

# ---- KernelBench path in the background from the start: its load_inline compile is CPU-bound
# (about 53 s per kernel on this machine when run alone); its GPU part is about a second.
KB=""
if has bench; then
LD_LIBRARY_PATH=$ORIG_LD timeout -s KILL $(( T_TOTAL - 15 )) python3 backends/cuda/bench/kernelbench_compile.py relu scale_add \
  > "$OUT/kernelbench.jsonl" 2>&1 < /dev/null &
KB=$!
fi
export HTAM_KB_PYTHON=${HTAM_KB_PYTHON:-$(LD_LIBRARY_PATH=$ORIG_LD command -v python3)}

# gtest_part PART LIMIT LOG BINARY [PATTERN]: one GPU test binary, its lines of interest printed.
gtest_part() {
  part "$1" || return 0
  run "$2" "$OUT/$3" "$S/$4"
  grep -E "$GREP${5:+|$5}" "$OUT/$3" | head -50
}
# ---- CUDA plugin in process (describe, roofline, run, timing, side streams)
gtest_part cuda "${T_CUDA:-60}" cuda_tests.log cuda_plugin_gpu_test
# ---- hack catalogue through the gate, the timing modes, fault cases (own processes inside)
gtest_part hacks "${T_HACKS:-150}" cuda_hacks.log cuda_hacks_gpu_test '^ncu profile'
# ---- htamd with its sandboxed CUDA workers through the C++ SDK (crash recovery, ncu profile);
# the sandbox runs candidates as an unprivileged user, who must read the tree and the libraries
part daemon && chmod -R a+rX "$ROOT" $LIBS 2>/dev/null
gtest_part daemon "${T_DAEMON:-150}" cuda_daemon.log cuda_daemon_gpu_test '^daemon|^Nsight'
# ---- runner and verifier (eval.runner): the CUDA hack catalogue and every suite lineage through
# the Evaluator htamd uses (htam-eval), with candidates in the runner and, in the same run,
# in the verifier's process (eval.runner false): outcomes and candidates/min side by side.
if has runner; then
  chmod -R a+rX "$ROOT" $LIBS 2>/dev/null
  EV="$S/htam-eval --eval.sdk_include_dir $ROOT/sdk/include --eval.runner_backends cpu,cuda"
  for mode in ${RUNNER_MODES:-true false}; do
    run 120 "$OUT/runner.log" $EV --task tests/gpu/tasks/relu_small --backend cuda \
      --eval.runner $mode --eval.seeds 2 $(ls tests/hacks/cuda/*.cu | grep -v -e hang -e early_return)
  done
  for mode in true false; do
    for t in ${RUNNER_TASKS:-gelu rowsum softmax transpose sgemm}; do
      t0=$(date +%s.%N)
      run 60 "$OUT/runner.log" $EV --task configs/tasks/$t --backend cuda --lineage --eval.runner $mode
      echo "lineage $t runner=$mode wall $(echo "$(date +%s.%N) - $t0" | bc) s" | tee -a "$OUT/runner.log"
    done
  done
  grep -E '"status"|^lineage' "$OUT/runner.log" | cut -c1-300 | head -80
fi
# ---- evaluation modes side by side, same binaries, same warm GPU (MODES_TASKS narrows the tasks,
# MODES the modes):
#   old      candidates in the verifier's process, a fresh worker per candidate, test data
#            generated and compared on the host (the defaults before device data and runners)
#   inproc   the same with test data on the device
#   ipc      candidates in a runner over buffers the verifier allocated, a fresh pair per candidate
#   new      candidates in a runner that allocates its buffers, the pair serving many jobs, test
#            data on the device
#   ahead    new, with a task's candidates queued at once and compiled ahead on every core
#   noahead  the same queue, compiling ahead off (each runner compiles on the device's turn)
#   nopool   ahead, every test tensor allocating its own buffer (eval.buffer_pool_mb 0)
#   pool     ahead with the defaults now (a job's buffers pooled)
#   nobatch  pool, with a CUPTI flush before and after every timed repetition
#   lanes2/3 pool with two or three workers per device (eval.device_workers)
#   noreuse  pool, the reference timed beside every candidate (eval.baseline_reuse_s 0)
#   pertask  pool, one process and queue per task; prev: the same with the binaries staged in
#            .gpu-stage/old (an earlier build, for old-beside-new in one run)
# Queued modes (--queue) submit every task's candidates to one queue in one process.
# For each: candidates/min, GPU utilisation (nvidia-smi, 200 ms samples), stage times, and the
# 16M relu timed as a candidate three times (timing parity). Details: modes_detail.log.
if has modes; then
  chmod -R a+rX "$ROOT" $LIBS 2>/dev/null
  EV="$S/htam-eval --eval.sdk_include_dir $ROOT/sdk/include --eval.runner_backends cpu,cuda"
  declare -A MODE_OPTS=(
    [old]="--eval.runner false --eval.worker_jobs 1 --eval.device_data false"
    [inproc]="--eval.runner false --eval.worker_jobs 1 --eval.device_data true"
    [ipc]="--eval.runner true --eval.runner_allocates none --eval.runner_jobs 1 --eval.device_data false"
    [new]="--eval.runner true --eval.runner_allocates cuda --eval.runner_jobs 64 --eval.device_data true"
    # A task's candidates queued at once (htam-eval --queue), compiled ahead or not.
    [ahead]="--queue --eval.runner true --eval.runner_allocates cuda --eval.runner_jobs 64 --eval.device_data true --eval.compile_ahead_backends cuda"
    [noahead]="--queue --eval.runner true --eval.runner_allocates cuda --eval.runner_jobs 64 --eval.device_data true --eval.compile_ahead_backends none"
    [nopool]="--queue --eval.buffer_pool_mb 0"
    [pool]="--queue"
    # nobatch: pool with a CUPTI flush before and after every timed repetition (the old way).
    [nobatch]="--queue --eval.cuda_cupti_batch false"
    # Two or three lanes per device (eval.device_workers): verification overlaps, timing in turn.
    [lanes2]="--queue --eval.device_workers 2"
    [lanes3]="--queue --eval.device_workers 3"
    # Per-task queues (one process per task), new binaries and the previous ones
    # (.gpu-stage/old: htam-eval (or, staged before it, htam-evaluate), htam-eval-worker and the
    # CUDA plugin of an earlier build).
    [noreuse]="--queue --eval.baseline_reuse_s 0"
    [pertask]="--queue"
    [prev]="--queue"
    # prevq: the previous binaries with one queue over all tasks (beside pool); warm: pool again
    # over pool's compile cache (every candidate and reference compiled: the device's own rate).
    [prevq]="--queue"
    [warm]="--queue")
  declare -A MODE_PERTASK=([pertask]=1 [prev]=1)
  M=/tmp/htam-modes; rm -rf $M; mkdir -p $M
  for rep in ${MODES_REPS:-1}; do
    for mode in ${MODES:-old new}; do
      nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 200 > "$M/util_$mode.$rep.txt" 2>/dev/null &
      SMI=$!
      t0=$(date +%s.%N)
      EVM="$EV"
      OLD_EV=$S/old/htam-eval; [ -x "$OLD_EV" ] || OLD_EV=$S/old/htam-evaluate
      [ "$mode" = prev ] || [ "$mode" = prevq ] && EVM="${EV/$S\/htam-eval/$OLD_EV}"
      CACHE="$M/cache_$mode.$rep"; [ "$mode" = warm ] && CACHE="$M/cache_pool.$rep"
      if [[ "${MODE_OPTS[$mode]}" == *--queue* && -z "${MODE_PERTASK[$mode]:-}" ]]; then
        TASK_ARGS=""; for t in ${MODES_TASKS:-gelu rowsum softmax}; do TASK_ARGS+=" --task configs/tasks/$t"; done
        run "${T_MODE:-300}" "$M/$mode.$rep.jsonl" $EVM $TASK_ARGS --backend cuda --lineage ${MODE_OPTS[$mode]} \
          --eval.cache_dir "$CACHE"  # empty (but warm's): every mode compiles everything
      else
        for t in ${MODES_TASKS:-gelu rowsum softmax}; do
          run 150 "$M/$mode.$rep.jsonl" $EVM --task configs/tasks/$t --backend cuda --lineage ${MODE_OPTS[$mode]} \
            --eval.cache_dir "$M/cache_$mode.$rep"  # empty: every mode compiles everything
        done
      fi
      t1=$(date +%s.%N)
      kill $SMI 2>/dev/null; wait $SMI 2>/dev/null
      run 60 "$M/relu_$mode.$rep.jsonl" $EVM --task tests/gpu/tasks/relu_large --backend cuda ${MODE_OPTS[$mode]} \
        --eval.cache_dir "$CACHE" \
        tests/gpu/tasks/relu_large/reference.cu tests/gpu/tasks/relu_large/reference.cu tests/gpu/tasks/relu_large/reference.cu
      cat "$M/$mode.$rep.jsonl" "$M/relu_$mode.$rep.jsonl" >> "$OUT/modes_detail.log"
      python3 - "$mode" "$rep" "$t0" "$t1" "$M" <<'PY'
import json, sys, statistics as st, collections
mode, rep, t0, t1, m = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
def rows(path):
    out = []
    for line in open(path, errors="replace"):
        line = line.strip()
        if line.startswith("{") and '"status"' in line:
            try: out.append(json.loads(line))
            except Exception: pass
    return out
r = rows(f"{m}/{mode}.{rep}.jsonl")
util = []
for x in open(f"{m}/util_{mode}.{rep}.txt").read().split():
    try: util.append(float(x))
    except ValueError: pass
stages = collections.defaultdict(float)
ops = collections.defaultdict(float)
for x in r:
    for k, v in (x.get("stage_ms") or {}).items(): stages[k] += v
    for k, v in (x.get("op_ms") or {}).items(): ops[k] += v
relu = [x.get("median_us") for x in rows(f"{m}/relu_{mode}.{rep}.jsonl")]
wall = t1 - t0
walls = sorted(x.get("wall_ms", 0) for x in r)
print(json.dumps({"mode": mode, "rep": rep, "candidates": len(r),
                  "ok": sum(x.get("status") == "Ok" for x in r), "wall_s": round(wall, 1),
                  "compile_cached": sum(bool(x.get("compile_cached")) for x in r),
                  "per_min": round(60 * len(r) / wall, 1) if wall > 0 else 0,
                  "wall_ms_p50": round(st.median(walls)) if walls else 0,
                  "gpu_util_mean": round(st.mean(util), 1) if util else None,
                  "stage_s": {k: round(v / 1000, 2) for k, v in sorted(stages.items(), key=lambda kv: -kv[1])},
                  "op_s": {k: round(v / 1000, 2) for k, v in sorted(ops.items(), key=lambda kv: -kv[1])},
                  "relu16M_us": relu,
                  "outcomes": [(x.get("file", "")[-28:], x.get("status"), round(x.get("speedup", 0), 3)) for x in r]}))
PY
    done
  done 2>&1 | tee -a "$OUT/modes_summary.jsonl"
fi
# ---- KernelBench problems on CUDA (golden data and eager baseline from PyTorch on the GPU)
gtest_part kb "${T_KB:-150}" cuda_kernelbench.log cuda_kernelbench_gpu_test '^kernelbench'
if part hip; then

# ---- HIP on NVIDIA: the in-process tests one per process (a sticky fault cannot spill over)
for t in DescribesTheNvidiaPlatform WavefrontAwareReductionIsCorrectAndTimed KernelReturnCodeIsReported; do
  run 25 "$OUT/hip.log" "$S/hip_on_nvidia_gpu_test" --gtest_filter="HipOnNvidia.$t"
done
run 30 "$OUT/hip.log" "$S/hip_on_nvidia_gpu_test" --gtest_filter='HipOnNvidiaGate.RowsumHipVariantsPassAndAreTimed'

# ---- HIP: every task's reference.hip through the gate
run "${T_HIP:-150}" "$OUT/hip.log" "$S/hip_on_nvidia_gpu_test" --gtest_filter='HipOnNvidiaGate.EveryTaskReferenceHipPassesTheGate'
grep -E "$GREP" "$OUT/hip.log" | head -40
fi

# ---- ModelNew candidates (language kernelbench) through htam-eval: load_inline CUDA, its
# build-cache hit, a wrong kernel, side streams, Triton (tests/gpu/kb_modelnew_gpu_test.py). Only
# when asked by name (about 3 minutes: a cold load_inline compile): one_run.sh kbmodelnew
if [[ "$PARTS" == *" kbmodelnew "* ]]; then
  chmod -R a+rX "$ROOT" $LIBS 2>/dev/null
  HTAM_EVAL=$S/htam-eval OUT=$OUT run "${T_KBMN:-500}" "$OUT/kb_modelnew.log" \
    "$HTAM_KB_PYTHON" tests/gpu/kb_modelnew_gpu_test.py -v
  grep -E '^kb_modelnew|^load_inline|^(ok|FAIL|ERROR|OK|Ran)|skipped|Error' "$OUT/kb_modelnew.log" | head -40
fi
# kbdevice: ModelNew at full size with the golden data on the device (a 4 GiB ReLU problem, Ok and
# a wrong one Incorrect, no tensor file on the host; a task refused by the device's memory) and
# the same device-bound ModelNew three times in one run within 3 %, and a host-bound one read as
# KernelBench's CUDA events read it (tests/gpu/kb_device_golden_gpu_test.py).
# By name only, about 3 minutes; KBDEVICE_TESTS names some of its tests (unittest names).
if [[ "$PARTS" == *" kbdevice "* ]]; then
  chmod -R a+rX "$ROOT" $LIBS 2>/dev/null
  HTAM_EVAL=$S/htam-eval OUT=$OUT run "${T_KBDEVICE:-500}" "$OUT/kb_device.log" \
    "$HTAM_KB_PYTHON" tests/gpu/kb_device_golden_gpu_test.py -v ${KBDEVICE_TESTS:-}
  grep -E '^full size|^stable|^host-bound|^(ok|FAIL|ERROR|OK|Ran)|skipped|Error|Assertion' "$OUT/kb_device.log" | head -40
fi
if [[ "$PARTS" == *" loadpaths "* ]]; then
  timeout "${T_LOADPATHS:-400}" "$HTAM_KB_PYTHON" tools/kernelbench/bench_load_paths.py \
    > "$OUT/load_paths.json" 2> "$OUT/load_paths.err"
  echo "loadpaths rc=$?"; cat "$OUT/load_paths.json"; tail -5 "$OUT/load_paths.err"
fi

# ---- KernelBench at full size (issue 32), each by name only; every part cleans what it wrote.
# The problems: KB_DIR (default shared/kernelbench/KernelBench beside or inside the checkout).
# kill_under DIR: ends the processes a part left running whose command line names DIR (its own
# work folder: workers and helpers of an htam-eval that was killed), then removes DIR.
kill_under() {
  local d=$1 p
  [ -n "$d" ] && [ -d "$d" ] || return 0
  for p in /proc/[0-9]*; do
    tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -qF -- "$d" && kill -9 "${p#/proc/}" 2>/dev/null
  done
  sleep 1; rm -rf "$d"
}
kb_dir() {
  for d in "${KB_DIR:-}" "$ROOT/shared/kernelbench/KernelBench" "$ROOT/../shared/kernelbench/KernelBench"; do
    [ -n "$d" ] && [ -d "$d/level1" ] && { echo "$d"; return 0; }
  done
  return 1
}
# kbfull: every problem of levels 1-3 (KBFULL_LEVELS, KBFULL_PROBLEMS narrow it) with its own Model
# KBFULL_STAGE: another stage folder to evaluate with (its htam-eval, htam-eval-worker, CUDA plugin
# and, where it has one, its kernelbench/ scripts), e.g. an older build staged beside this one for
# a before/after in one session; KBFULL_NAME (default kbfull) names the output files.
# renamed ModelNew, the require-a-kernel check off, through htam-eval on cuda, KBFULL_JOBS (8) at
# once, seeds 1, 10 repetitions, 2 input sets; starts no evaluation after T_KBFULL-60 s (default
# 540: 480 s of starts). Writes $OUT/kbfull.json (per level: status, seconds, peak device MiB,
# htam median and eager baseline per problem; KernelBench's metrics) and kbfull.jsonl (one line per
# problem as it ends, kept if the part is killed). Everything else (tasks, golden data, caches)
# lives in one work folder under /tmp, removed at the end. About 9 minutes before jobs shared one
# ledger per host (2026-11-29); longer since: jobs whose memory does not fit together take turns
# (level 1, 8 jobs, 3d4ab77: 17 of problems 1-40 within 215 s of starts).
if [[ "$PARTS" == *" kbfull "* ]]; then
  KBD=$(kb_dir) || { echo "kbfull: no KernelBench tree (set KB_DIR)"; }
  if [ -n "${KBD:-}" ]; then
    chmod -R a+rX "$ROOT" $LIBS 2>/dev/null
    W=$(mktemp -d /tmp/htam-kbfull.XXXXXX); chmod 755 "$W"
    LV=""; for l in ${KBFULL_LEVELS:-1 2 3}; do LV="$LV --level $l"; done
    T=${T_KBFULL:-540}
    KS=${KBFULL_STAGE:-$S}; KN=${KBFULL_NAME:-kbfull}
    KH=$HTAM_KERNELBENCH_HELPER; [ -f "$KS/kernelbench/kb_helper.py" ] && KH=$KS/kernelbench/kb_helper.py
    chmod +x "$KS"/htam-eval "$KS"/htam-eval-worker
    HTAM_EVAL_WORKER=$KS/htam-eval-worker HTAM_CUDA_PLUGIN_PATH=$KS/libhtam_backend_cuda.so \
    HTAM_KERNELBENCH_HELPER=$KH \
    PYTHONPATH=$ROOT/sdk/python:$ROOT/tools/bench/python timeout -s KILL "$T" python3 -m htam_bench kernelbench \
      --kernelbench "$KBD" --reference-as-modelnew $LV ${KBFULL_PROBLEMS:+--problems $KBFULL_PROBLEMS} \
      --policy '{"require_kernel": false}' --backend cuda --jobs "${KBFULL_JOBS:-8}" \
      --tasks-dir "$W/tasks" --htam-eval "$KS/htam-eval" --kernelbench-python "$HTAM_KB_PYTHON" \
      --eval-arg=--option --eval-arg="kernelbench_python=$HTAM_KB_PYTHON" \
      --eval-arg=--eval.scratch_dir --eval-arg="$W" --eval-arg=--seeds --eval-arg=1 \
      --eval-arg=--reps --eval-arg=10 --eval-arg=--sets --eval-arg=2 \
      --time-limit $(( T - 60 )) --device-memory --progress "$OUT/$KN.jsonl" \
      --json "$OUT/$KN.json" > "$OUT/$KN.log" 2>&1
    echo "$KN rc=$? ($(elapsed)s; $(cat "$KS/commit" 2>/dev/null)); disk of the work folder at the end: $(du -sh "$W" 2>/dev/null | cut -f1); free: $(df -h /tmp | tail -1)"
    kill_under "$W"
    grep -E '^(level|all levels)' "$OUT/$KN.log" | grep -E 'problems,|all levels' | head -8
    python3 -c "
import json, collections
rows = [json.loads(l) for l in open('$OUT/$KN.jsonl')]
c = collections.Counter(r['outcome'] or r['status'] for r in rows)
print('$KN outcomes:', dict(c))
for r in rows:
    if r['outcome'] != 'Ok': print('  L%d %s: %s' % (r['level'], r['problem'], r['note'][:150]))
    else: print('  L%d %s: Ok %.2fx (%.0f us against eager %.0f us)' % (r['level'], r['problem'], r.get('speedup') or 0, r.get('median_us') or 0, r.get('baseline_us') or 0))
" 2>&1 | head -60
  fi
fi
# kbstable: the same ModelNew (load_cuda ReLU, 4M floats) and the same lean-ABI candidate each
# evaluated twice in one htam-eval run; prints both medians and their difference (target: within
# 3 %). About 90 s.
if [[ "$PARTS" == *" kbstable "* ]]; then
  chmod -R a+rX "$ROOT" $LIBS 2>/dev/null
  W=$(mktemp -d /tmp/htam-kbstable.XXXXXX); chmod 755 "$W"
  MN=tests/gpu/kernelbench/kb_relu/modelnew/relu_load_cuda.py
  run "${T_KBSTABLE:-240}" "$OUT/kbstable.log" "$S/htam-eval" --task tests/gpu/kernelbench/kb_relu \
    --backend cuda --language kernelbench --option "kernelbench_python=$HTAM_KB_PYTHON" \
    --eval.scratch_dir "$W" "$MN" "$MN" "$MN"
  run 60 "$OUT/kbstable.log" "$S/htam-eval" --task tests/gpu/tasks/relu_small --backend cuda \
    --eval.scratch_dir "$W" tests/hacks/cuda/good_vec4.cu tests/hacks/cuda/good_vec4.cu tests/hacks/cuda/good_vec4.cu
  kill_under "$W"
  python3 -c "
import json
rows = [json.loads(l) for l in open('$OUT/kbstable.log') if l.startswith('{')]
for task in sorted({r['task'] for r in rows}):
    m = [r['median_us'] for r in rows if r['task'] == task and r['status'] == 'Ok']
    st = [r['status'] for r in rows if r['task'] == task]
    if len(m) >= 2:
        d = max(abs(a - b) / min(a, b) for a in m for b in m)
        mine = [r for r in rows if r['task'] == task]
        import re
        ev = [float(x.group(1)) for x in (re.search(r'CUDA events: median ([0-9.]+) us', r['diagnostics']) for r in mine) if x]
        print('kbstable %s: medians %s us, spreads %s us, max difference %.1f %% (target <= 3 %%), baseline %.1f us; CUDA-event medians %s us' % (
            task, [round(x, 2) for x in m], [round(r['spread_us'], 2) for r in mine], 100 * d, mine[0]['baseline_us'], ev))
    else:
        print('kbstable %s: statuses %s' % (task, st))
"
fi
# kbcompile: a KernelBench-style torch extension (torch/extension.h in the .cu) built cold by
# load_inline, reloaded, imported from the build, and by parts: g++ of main.cpp with and without a
# precompiled torch/extension.h, nvcc with and without the torch headers, and the split build
# (kernels through nvcc alone + the torch::Tensor wrappers through g++ with the PCH, side by side)
# checked against load_inline's output (tools/kernelbench/bench_torch_ext_build.py). One JSON line
# per step in $OUT/kbcompile.jsonl. About 3 minutes (load_inline's cold build is most of it).
if [[ "$PARTS" == *" kbcompile "* ]]; then
  run "${T_KBCOMPILE:-400}" "$OUT/kbcompile.jsonl" "$HTAM_KB_PYTHON" tools/kernelbench/bench_torch_ext_build.py
  grep -E '^\{|Error|error' "$OUT/kbcompile.jsonl" | head -30
fi

# klsuite: the KernelBench load_inline path over the suite's own lineage variants (the kernels
# `modes` evaluates), for the ratio on the same kernels; by name only, about 50 s per candidate.
# KLSUITE narrows the list (kernelbench_compile.py --suite syntax).
if [[ "$PARTS" == *" klsuite "* ]]; then
  timeout "${T_KLSUITE:-480}" "$HTAM_KB_PYTHON" backends/cuda/bench/kernelbench_compile.py --suite \
    ${KLSUITE:-gelu:v1 softmax:v2 sgemm:v3 transpose:v2 rowsum:v1 scan:v2} \
    > "$OUT/klsuite.jsonl" 2> "$OUT/klsuite.err"
  echo "klsuite rc=$?"; cat "$OUT/klsuite.jsonl"; tail -5 "$OUT/klsuite.err"
fi

# ---- world: `htam-bench world build` (issue 16's measured table) from this stage; resumes where
# it stopped. WORLD_ARGS adds its arguments (default: --jobs 1 --out $OUT/world_table.jsonl;
# e.g. "--only hgemm histogram --redo --table configs/world/h100_table.jsonl.gz"). By name only.
if [[ "$PARTS" == *" world "* ]]; then
  chmod -R a+rX "$ROOT" $LIBS 2>/dev/null
  PYTHONPATH=$ROOT/sdk/python:$ROOT/tools/bench/python timeout -s KILL "${T_WORLD:-540}" python3 -m htam_bench world build \
    --bin "$S" ${WORLD_ARGS:---jobs 1 --out $OUT/world_table.jsonl} > "$OUT/world.log" 2>&1
  echo "world build rc=$?"; tail -15 "$OUT/world.log"
fi

# ---- worldlive: `htam-bench world bench --live` on a held-out family (WORLDLIVE_ARGS; default
# layernorm, 2 tasks, 1 seed, budget 6, full and cold): htamd, started from this stage, evaluates
# every variant the world answers with through its gate on this GPU, and the run reports how the
# live outcomes agree with the committed table's. Needs this machine's python3 to have pyzmq (the
# SDK and flatbuffers come from the stage). By name only; T_WORLDLIVE (300).
if [[ "$PARTS" == *" worldlive "* ]]; then
  chmod -R a+rX "$ROOT" $LIBS 2>/dev/null
  PY=/tmp/htam-gpu-py
  mkdir -p $PY && tar -C $PY -xzf "$S/py.tar.gz"
  if PYTHONPATH=$PY python3 -c "import zmq, htam" > "$OUT/world_live.log" 2>&1; then
    PYTHONPATH=$PY:$ROOT/sdk/python:$ROOT/tools/bench/python timeout -s KILL "${T_WORLDLIVE:-300}" python3 -m htam_bench.world_bench \
      --htamd "$S/htamd" --option eval.worker_path="$S/htam-eval-worker" --option eval.plugin_dir="$S" \
      --option eval.sdk_include_dir="$ROOT/sdk/include" \
      ${WORLDLIVE_ARGS:---on held-out --only-families layernorm --max-tasks 2 --seeds 1 --budget 6 --policies full,cold} \
      --live --verbose --work /tmp/htam-world-live --out "$OUT/world_live" >> "$OUT/world_live.log" 2>&1
    echo "world live rc=$?"; tail -12 "$OUT/world_live.log"
  else
    echo "world live: skipped, python3 here cannot import zmq (pyzmq) with the staged SDK:"
    tail -3 "$OUT/world_live.log"
  fi
fi

# ---- remote workers (a host with two or more GPUs): htam-bench workers with 1 and 2 htam-worker
# processes, one GPU each, CUDA backend, the suite's references. First finds the worker sandbox
# settings under which the CUDA runtime starts here ($OUT/sandbox_args; skip with WORKER_ARGS set).
# WORKERS_JOBS, WORKERS_ROUNDS (24, 2), PHASE_S, T_WORKERS. By name only.
if [[ "$PARTS" == *" workers "* ]]; then
  chmod -R a+rX "$ROOT" $LIBS 2>/dev/null
  if [ -z "${WORKER_ARGS+x}" ]; then
    : > "$OUT/sandbox_args"
    for args in "" "--eval.sandbox_network false" "--eval.sandbox_user root" \
                "--eval.sandbox_readonly_fs false" \
                "--eval.sandbox_network false --eval.sandbox_user root --eval.sandbox_readonly_fs false"; do
      d=$(mktemp -d); chmod 755 "$d"
      timeout -s KILL 8 "$S/htam-worker" --general.data_dir "$d" --worker.connect "ipc://$d/none.sock" \
        --eval.backends cuda --eval.sdk_include_dir "$ROOT/sdk/include" \
        --eval.worker_path "$S/htam-eval-worker" --eval.plugin_dir "$S" $args > "$d/log" 2>&1
      if grep -q "cannot run here\|no device can evaluate" "$d/log"; then v="FAILS"; else v="works"; fi
      echo "sandbox [${args:-defaults}]: $v" | tee -a "$OUT/probe.log"
      [ "$v" = works ] && [ ! -s "$OUT/sandbox_args" ] && echo "${args:-(defaults)}" > "$OUT/sandbox_args"
    done
    WORKER_ARGS=$(sed 's/(defaults)//' "$OUT/sandbox_args" 2>/dev/null)
  fi
  { date -u; nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem --format=csv; nproc; } > "$OUT/workers.log" 2>&1
  timeout -s KILL "${T_WORKERS:-500}" "$S/htam-bench" workers --backend cuda --workers 1,2 \
    --gpu-per-worker --jobs "${WORKERS_JOBS:-24}" --rounds "${WORKERS_ROUNDS:-2}" --htamd "$S/htamd" \
    --worker "$S/htam-worker" --timeout-s "${PHASE_S:-150}" \
    --worker-args="--eval.sdk_include_dir $ROOT/sdk/include --eval.worker_path $S/htam-eval-worker --eval.plugin_dir $S ${WORKER_ARGS:-}" \
    >> "$OUT/workers.log" 2>&1
  echo "exit $?" >> "$OUT/workers.log"
  grep '^{' "$OUT/workers.log" | tail -1 > "$OUT/workers.json"
  tail -30 "$OUT/workers.log"
fi

# ---- throughput: every task's reference + lineage variants, compile + verify + time
if has bench; then
BL=$(( $(left) - 40 )); [ "$BL" -gt "${T_BENCH:-75}" ] && BL=${T_BENCH:-75}; [ "$BL" -lt 20 ] && BL=20
run $(( BL + 20 )) "$OUT/bench_eval.log" "$S/htam-bench" eval --cli "$S/htam-eval" --backend cuda \
  --tasks gelu,rowsum,softmax,transpose,sgemm,bf16_gemm,rmsnorm,scan,stencil2d,gemm_bias_gelu \
  --seeds 1 --reps 20 --compile-threads 12 --repeat 0 --deadline-s "$BL" --json /tmp/htam-bench-eval.json
cat "$OUT/bench_eval.log" | tail -16
fi

# ---- fidelity against ncu: relu 16M in both modes, then the suite's single-kernel references
if has fidelity && [ "$(left)" -gt 62 ] && command -v ncu > /dev/null; then
  {
    for mode in cupti sync; do
      timeout -s KILL 15 "$S/htam-eval" --task tests/gpu/tasks/relu_large --reference --seeds 1 --reps 100 \
        --option cuda_timing_mode=$mode 2>/dev/null | sed "s/^{/{\"mode\":\"$mode\",/"
    done
    timeout -s KILL 30 ncu --clock-control none --metrics gpu__time_duration.sum --kernel-name relu_ref --csv \
      "$S/htam-eval" --in-process --task tests/gpu/tasks/relu_large --reference --seeds 1 --reps 20 \
      --option cuda_timing_mode=sync 2>&1 | grep '^"' | grep gpu__time_duration
  } > "$OUT/fidelity.log" 2>&1
  # The same references under triton.testing.do_bench (events, memset flush), in PyTorch's python.
  LD_LIBRARY_PATH=$ORIG_LD timeout -s KILL 120 python3 backends/cuda/bench/suite_do_bench.py sdk/include \
    $(for t in ${FID_TASKS:-gelu rowsum softmax transpose sgemm bf16_gemm rmsnorm stencil2d}; do echo configs/tasks/$t; done) \
    > "$OUT/do_bench.jsonl" 2> "$OUT/do_bench.err"
  export S
  bash tools/gpu/fidelity_suite.sh "$OUT/fidelity_suite.jsonl" $(( $(left) - 20 )) ${FID_TASKS:-}
fi

# The KernelBench part may still compile: give it what is left, then stop it.
if [ -n "$KB" ]; then
  for _ in $(seq 1 "$(left)"); do kill -0 $KB 2>/dev/null || break; sleep 1; done
  kill -TERM $KB 2>/dev/null  # timeout passes it on to python
fi
# ---- summary
python3 - "$OUT" "$(elapsed)" <<'PY' > "$OUT/summary.json"
import json, os, re, statistics, sys
out, wall = sys.argv[1], int(sys.argv[2])
def read(n):
    try:
        return open(os.path.join(out, n), errors="replace").read()
    except OSError:
        return ""
def gtest(text):
    ok = re.findall(r"^\[       OK \] (\S+)", text, re.M)
    failed = sorted(set(re.findall(r"^\[  FAILED  \] (\S+?)(?:,| \(|$)", text, re.M)))
    skipped = sorted(set(re.findall(r"^\[  SKIPPED \] (\S+?)(?: \(|$)", text, re.M)))
    killed = re.findall(r"^--- exit (137|124)", text, re.M)
    return {"passed": ok, "failed": failed, "skipped": skipped, "parts_killed": len(killed)}
s = {"wall_s": wall, "cuda_tests": gtest(read("cuda_tests.log")),
     "cuda_hacks": gtest(read("cuda_hacks.log")), "cuda_daemon": gtest(read("cuda_daemon.log")),
     "cuda_kernelbench": gtest(read("cuda_kernelbench.log")),
     "hip": gtest(read("hip.log"))}
s["printed"] = [l for f in ("cuda_tests.log", "cuda_hacks.log", "cuda_daemon.log", "cuda_kernelbench.log", "hip.log") for l in read(f).splitlines()
                if re.match(r"^(daemon|device|roofline|relu|10 rep|\w+ mode( asked)?:|hip on|rowsum|ncu profile|kernelbench|\S+\s+reference.hip)", l)]
s["fidelity_suite"] = [json.loads(l) for l in read("fidelity_suite.jsonl").splitlines() if l.startswith("{")]
s["do_bench"] = [{k: v for k, v in json.loads(l).items() if k != "medians_us"}
                 for l in read("do_bench.jsonl").splitlines() if l.startswith("{")]
try:
    s["bench_eval"] = json.load(open("/tmp/htam-bench-eval.json"))
except Exception as e:
    s["bench_eval"] = {"error": str(e)}
kb = [json.loads(l) for l in read("kernelbench.jsonl").splitlines() if l.startswith("{")]
s["kernelbench"] = kb
ours = s["bench_eval"].get("candidates_per_min")
if kb and ours:
    theirs = statistics.median(k["candidates_per_min"] for k in kb)
    s["throughput_ratio_vs_kernelbench"] = ours / theirs
fid = read("fidelity.log")
s["fidelity"] = {"htam": [json.loads(l) for l in fid.splitlines() if l.startswith("{")],
                 "ncu_gpu_time_ns": [l.split('","')[-1].strip('"').replace(",", "") for l in fid.splitlines() if "gpu__time_duration" in l][:40]}
for j in s["fidelity"]["htam"]:
    for k in list(j):
        if k not in ("mode", "status", "median_us", "spread_us", "repetitions", "sm_clock_mhz", "mem_clock_mhz"):
            del j[k]
print(json.dumps(s, indent=1))
PY
python3 -c "
import json; s = json.load(open('$OUT/summary.json'))
for k in ('cuda_tests', 'cuda_hacks', 'cuda_daemon', 'cuda_kernelbench', 'hip'):
    print('%-10s passed %3d failed %d skipped %d killed %d %s' % (k, len(s[k]['passed']), len(s[k]['failed']), len(s[k]['skipped']), s[k]['parts_killed'], ' '.join(s[k]['failed'])))
b = s['bench_eval']; print('bench eval:', b.get('candidates'), 'candidates', b.get('ok'), 'Ok,', '%.1f/min' % b.get('candidates_per_min', 0), 'skipped', b.get('skipped'))
for k in s['kernelbench']: print('kernelbench %s: compile %.1f s total %.1f s = %.2f/min' % (k['kernel'], k['compile_s'], k['total_s'], k['candidates_per_min']))
print('ratio vs kernelbench:', s.get('throughput_ratio_vs_kernelbench'))
for f in s['fidelity_suite']: print('fidelity', f)
for f in s['do_bench']: print('do_bench', f)
print('wall', s['wall_s'], 's')
"
