#!/usr/bin/env bash
# Evaluates CUDA tasks' references and lineage variants through the project's own pipeline
# (htam-eval-cli: the CUDA backend plugin and the verification gate the daemon's workers use) and
# appends JSON lines to OUT_DIR/evalcli.jsonl. Usage (repository root, GPU machine):
#   tools/gpu/run_eval_cli.sh BIN_DIR OUT_DIR TIMEOUT_S SEEDS [task[:ids] ...]
# BIN_DIR holds htam-eval-cli and libhtam_backend_cuda.so. "task" evaluates the reference and all
# variants; "task:v4,v5" only those variants; "task:reference" only the reference. The reference
# is run in its own invocation: with several sources the compile pool runs nvcc while the first
# candidate executes, which the gate's child-process check would blame on that candidate.
set -u
bin=$1; out=$2; per=$3; seeds=$4; shift 4
specs=("$@")
[ ${#specs[@]} -eq 0 ] && specs=(gelu rowsum softmax rmsnorm transpose stencil2d sgemm bf16_gemm scan gemm_bias_gelu)
mkdir -p "$out"
cli() {
  timeout -k 5 "$per" "$bin/htam-eval-cli" --plugin "$bin/libhtam_backend_cuda.so" --seeds "$seeds" \
      --compile-threads 8 "$@" >> "$out/evalcli.jsonl" 2>> "$out/evalcli.log"
  echo "   exit $?" | tee -a "$out/evalcli.log"
}
for spec in "${specs[@]}"; do
  t=${spec%%:*}; ids=""; [ "$spec" != "$t" ] && ids=${spec#*:}
  d=configs/tasks/$t
  echo "== $spec $(date +%T)" | tee -a "$out/evalcli.log"
  if [ -z "$ids" ] || [[ ",$ids," == *",reference,"* ]]; then cli --task "$d" --reference; fi
  srcs=()
  for f in $(python3 -c "
import json, sys
ids = set(x for x in sys.argv[1].split(',') if x)
print(' '.join(v['file'] for v in json.load(open('$d/lineage.json'))['variants'] if not ids or v['id'] in ids))" "$ids"); do
    srcs+=(--source "$d/$f")
  done
  [ ${#srcs[@]} -gt 0 ] && cli --task "$d" "${srcs[@]}"
done
