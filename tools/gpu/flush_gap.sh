#!/bin/bash
# The flush-gap probe (backends/cuda/bench/flush_gap_probe.cu, built by tools/gpu/stage_all.sh into
# .gpu-stage/) alone (CUDA events) and under ncu (gpu__time_duration, caches as the probe left
# them, and ncu's own flush): does the time between htam's cache preparation and the kernel change
# a streaming kernel's duration? Writes $OUT/flush_gap.log.
set -u
S=$PWD/.gpu-stage; OUT=${OUT:-/tmp/htam-gpu-out}; mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
{
  echo "== events"; timeout -s KILL 60 "$S/flush_gap_probe"
  for cc in none all; do
    echo "== ncu --cache-control $cc (median gpu__time_duration of each variant's 30 timed launches)"
    timeout -s KILL 120 ncu --clock-control none --cache-control $cc --metrics gpu__time_duration.sum \
      --kernel-name regex:gelu_v --launch-skip 210 --csv "$S/flush_gap_probe" 2>&1 | grep '^"' > /tmp/fg.csv
    python3 - /tmp/fg.csv <<'PY'
import csv, re, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))
h, body = rows[0], rows[1:]
k, v, u = h.index("Kernel Name"), h.index("Metric Value"), h.index("Metric Unit")
by = {}
for r in body:
    m = re.search(r"gelu_v<(\d+)>", r[k])
    x = float(r[v].replace(",", "")) * (1e-3 if r[u].startswith("n") else 1.0)
    by.setdefault(m.group(1) if m else r[k], []).append(x)
for key in sorted(by):
    print("variant %s: ncu median %.2f us (n=%d)" % (key, statistics.median(by[key]), len(by[key])))
PY
  done
} > "$OUT/flush_gap.log" 2>&1
cat "$OUT/flush_gap.log"
