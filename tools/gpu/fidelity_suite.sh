#!/bin/bash
# Timing fidelity over the task suite, on the GPU machine (called by tools/gpu/one_run.sh, which
# sets PATH, LD_LIBRARY_PATH and S=.gpu-stage). For every single-kernel reference of the suite:
#   htam: ten measurements (the reference evaluated 10 times in one htam-eval run, cupti
#         mode, 30 repetitions each): median of the medians and the CV of the ten medians;
#   ncu:  the same binary under `ncu --clock-control none --metrics gpu__time_duration.sum,
#         launch__grid_size` (caches flushed before every kernel, ncu's default): the median
#         duration of the reference kernel's launches at the timed shape (the most frequent grid).
# Prints one JSON line per task: task, kernel, htam_median_us, cv_pct, ncu_median_us, ncu_launches,
# diff_pct (htam over ncu, percent).
# NCU_CACHE=none runs ncu with --cache-control none (the kernel then starts from the cache state
# our flush left, not from ncu's flush-and-invalidate): a difference between the two runs is the
# cache state, not the clock.
#   usage: fidelity_suite.sh OUT_FILE LIMIT_S [TASK ...]
set -u
OUTF=$1 LIMIT=$2; shift 2
TASKS=${*:-"gelu rowsum softmax transpose sgemm bf16_gemm rmsnorm stencil2d"}
T0=$(date +%s)
TMP=$(mktemp -d)
for t in $TASKS; do
  left=$(( LIMIT - ($(date +%s) - T0) ))
  [ "$left" -lt 25 ] && { echo "{\"task\":\"$t\",\"skipped\":\"no time left\"}" >> "$OUTF"; continue; }
  dir=configs/tasks/$t
  [ -d "$dir" ] || dir=tests/gpu/tasks/$t
  kern=$(grep -ho '__global__[^(]*' "$dir/reference.cu" | awk '{print $NF}' | head -1)
  src=""; for _ in 1 2 3 4 5 6 7 8 9; do src="$src --source $dir/reference.cu"; done
  timeout -s KILL $(( left / 2 )) "$S/htam-eval" --task "$dir" --reference $src --seeds 1 --reps 30 \
    > "$TMP/$t.htam" 2> "$TMP/$t.err"
  left=$(( LIMIT - ($(date +%s) - T0) ))
  timeout -s KILL $(( left > 60 ? 60 : left )) ncu --clock-control none --cache-control "${NCU_CACHE:-all}" \
    --metrics gpu__time_duration.sum,launch__grid_size --kernel-name "$kern" --csv \
    "$S/htam-eval" --in-process --task "$dir" --reference --seeds 1 --reps 20 > "$TMP/$t.ncu" 2>&1
  python3 - "$t" "$kern" "$TMP/$t.htam" "$TMP/$t.ncu" >> "$OUTF" <<'PY'
import csv, json, os, statistics, sys
task, kern, hf, nf = sys.argv[1:5]
out = {"task": task, "kernel": kern, "ncu_cache_control": os.environ.get("NCU_CACHE", "all")}
meds = []
for l in open(hf, errors="replace"):
    if l.startswith("{"):
        j = json.loads(l)
        if j.get("status") == "Ok" and j.get("median_us", 0) > 0:
            meds.append(j["median_us"])
            out.setdefault("sm_clock_mhz", j.get("sm_clock_mhz"))
if meds:
    m = statistics.mean(meds)
    out.update(htam_median_us=statistics.median(meds), measurements=len(meds),
               cv_pct=100 * statistics.pstdev(meds) / m if m else None)
rows = [r for r in csv.reader(l for l in open(nf, errors="replace") if l.startswith('"'))]
if rows:
    hdr, body = rows[0], rows[1:]
    try:
        i_id, i_m, i_v, i_u = (hdr.index(k) for k in ("ID", "Metric Name", "Metric Value", "Metric Unit"))
        by = {}
        for r in body:
            by.setdefault(r[i_id], {})[r[i_m]] = (r[i_v].replace(",", ""), r[i_u])
        grids = [v["launch__grid_size"][0] for v in by.values() if "launch__grid_size" in v]
        mode = statistics.mode(grids) if grids else None
        scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "ns": 1e-3, "us": 1.0, "ms": 1e3}
        d = [float(v["gpu__time_duration.sum"][0]) * scale.get(v["gpu__time_duration.sum"][1], 1e-3)
             for v in by.values() if v.get("launch__grid_size", [None])[0] == mode and "gpu__time_duration.sum" in v]
        if d:
            out.update(ncu_median_us=statistics.median(d), ncu_launches=len(d), ncu_grid=mode)
    except (ValueError, KeyError) as e:
        out["ncu_error"] = str(e)
else:
    out["ncu_error"] = " ".join(open(nf, errors="replace").read().split()[-30:])
if out.get("htam_median_us") and out.get("ncu_median_us"):
    out["diff_pct"] = 100 * (out["htam_median_us"] / out["ncu_median_us"] - 1)
print(json.dumps(out))
PY
  tail -1 "$OUTF"
done
rm -rf "$TMP"
