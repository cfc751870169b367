#!/usr/bin/env python3
"""Write measured outcomes from check_lineages.py (results.json) into the lineage.json files.

For every variant: measured = {device, sm_clock_mhz, mem_clock_mhz, shape (the first seen
shape), median_us, iqr_us, reps, speedup (over the reference on that shape),
speedup_all_shapes (geometric mean over seen and held-out shapes), speedup_vs_parent (geometric
mean over all shapes), per_shape [...], status, tool}.
status is the outcome class (OutcomeStatus slugs: ok, incorrect, nondeterministic,
compile_error, crash, timeout); a correct variant more than --slower-margin slower than its parent
over all shapes keeps status "ok" and gets "vs_parent": "slower" (its "expected" should say
"slower": a dead end). Held-out shapes are never named: their per-shape rows and failure
messages carry only their index, so that nothing an agent may read reveals them.
Prints every variant whose measured outcome differs from its "expected"; with --set-expected the
expected field is set to the measured outcome (do that only after reading why they differ).

Several results files (runs of the same tree) may be given: per task, variant and shape the
repetition loop with the smallest relative spread (IQR / median) is kept, speedups are recomputed
from the kept times, and a variant whose status differs between runs is reported (the first
non-ok status wins). A kept time whose IQR exceeds 10% of its median is marked "noisy".

Usage: fill_measured.py RESULTS_JSON [RESULTS_JSON ...] [--tasks configs/tasks] [--set-expected]
"""
import argparse
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def _stable(entries):
    """The timing entry with the smallest relative spread."""
    entries = [e for e in entries if e.get("median_us")]
    if not entries:
        return None
    return min(entries, key=lambda e: e.get("iqr_us", 0.0) / e["median_us"])


def merge_records(recs):
    recs = [r for r in recs if r]
    if not recs:
        return None
    out = dict(recs[0])
    statuses = [r["status"] for r in recs]
    bad = [x for x in statuses if x != "ok"]
    out["status"] = bad[0] if bad else "ok"
    if len(set(statuses)) > 1:
        out["status_disagreement"] = statuses
        for r in recs:
            if r["status"] == out["status"]:
                out["checks"] = r.get("checks", [])
                break
    shapes = []
    for r in recs:
        for t in r.get("times", []):
            k = json.dumps(t["dims"], sort_keys=True)
            if k not in shapes:
                shapes.append(k)
    times = []
    for k in shapes:
        e = _stable([t for r in recs for t in r.get("times", [])
                     if json.dumps(t["dims"], sort_keys=True) == k])
        if e:
            times.append(dict(e))
    out["times"] = times
    return out


def merge_runs(runs):
    res = {"device": runs[0].get("device", ""), "tasks": {}}
    names = sorted(set(n for r in runs for n in r["tasks"]))
    for name in names:
        trs = [r["tasks"][name] for r in runs if name in r["tasks"]]
        ref = merge_records([t.get("reference") for t in trs])
        tres = {"reference": ref or {}, "variants": {}}
        ids = sorted(set(i for t in trs for i in t["variants"]))
        for vid in ids:
            rec = merge_records([t["variants"].get(vid) for t in trs])
            if rec.get("status_disagreement"):
                print("%s %s: status differs between runs: %s" % (
                    name, vid, rec["status_disagreement"]))
            # speedups from the kept reference times
            rt = times_by_shape(tres["reference"])
            for t in rec.get("times", []):
                k = json.dumps(t["dims"], sort_keys=True)
                if k in rt and t.get("median_us"):
                    t["ref_median_us"] = rt[k]
                    t["speedup"] = rt[k] / t["median_us"]
            tres["variants"][vid] = rec
        res["tasks"][name] = tres
    return res


def times_by_shape(rec):
    return {json.dumps(t["dims"], sort_keys=True): t["median_us"]
            for t in rec.get("times", []) if t.get("median_us")}


def _fmt_variant(v):
    out = []
    for k, val in v.items():
        if k == "measured" and isinstance(val, dict):
            inner = []
            for mk, mv in val.items():
                if mk == "per_shape" and isinstance(mv, list):
                    rows = ",\n".join("       " + json.dumps(r) for r in mv)
                    inner.append('     "per_shape": [\n%s]' % rows)
                else:
                    inner.append("     %s: %s" % (json.dumps(mk), json.dumps(mv)))
            out.append('   "measured": {\n%s}' % ",\n".join(inner))
        else:
            out.append("   %s: %s" % (json.dumps(k), json.dumps(val)))
    return "  {\n" + ",\n".join(out) + "}"


def write_lineage(path, lineage):
    """One variant per block, one field per line, keys in their order: readable diffs."""
    head = '{"task": %s, "backend": %s, "variants": [\n' % (
        json.dumps(lineage["task"]), json.dumps(lineage["backend"]))
    body = ",\n".join(_fmt_variant(v) for v in lineage["variants"])
    with open(path, "w") as f:
        f.write(head + body + "\n]}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--tasks", default=os.path.join(ROOT, "configs", "tasks"))
    ap.add_argument("--set-expected", action="store_true")
    ap.add_argument("--slower-margin", type=float, default=0.03)
    ap.add_argument("--tool", default="check_lineages.py")
    args = ap.parse_args()
    runs = []
    for path in args.results:
        with open(path) as f:
            runs.append(json.load(f))
    res = merge_runs(runs)
    device = res.get("device", "").split(",")[0].strip()
    for name, tres in sorted(res["tasks"].items()):
        lp = os.path.join(args.tasks, name, "lineage.json")
        with open(lp) as f:
            lineage = json.load(f)
        with open(os.path.join(args.tasks, name, "task.json")) as f:
            held_shapes = json.load(f)["shapes"]["held_out"]
        ref_rec = tres.get("reference", {})
        shape_t = {"reference": times_by_shape(ref_rec)}
        for vid, rec in tres["variants"].items():
            shape_t[vid] = times_by_shape(rec)
        for v in lineage["variants"]:
            rec = tres["variants"].get(v["id"])
            if rec is None:
                continue
            st = rec["status"]
            m = {"device": device, "status": st, "tool": args.tool}
            times = [t for t in rec.get("times", []) if t.get("median_us")]
            if times:
                prim = times[0]
                sms = sorted(t["sm_clock_mhz"] for t in times if t.get("sm_clock_mhz"))
                mems = sorted(t["mem_clock_mhz"] for t in times if t.get("mem_clock_mhz"))
                m["sm_clock_mhz"] = sms[len(sms) // 2] if sms else 0
                m["mem_clock_mhz"] = mems[len(mems) // 2] if mems else 0
                m["shape"] = prim["dims"]
                m["median_us"] = round(prim["median_us"], 2)
                m["iqr_us"] = round(prim.get("iqr_us", 0.0), 2)
                m["reps"] = prim.get("reps")
                if prim.get("speedup"):
                    m["speedup"] = round(prim["speedup"], 3)
                sp = geomean([t.get("speedup") for t in times])
                if sp:
                    m["speedup_all_shapes"] = round(sp, 3)
                parent = shape_t.get(v.get("parent", "reference"), {})
                mine = shape_t.get(v["id"], {})
                rp = geomean([parent[k] / mine[k] for k in mine if k in parent])
                if rp:
                    m["speedup_vs_parent"] = round(rp, 3)
                    pid = v.get("parent", "reference")
                    pst = "ok" if pid == "reference" else tres["variants"].get(pid, {}).get("status")
                    if st == "ok" and pst == "ok" and rp < 1.0 - args.slower_margin:
                        m["vs_parent"] = "slower"
                m["per_shape"] = []
                held = 0
                for t in times:
                    row = {"set": t["set"]}
                    if t["set"] == "seen":
                        row["dims"] = t["dims"]
                    else:
                        row["index"] = held
                        held += 1
                    row["median_us"] = round(t["median_us"], 2)
                    if t.get("iqr_us", 0.0) > 0.1 * t["median_us"]:
                        row["noisy"] = True
                    if st == "ok":
                        row["speedup"] = round(t["speedup"], 3) if t.get("speedup") else None
                    m["per_shape"].append(row)
                if st != "ok":  # the time of a wrong answer is no gain: no speedups
                    for k in ("speedup", "speedup_all_shapes", "speedup_vs_parent", "vs_parent"):
                        m.pop(k, None)
            if rec.get("checks"):
                last = rec["checks"][-1]
                if last.get("error"):
                    if last.get("set") == "seen":
                        where = "seen shape %s" % json.dumps(last.get("dims"), sort_keys=True)
                    else:
                        held = [json.dumps(s, sort_keys=True) for s in held_shapes]
                        key = json.dumps(last.get("dims"), sort_keys=True)
                        where = "held-out shape #%d" % (held.index(key) if key in held else -1)
                    m["check_failure"] = "%s: %s" % (where, last["error"])
            if st == "compile_error" and rec.get("compile_log"):
                errs = [l.strip() for l in rec["compile_log"].splitlines() if "error" in l]
                m["compile_error"] = errs[0][-300:] if errs else rec["compile_log"][-300:]
            if (v.get("measured") or {}).get("pipeline"):  # kept: written by fill_pipeline.py
                m["pipeline"] = v["measured"]["pipeline"]
            v["measured"] = m
            outcome = m.get("vs_parent", m["status"])
            if v.get("expected") != outcome:
                print("%s %s: expected %s, measured %s (vs parent %s)" % (
                    name, v["id"], v.get("expected"), outcome, m.get("speedup_vs_parent")))
                if args.set_expected:
                    v["expected"] = outcome
        write_lineage(lp, lineage)
        r = ref_rec
        print("%-15s reference %s; cpu cross-check %s" % (
            name, r.get("status"), r.get("cpu_crosscheck", {}).get("status")))


if __name__ == "__main__":
    main()
