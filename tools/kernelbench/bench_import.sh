#!/bin/bash
# Import benchmark of KernelBench-like problems (issue 17, "import that scales"): builds a tree of
# 250 problems from the samples of tests/kernelbench/problems (levels 1: 100, 2: 100, 3: 50, each
# sample repeated under a new number) and imports it with kb_helper.py import-many, one job per
# core. Prints the summary line, wall time, peak memory, the per-problem median and maximum, the
# probe kinds and the first errors.  Usage (repository root): bash tools/kernelbench/bench_import.sh
# PY=/path/to/python3 picks the interpreter (default python3 on PATH; here /usr/bin/python3).
set -u
PY=${PY:-python3}
T=$(mktemp -d); OUTD=$(mktemp -d)
for spec in 1:100 2:100 3:50; do
  L=${spec%%:*}; N=${spec##*:}; mkdir -p $T/level$L
  mapfile -t S < <(ls tests/kernelbench/problems/level$L/*.py)
  for ((n = 1; n <= N; n++)); do
    f=${S[$(( (n - 1) % ${#S[@]} ))]}; b=$(basename "$f"); cp "$f" "$T/level$L/${n}_${b#*_}"
  done
done
echo "problems: $(ls $T/level*/*.py | wc -l), cores $(nproc)"
t0=$(date +%s.%N)
"$PY" tools/kernelbench/kb_helper.py import-many "$OUTD/tasks" "$T" --jobs "$(nproc)" \
  > "$OUTD/import.jsonl" 2> "$OUTD/import.err"
rc=$?
echo "rc=$rc wall $("$PY" -c "print(round($(date +%s.%N) - $t0, 1))") s (the PyTorch import included)"
tail -1 "$OUTD/import.jsonl"; tail -3 "$OUTD/import.err"
"$PY" -c "
import json; rows=[json.loads(l) for l in open('$OUTD/import.jsonl') if l.startswith('{')]
p=[r for r in rows if 'task_dir' in r]; import statistics as st
print('per problem median %.2f s max %.2f s; probes:' % (st.median([r['seconds'] for r in p]), max(r['seconds'] for r in p)), {k: sum(1 for r in p if r.get('probe')==k) for k in set(r.get('probe') for r in p)})
print('errors:', [r.get('error','')[:100] for r in rows if 'error' in r][:5])"
rm -rf "$T" "$OUTD"
