#!/usr/bin/env python3
"""Record htam-eval results (JSON lines from tools/gpu/run_eval.sh) in the lineages.

For every variant whose source appears in the JSON lines, measured.pipeline = {tool, status
(OutcomeStatus as a slug), median_us, speedup, baseline_us, sm_clock_mhz, mem_clock_mhz,
repetitions, diagnostics for failures}. The gate reports one timing (its first seen shape) with
the reference timed in the same worker. Prints the variants where the pipeline's status
disagrees with measured.status (from check_lineages.py) or the two timings differ by more
than 10%.

Usage: fill_pipeline.py EVAL_JSONL [...] [--tasks configs/tasks] [--tool NAME]
(--tool htam-eval-cli for the files measured before htam-eval replaced it.)
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from fill_measured import write_lineage  # noqa: E402


def slug(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl", nargs="+")
    ap.add_argument("--tasks", default=os.path.join(ROOT, "configs", "tasks"))
    ap.add_argument("--tool", default="htam-eval", help="the tool the files came from")
    args = ap.parse_args()
    by_source = {}
    refs = {}
    for path in args.jsonl:
        for line in open(path):
            line = line.strip()
            if not line.startswith("{"):
                continue
            j = json.loads(line)
            if j["source"] == "reference":
                refs[j["task"]] = j
            else:
                by_source[os.path.normpath(j["source"])] = j
    for name in sorted(os.listdir(args.tasks)):
        lp = os.path.join(args.tasks, name, "lineage.json")
        if not os.path.isfile(lp):
            continue
        with open(lp) as f:
            lin = json.load(f)
        if lin.get("backend") != "cuda":
            continue
        touched = False
        for v in lin["variants"]:
            key = os.path.normpath(os.path.join("configs/tasks", name, v["file"]))
            j = by_source.get(key)
            if not j:
                continue
            p = {"tool": args.tool, "status": slug(j["status"])}
            if j.get("median_us"):
                p.update({"median_us": round(j["median_us"], 2),
                          "baseline_us": round(j["baseline_us"], 2),
                          "speedup": round(j["speedup"], 3),
                          "spread_us": round(j.get("spread_us", 0.0), 2),
                          "repetitions": j.get("repetitions"),
                          "sm_clock_mhz": j.get("sm_clock_mhz"),
                          "mem_clock_mhz": j.get("mem_clock_mhz")})
            if p["status"] != "ok":
                p["diagnostics"] = (j.get("diagnostics") or "")[:300]
            m = v.setdefault("measured", {})
            note = (m.get("pipeline") or {}).get("note")
            if note:  # hand-written explanations survive a refill
                p["note"] = note
            m["pipeline"] = p
            touched = True
            mine = m.get("status")
            if mine != p["status"]:
                print("%s %s: check_lineages %s, pipeline %s" % (name, v["id"], mine, p["status"]))
            elif p.get("median_us") and m.get("median_us"):
                r = p["median_us"] / m["median_us"]
                if abs(r - 1) > 0.10:
                    print("%s %s: timings differ: %.1f vs %.1f us" % (
                        name, v["id"], p["median_us"], m["median_us"]))
        if touched:
            write_lineage(lp, lin)
        if name in refs:
            r = refs[name]
            print("%-15s reference through the pipeline: %s %.1f us" % (
                name, r["status"], r.get("median_us", 0.0)))


if __name__ == "__main__":
    main()
