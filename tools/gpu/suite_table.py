#!/usr/bin/env python3
"""Print the task suite as a Markdown table from configs/tasks/*/task.json + lineage.json (cuda).

One row per task: category, seen shapes, FLOPs and bytes expressions, variant counts by measured
outcome, the best correct variant and its measured speedup over the reference (first seen
shape, and geometric mean over all shapes). Used to keep configs/tasks/README.md current.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = os.path.abspath(os.path.join(HERE, "..", "..", "configs", "tasks"))


def main():
    tasks_dir = sys.argv[1] if len(sys.argv) > 1 else TASKS
    print("| task | category | seen shapes | FLOPs | bytes | variants (ok / slower / dead) "
          "| best variant | speedup (1st seen shape) | speedup (all shapes, geomean) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in sorted(os.listdir(tasks_dir)):
        lp = os.path.join(tasks_dir, name, "lineage.json")
        tp = os.path.join(tasks_dir, name, "task.json")
        if not (os.path.isfile(lp) and os.path.isfile(tp)):
            continue
        with open(tp) as f:
            task = json.load(f)
        with open(lp) as f:
            lin = json.load(f)
        if lin.get("backend") != "cuda":
            continue
        seen = "; ".join("x".join(str(v) for v in s.values()) for s in task["shapes"]["seen"])
        ok = slower = dead = 0
        best = None
        for v in lin["variants"]:
            m = v.get("measured", {})
            st = m.get("status")
            if st == "ok" and m.get("vs_parent") == "slower":
                slower += 1
            elif st == "ok":
                ok += 1
            else:
                dead += 1
            if st == "ok" and m.get("speedup_all_shapes"):
                if best is None or m["speedup_all_shapes"] > best[1]["speedup_all_shapes"]:
                    best = (v, m)
        bcell = "-"
        s1 = sa = "-"
        if best:
            v, m = best
            bcell = "%s `%s`" % (v["id"], v["strategy"])
            s1 = "%.2fx" % m.get("speedup", 0)
            sa = "%.2fx" % m["speedup_all_shapes"]
        print("| %s | %s | %s | `%s` | `%s` | %d (%d / %d / %d) | %s | %s | %s |" % (
            name, task["category"], seen, task["flops"], task["bytes"], len(lin["variants"]),
            ok, slower, dead, bcell, s1, sa))


if __name__ == "__main__":
    main()
