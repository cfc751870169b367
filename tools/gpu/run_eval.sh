#!/usr/bin/env bash
# Evaluates CUDA tasks' references and lineage variants through the project's own pipeline
# (htam-eval: the evaluator, sandboxed workers and verification gate htamd uses) and appends JSON
# lines to OUT_DIR/eval.jsonl. Usage (repository root, GPU machine):
#   tools/gpu/run_eval.sh BIN_DIR OUT_DIR TIMEOUT_S SEEDS [task[:ids] ...]
# BIN_DIR holds htam-eval, htam-eval-worker and libhtam_backend_cuda.so. "task" evaluates the
# reference and all variants; "task:v4,v5" only those variants; "task:reference" only the
# reference. The variants of a task are queued at once (compiled ahead while others run).
set -u
bin=$1; out=$2; per=$3; seeds=$4; shift 4
specs=("$@")
[ ${#specs[@]} -eq 0 ] &&
  specs=(gelu rowsum softmax rmsnorm transpose stencil2d sgemm bf16_gemm scan gemm_bias_gelu)
mkdir -p "$out"
cli() {
  timeout -k 5 "$per" "$bin/htam-eval" --plugin "$bin/libhtam_backend_cuda.so" --seeds "$seeds" \
      --compile-threads 8 "$@" >> "$out/eval.jsonl" 2>> "$out/eval.log"
  echo "   exit $?" | tee -a "$out/eval.log"
}
for spec in "${specs[@]}"; do
  t=${spec%%:*}; ids=""; [ "$spec" != "$t" ] && ids=${spec#*:}
  d=configs/tasks/$t
  echo "== $spec $(date +%T)" | tee -a "$out/eval.log"
  if [ -z "$ids" ] || [[ ",$ids," == *",reference,"* ]]; then cli --task "$d" --reference; fi
  srcs=()
  for f in $(python3 -c "
import json, sys
ids = set(x for x in sys.argv[1].split(',') if x)
print(' '.join(v['file'] for v in json.load(open('$d/lineage.json'))['variants']
               if not ids or v['id'] in ids))" "$ids"); do
    srcs+=(--source "$d/$f")
  done
  [ ${#srcs[@]} -gt 0 ] && cli --task "$d" --queue "${srcs[@]}"
done
