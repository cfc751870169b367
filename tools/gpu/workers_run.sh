#!/bin/bash
# Remote-worker scaling on a GPU host with two or more GPUs, in one command from the repository
# root with .gpu-stage/ carried (tools/gpu/stage_all.sh): htam-bench workers with 1 and 2
# htam-worker processes, one GPU each (--gpu-per-worker), CUDA backend, the suite's references.
# Writes $OUT/workers.log and $OUT/workers.json (the benchmark's final JSON line).
#   usage: bash tools/gpu/workers_run.sh [JOBS] [ROUNDS]      (defaults 24 2)
set -u
ROOT=$PWD
OUT=${OUT:-/tmp/htam-gpu-out}
mkdir -p "$OUT"
S=$ROOT/.gpu-stage
JOBS=${1:-24} ROUNDS=${2:-2}
export PATH=/usr/local/cuda/bin:$PATH
LIBS=/tmp/htam-gpu-lib
mkdir -p $LIBS && tar -C $LIBS -xzf "$S/lib.tar.gz"
export LD_LIBRARY_PATH=$LIBS:/usr/local/cuda/lib64:/usr/local/cuda/lib:/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
chmod +x "$S"/htam* 2>/dev/null
# The workers' sandbox runs candidates as an unprivileged user: it reads the tree and the stage.
chmod -R a+rX "$ROOT" $LIBS 2>/dev/null
# The sandbox settings under which the CUDA runtime starts here (tools/gpu/workers_probe.sh).
if [ -z "${WORKER_ARGS+x}" ]; then
  bash "$ROOT/tools/gpu/workers_probe.sh" | tee "$OUT/probe.log"
  WORKER_ARGS=$(sed 's/(defaults)//' "$OUT/sandbox_args" 2>/dev/null)
  [ -s "$OUT/sandbox_args" ] || { echo "no sandbox setting lets the CUDA runtime start: see probe.log"; exit 1; }
fi
{ date -u; nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem --format=csv; nproc; } > "$OUT/workers.log" 2>&1
timeout -s KILL ${T_WORKERS:-500} "$S/htam-bench" workers --backend cuda --workers 1,2 --gpu-per-worker \
  --jobs "$JOBS" --rounds "$ROUNDS" --htamd "$S/htamd" --worker "$S/htam-worker" --timeout-s ${PHASE_S:-150} \
  --worker-args="--eval.sdk_include_dir $ROOT/sdk/include --eval.worker_path $S/htam-eval-worker --eval.plugin_dir $S ${WORKER_ARGS:-}" \
  >> "$OUT/workers.log" 2>&1
echo "exit $?" >> "$OUT/workers.log"
grep '^{' "$OUT/workers.log" | tail -1 > "$OUT/workers.json"
tail -30 "$OUT/workers.log"
# What the workers said, when something failed.
for f in /tmp/htam-bench-workers*/w*/worker.log /tmp/htam-bench-workers*/htamd.log; do
  [ -f "$f" ] && { echo "== $f"; tail -5 "$f"; }
done 2>/dev/null | tail -40
