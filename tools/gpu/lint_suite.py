#!/usr/bin/env python3
"""Static checks of the CUDA task suite (configs/tasks/*/ with a cuda lineage); no GPU needed.

Checks, for every task: task.json has the contract's fields; every shape binds every dim;
held-out shapes differ from the seen ones; dtypes, init distributions and tolerances are valid;
FLOPs and bytes are arithmetic over the dims; the reference files exist. For every lineage:
the task name and backend; unique ids; parents that exist and come earlier; directions from
configs/seed_taxonomy.json; expected outcomes from the allowed set; existing variant files; at
least 5 variants with at least one improvement and one dead end; measured outcomes that agree
with expected; no held-out dimension value named in summaries, changes, measured notes or variant
comments (values of 100 and more). With --compile every reference and variant is compiled with nvcc (and g++ for
reference.cpp) and a variant compiles exactly when its expected outcome is not compile_error.

Usage: lint_suite.py [--tasks configs/tasks] [--compile] [--jobs 2]   (exit 1 on any problem)
"""
import argparse
import concurrent.futures as cf
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DTYPES = {"f32", "f16", "bf16", "f64", "i32", "i64", "u8", "i8", "bool"}
DISTS = {"normal": ("mean", "std"), "uniform": ("low", "high"), "randint": ("low", "high")}
EXPECTED = {"ok", "slower", "incorrect", "compile_error", "crash", "timeout", "nondeterministic"}
FAILED = EXPECTED - {"ok", "slower"}


def held_values(task):
    """Held-out dim values worth looking for: small numbers (33, 7) are too common in code."""
    seen = {v for s in task["shapes"]["seen"] for v in s.values()}
    return {v for s in task["shapes"]["held_out"] for v in s.values() if v >= 100} - seen


def mentions(text, values):
    return [v for v in values if re.search(r"(?<![\d.])%d(?![\d.])" % v, text)]


def lint_task(d, name, directions, problems):
    def bad(msg):
        problems.append("%s: %s" % (name, msg))

    try:
        with open(os.path.join(d, "task.json")) as f:
            task = json.load(f)
        with open(os.path.join(d, "lineage.json")) as f:
            lin = json.load(f)
    except (OSError, ValueError) as e:
        bad("cannot read: %s" % e)
        return None, None
    for k in ("name", "category", "description", "dims", "inputs", "outputs", "shapes",
              "tolerance", "flops", "bytes", "references", "lineage"):
        if k not in task:
            bad("task.json lacks %s" % k)
    if task.get("name") != name:
        bad("task.json name %r differs from its folder" % task.get("name"))
    dims = task.get("dims", [])
    for io in task.get("inputs", []) + task.get("outputs", []):
        if io.get("dtype") not in DTYPES:
            bad("%s: dtype %r" % (io.get("name"), io.get("dtype")))
        for s in io.get("shape", []):
            if isinstance(s, str) and s not in dims:
                bad("%s: shape names unknown dim %s" % (io.get("name"), s))
    for io in task.get("inputs", []):
        init = io.get("init", {})
        dist = init.get("dist")
        if dist not in DISTS:
            bad("%s: init dist %r" % (io["name"], dist))
        elif any(k not in init for k in DISTS[dist]):
            bad("%s: init %s needs %s" % (io["name"], dist, DISTS[dist]))
        if init.get("special") and not 0 < init.get("special_fraction", 0.001) < 1:
            bad("%s: special_fraction out of (0, 1)" % io["name"])
    shapes = task.get("shapes", {})
    seen, held = shapes.get("seen", []), shapes.get("held_out", [])
    if not seen or not held:
        bad("needs seen and held-out shapes")
    for s in seen + held:
        if set(s) != set(dims):
            bad("shape %s does not bind exactly the dims %s" % (s, dims))
    if any(h in seen for h in held):
        bad("a held-out shape is also seen")
    tol = task.get("tolerance", {})
    for k in ("rtol", "atol", "bad_budget"):
        if not isinstance(tol.get(k), (int, float)) or tol[k] < 0:
            bad("tolerance %s missing or negative" % k)
    for k in ("flops", "bytes"):
        expr = str(task.get(k, ""))
        names = set(re.findall(r"[A-Za-z_]\w*", expr))
        if not re.fullmatch(r"[\w\s+\-*/().]*", expr) or names - set(dims):
            bad("%s expression %r uses more than + - * / ( ) numbers and dims" % (k, expr))
        else:
            try:
                eval(expr, {"__builtins__": {}}, {n: 7 for n in dims})  # noqa: S307 - checked above
            except Exception as e:  # noqa: BLE001
                bad("%s expression %r does not evaluate: %s" % (k, expr, e))
    for lang, f in task.get("references", {}).items():
        if not os.path.isfile(os.path.join(d, f)):
            bad("reference %s (%s) missing" % (f, lang))

    if lin.get("task") != name or lin.get("backend") != "cuda":
        bad("lineage task/backend %r/%r" % (lin.get("task"), lin.get("backend")))
    variants = lin.get("variants", [])
    if len(variants) < 5:
        bad("only %d variants" % len(variants))
    ids = set()
    good = dead = 0
    hv = held_values(task)
    for v in variants:
        vid = v.get("id")
        where = "variant %s" % vid
        if vid in ids or vid == "reference":
            bad("%s: duplicate or reserved id" % where)
        if v.get("parent") != "reference" and v.get("parent") not in ids:
            bad("%s: parent %r is not an earlier variant" % (where, v.get("parent")))
        ids.add(vid)
        if v.get("direction") not in directions:
            bad("%s: direction %r not in the seed taxonomy" % (where, v.get("direction")))
        if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", str(v.get("strategy", ""))):
            bad("%s: strategy %r is not a slug" % (where, v.get("strategy")))
        for k in ("summary", "changed", "file"):
            if not v.get(k):
                bad("%s: %s empty" % (where, k))
        exp = v.get("expected")
        if exp not in EXPECTED:
            bad("%s: expected %r" % (where, exp))
        good += exp == "ok"
        dead += exp in FAILED or exp == "slower"
        src = os.path.join(d, v.get("file", ""))
        if not os.path.isfile(src):
            bad("%s: file %s missing" % (where, v.get("file")))
        else:
            comments = "\n".join(l for l in open(src) if l.lstrip().startswith("//"))
            if mentions(comments, hv):
                bad("%s: source comments name held-out dims %s" % (where, mentions(comments, hv)))
        text = " ".join([v.get("summary", ""), v.get("changed", ""),
                         json.dumps({k: x for k, x in (v.get("measured") or {}).items()
                                     if k in ("check_failure", "pipeline")})])
        if mentions(text, hv):
            bad("%s: lineage text names held-out dims %s" % (where, mentions(text, hv)))
        m = v.get("measured")
        if not m:
            bad("%s: not measured" % where)
            continue
        st = m.get("status")
        outcome = "slower" if st == "ok" and m.get("vs_parent") == "slower" else st
        if outcome != exp:
            bad("%s: expected %s but measured %s" % (where, exp, outcome))
        for k in ("device", "sm_clock_mhz", "mem_clock_mhz", "tool"):
            if k not in m and not (st == "compile_error" and "clock" in k):
                bad("%s: measured lacks %s" % (where, k))
        if st not in ("compile_error",) and "median_us" not in m:
            bad("%s: measured lacks median_us" % where)
        for row in m.get("per_shape", []):
            if row.get("set") == "held_out" and "dims" in row:
                bad("%s: a held-out per-shape row names its dims" % where)
    if not good or not dead:
        bad("a lineage needs improvements and dead ends (ok: %d, dead ends: %d)" % (good, dead))
    return task, lin


def compile_job(job):
    src, lang, sdk = job
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "k.so")
        if lang == "cpp":
            cmd = ["g++", "-O1", "-std=c++17", "-shared", "-fPIC", "-I", sdk, "-o", out, src]
        else:
            cmd = ["nvcc", "-arch=sm_90", "-O1", "-std=c++17", "-shared", "-Xcompiler", "-fPIC",
                   "-I", sdk, "-o", out, src]
        p = subprocess.run(cmd, capture_output=True, text=True)
        return src, p.returncode == 0, (p.stdout + p.stderr)[-600:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default=os.path.join(ROOT, "configs", "tasks"))
    ap.add_argument("--taxonomy", default=os.path.join(ROOT, "configs", "seed_taxonomy.json"))
    ap.add_argument("--sdk", default=os.path.join(ROOT, "sdk", "include"))
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    with open(args.taxonomy) as f:
        directions = {d.get("name") or d.get("slug") for d in json.load(f)["directions"]}
    problems = []
    jobs, want = [], {}
    count = 0
    for name in sorted(os.listdir(args.tasks)):
        d = os.path.join(args.tasks, name)
        lp = os.path.join(d, "lineage.json")
        if not os.path.isfile(lp):
            continue
        with open(lp) as f:
            if json.load(f).get("backend") != "cuda":
                continue
        count += 1
        task, lin = lint_task(d, name, directions, problems)
        if not (args.compile and task and lin):
            continue
        for lang, f in task["references"].items():
            if lang in ("cuda", "cpu"):
                src = os.path.join(d, f)
                jobs.append((src, "cpp" if lang == "cpu" else "cu", args.sdk))
                want[src] = True
        for v in lin["variants"]:
            src = os.path.join(d, v["file"])
            jobs.append((src, "cu", args.sdk))
            want[src] = v.get("expected") != "compile_error"
    if jobs:
        with cf.ThreadPoolExecutor(max_workers=args.jobs) as ex:
            for src, ok, log in ex.map(compile_job, jobs):
                if ok != want[src]:
                    problems.append("%s: %s but expected %s\n%s" % (
                        os.path.relpath(src, args.tasks), "compiles" if ok else "does not compile",
                        "to compile" if want[src] else "a compile error", log))
    for p in problems:
        print("PROBLEM", p)
    print("%d CUDA tasks checked%s: %d problem(s)" % (
        count, " and %d sources compiled" % len(jobs) if jobs else "", len(problems)))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
