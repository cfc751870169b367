"""htam-bench world build | check: the measured table of the optimization world.

build: materializes every (family, shape) task and its knob variants (world_families), compiles
every distinct variant source ahead on all cores (htam-world-compile, into the cache the CUDA
plugin reads), then evaluates each task's variants through htam's real gate (htam-eval: the
evaluator, sandboxed workers and verification gate htamd uses) and appends one row per
(task, variant) to the table: compressed JSON Lines. It resumes where it stopped (rows already in
the table, or in its .partial file after an interruption, are not measured again) and stops
starting tasks after --time-limit seconds.

check: re-measures a fixed-seed sample of Ok rows, one evaluation at a time, and reports how many
agree with the table within timing noise.

A crash with a sticky CUDA error poisons the evaluating process, so after a Crash the remaining
variants of that task go to a fresh htam-eval process.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import gzip
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Tuple

from htam_agent.shipped import find_shared_file

from . import world_families as wf

DEFAULT_TABLE = find_shared_file("world/h100_table.jsonl.gz")
STATUSES = ("Ok", "Incorrect", "CompileError", "Crash", "Timeout")
KEEP = ("status", "median_us", "spread_us", "repetitions", "baseline_us", "speedup", "cases",
        "registers", "shared_bytes", "spill_bytes", "sm_clock_mhz", "mem_clock_mhz", "device",
        "arch", "compile_cached", "wall_ms")


# ------------------------------------------------------------------------------------ table

def read_table(path: str) -> List[dict]:
    """Rows of a table (.jsonl.gz or .jsonl) and of its .partial file, later rows winning."""
    rows: Dict[Tuple[str, str], dict] = {}
    for p in (path, path + ".partial"):
        if not os.path.exists(p):
            continue
        opener = gzip.open if p.endswith(".gz") else open
        with opener(p, "rt") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    if p.endswith(".partial"):
                        continue  # a line cut by an interruption
                    raise ValueError(f"{p}:{n}: not JSON")
                if "task" in r and "variant" in r:
                    rows[(r["task"], r["variant"])] = r
    return list(rows.values())


def write_table(path: str, rows: List[dict]) -> None:
    rows = sorted(rows, key=lambda r: (r["family"], r["task"], r["variant"]))
    tmp = path + ".tmp"
    with gzip.GzipFile(tmp, "wb", compresslevel=9, mtime=0) as g:
        for r in rows:
            g.write((json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n").encode())
    os.replace(tmp, path)
    part = path + ".partial"
    if os.path.exists(part):
        os.remove(part)


# ------------------------------------------------------------------------------------ build

class Builder:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.abspath(a.bin)
        self.work = os.path.abspath(a.work)
        self.cache = os.path.join(self.work, "cache")
        self.lock = threading.Lock()
        self.partial = None
        self.t0 = time.time()
        self.done = 0
        self.commit = a.commit or _git_commit()
        self.date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def plan(self, fams: List[wf.Family]) -> List[Tuple[wf.Family, wf.Shape, Dict[str, str], dict]]:
        """(family, shape, variant id -> source path, variant id -> knobs) per task."""
        out = []
        for fam in fams:
            space = fam.space()
            if self.a.max_variants:
                space = space[: self.a.max_variants]
            for sh in fam.shapes:
                if self.a.shapes and sh.id not in self.a.shapes:
                    continue
                d = os.path.join(self.work, "tasks", fam.task_name(sh))
                paths = wf.materialize(fam, sh, d, space)
                out.append((fam, sh, paths, {wf.variant_id(x): x for x in space}))
        return out

    def compile_all(self, plan) -> Dict[str, dict]:
        """Compiles every distinct CUDA source once, ahead (shapes of a family share sources).
        Sources of other backends are compiled by their runner on their turn: a CPU backend's
        compiles would share the cores its timings run on."""
        first: Dict[str, str] = {}
        for fam, sh, paths, _ in plan:
            if fam.backend != "cuda":
                continue
            for vid, p in paths.items():
                with open(p) as f:
                    first.setdefault(f.read(), p)
            ref = os.path.join(os.path.dirname(os.path.dirname(next(iter(paths.values())))),
                               "reference" + fam.ext)
            with open(ref) as f:
                first.setdefault(f.read(), ref)
        if not first:
            return {}
        lst = os.path.join(self.work, "compile_list.txt")
        with open(lst, "w") as f:
            f.write("\n".join(first.values()) + "\n")
        tool = self.tool("htam-world-compile", "tools/bench")
        t = time.time()
        r = subprocess.run([tool, "--cache", self.cache, "--list", lst, "--threads",
                            str(self.a.compile_threads), "--arch", self.a.arch],
                           capture_output=True, text=True)
        res = {}
        for line in r.stdout.splitlines():
            try:
                j = json.loads(line)
                res[j["source"]] = j
            except (json.JSONDecodeError, KeyError):
                pass
        bad = sum(1 for j in res.values() if not j.get("ok"))
        print(f"compiled {len(first)} distinct sources in {time.time() - t:.0f} s "
              f"({bad} did not compile){' ' + r.stderr.strip() if r.returncode else ''}",
              flush=True)
        return res

    def emit(self, row: dict) -> None:
        with self.lock:
            self.partial.write(json.dumps(row, sort_keys=True, separators=(",", ":")) + "\n")
            self.partial.flush()
            self.done += 1

    def tool(self, name: str, build_folder: str) -> str:
        """A binary of the bin folder (staged), else of the build tree that holds it: the bin
        folder is then <build>/backends/cuda and the tool is in <build>/<build_folder>."""
        path = os.path.join(self.bin, name)
        if not os.path.exists(path):
            path = os.path.join(self.bin, "..", "..", build_folder, name)
        return path

    def plugin(self, backend: str) -> str:
        """libhtam_backend_<backend>.so of the bin folder, else of the build tree."""
        return self.tool(f"libhtam_backend_{backend}.so", f"backends/{backend}")

    def eval_task(self, fam: wf.Family, sh: wf.Shape, pending: List[str], paths: Dict[str, str],
                  knobs: Dict[str, dict], deadline: float) -> None:
        d = os.path.dirname(os.path.dirname(next(iter(paths.values()))))
        tries: Dict[str, int] = {}
        while pending and time.time() < deadline:
            cmd = [self.tool("htam-eval", "tools/eval"), "--task", d, "--backend", fam.backend,
                   "--queue", "--plugin", self.plugin(fam.backend),
                   "--cache", self.cache, "--seeds", str(self.a.seeds), "--reps", str(self.a.reps),
                   "--sets", str(self.a.sets)]
            if fam.backend == "cuda":
                cmd += ["--compile-threads", "1", "--option", "cuda_roofline=false"]
            elif self.a.cpu_compile_ahead:
                # Compile-only processes on other cores while this task's candidates are timed.
                cmd += ["--compile-threads", str(self.a.cpu_compile_ahead),
                        "--option", "compile_ahead_backends=" + fam.backend]
            for o in self.a.option or []:
                cmd += ["--option", o]
            for v in pending:
                cmd += ["--source", paths[v]]
            by_path = {paths[v]: v for v in pending}
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    text=True)
            restart = False
            wait = min(deadline + self.a.grace - time.time(), 7 * 24 * 3600.0)  # inf: no limit
            watchdog = threading.Timer(max(1.0, wait), proc.kill)
            watchdog.daemon = True
            watchdog.start()
            for line in proc.stdout:
                try:
                    j = json.loads(line)
                except json.JSONDecodeError:
                    continue
                v = by_path.get(j.get("source"))
                if v is None:
                    continue
                st = j.get("status", "")
                poisoned = "earlier fault" in j.get("diagnostics", "")
                if st not in STATUSES or poisoned:
                    tries[v] = tries.get(v, 0) + 1
                    if tries[v] < 2:
                        restart = True
                        break  # infrastructure trouble: a fresh process tries it again
                row = {"family": fam.name, "shape": sh.id, "task": fam.task_name(sh),
                       "variant": v, "knobs": knobs[v], "dtype": sh.dtype, "dims": sh.dims,
                       "source_hash": wf.source_hash(fam, knobs[v], sh.dtype),
                       "diagnostics": (j.get("diagnostics") or "")[:300],
                       "date": self.date, "commit": self.commit}
                row.update({k: j.get(k) for k in KEEP})
                self.emit(row)
                pending = [p for p in pending if p != v]
                if st == "Crash" or st == "Timeout":
                    restart = True  # a sticky fault or a hung kernel: new process for the rest
                    break
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if not restart and pending:
                # The process ended without answering for some sources: try once more each.
                left = []
                for v in pending:
                    tries[v] = tries.get(v, 0) + 1
                    if tries[v] < 2:
                        left.append(v)
                pending = left

    def run(self) -> int:
        fams = wf.load_families(self.a.families, self.a.only)
        if not fams:
            print("no families found in " + self.a.families)
            return 1
        os.makedirs(self.work, exist_ok=True)
        plan = self.plan(fams)
        have = {(r["task"], r["variant"]) for r in read_table(self.a.out)}
        todo = []
        for fam, sh, paths, knobs in plan:
            pend = [v for v in paths if self.a.redo or (fam.task_name(sh), v) not in have]
            if pend:
                todo.append((fam, sh, pend, paths, knobs))
        total = sum(len(t[2]) for t in todo)
        print(f"{len(fams)} families, {len(plan)} tasks, {sum(len(p[2]) for p in plan)} "
              f"variants; {total} to measure", flush=True)
        if not todo:
            self.finish()
            return 0
        if not self.a.no_compile:
            self.compile_all([(f, s, p, k) for f, s, _, p, k in todo])
        deadline = self.t0 + self.a.time_limit if self.a.time_limit else float("inf")
        os.makedirs(os.path.dirname(os.path.abspath(self.a.out)), exist_ok=True)
        self.partial = open(self.a.out + ".partial", "a")
        try:
            with cf.ThreadPoolExecutor(self.a.jobs) as ex:
                futs = [ex.submit(self.eval_task, f, s, pend, p, k, deadline)
                        for f, s, pend, p, k in todo]
                last = time.time()
                for fut in cf.as_completed(futs):
                    fut.result()
                    if time.time() - last > 30:
                        last = time.time()
                        print(f"  {self.done}/{total} measured, {last - self.t0:.0f} s", flush=True)
        finally:
            self.partial.close()
        self.finish()
        return 0

    def finish(self) -> None:
        rows = read_table(self.a.out)
        write_table(self.a.out, rows)
        counts: Dict[str, int] = {}
        for r in rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        print(f"table {self.a.out}: {len(rows)} rows {counts}, "
              f"{os.path.getsize(self.a.out) / 1024:.0f} KiB; {time.time() - self.t0:.0f} s",
              flush=True)


def _git_commit() -> str:
    try:
        # The commit of the sources this package was built from, when it runs from a checkout.
        here = os.path.dirname(os.path.realpath(__file__))
        return subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# ------------------------------------------------------------------------------------ check

def check(a) -> int:
    rows = [r for r in read_table(a.out) if r["status"] == "Ok" and r.get("median_us")]
    if not rows:
        print("check: no Ok rows in " + a.out)
        return 1
    rng = random.Random(a.seed)
    sample = rng.sample(rows, min(a.sample, len(rows)))
    fams = {f.name: f for f in wf.load_families(a.families)}
    b = Builder(a)
    out_rows: List[dict] = []

    class Sink:
        def write(self, s):
            out_rows.append(json.loads(s))

        def flush(self):
            pass

    b.partial = Sink()
    by_task: Dict[str, List[dict]] = {}
    for r in sample:
        by_task.setdefault(r["task"], []).append(r)
    jobs = []
    for task, rs in sorted(by_task.items()):
        fam = fams[rs[0]["family"]]
        sh = next(s for s in fam.shapes if s.id == rs[0]["shape"])
        d = os.path.join(b.work, "tasks", task)
        # Knobs in the family's order: the variant id follows it (the table's rows sort keys).
        knobs = {r["variant"]: {k.name: r["knobs"][k.name] for k in fam.knobs} for r in rs}
        paths = wf.materialize(fam, sh, d, list(knobs.values()))
        jobs.append((fam, sh, paths, knobs))
    os.makedirs(b.cache, exist_ok=True)
    b.compile_all(jobs)
    for fam, sh, paths, knobs in jobs:  # one evaluation at a time: no other process on the GPU
        b.eval_task(fam, sh, list(knobs), paths, knobs, float("inf"))
    table = {(r["task"], r["variant"]): r for r in sample}
    agree, lines = 0, []
    for r in out_rows:
        t = table[(r["task"], r["variant"])]
        if r["status"] != "Ok":
            lines.append(f"  {r['task']} {r['variant']}: now {r['status']}")
            continue
        ratio = r["median_us"] / t["median_us"]
        noise = max(a.tolerance, 3 * ((t.get("spread_us") or 0) + (r.get("spread_us") or 0))
                    / t["median_us"])
        ok = abs(ratio - 1) <= noise
        agree += ok
        lines.append(f"  {r['task']} {r['variant']}: table {t['median_us']:.2f} us, now "
                     f"{r['median_us']:.2f} us (x{ratio:.3f}, noise bound {noise:.3f}) "
                     f"{'agrees' if ok else 'DIFFERS'}")
    print("\n".join(lines))
    print(f"check: {agree}/{len(sample)} sampled rows agree with the table within timing noise")
    if a.report:
        with open(a.report, "w") as f:
            json.dump({"agree": agree, "sample": len(sample), "rows": out_rows}, f)
    return 0 if agree >= a.min_agree * len(sample) else 1


# ------------------------------------------------------------------------------------ CLI

def add_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--families", default=wf.DEFAULT_FAMILIES, help="folder of family folders")
    ap.add_argument("--only", nargs="*", help="family names (default: all)")
    ap.add_argument("--shapes", nargs="*", help="shape ids (default: all)")
    ap.add_argument("--out", default=DEFAULT_TABLE, help="the table (.jsonl.gz)")
    ap.add_argument("--work", default="/tmp/htam-world",
                    help="materialized tasks and compile cache")
    ap.add_argument("--bin", default=os.environ.get("HTAM_WORLD_BIN", "build/backends/cuda"),
                    help="folder with htam-eval, htam-eval-worker, libhtam_backend_cuda.so, "
                    "htam-world-compile (and libhtam_backend_cpu.so for CPU families)")
    ap.add_argument("--jobs", type=int, default=1, help="evaluating processes at a time")
    ap.add_argument("--compile-threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sets", type=int, default=2)
    ap.add_argument("--option", action="append", help="--option key=value for htam-eval")
    ap.add_argument("--cpu-compile-ahead", type=int, default=0,
                    help="CPU families: compile-only processes that compile queued candidates "
                         "ahead on other cores (0 = each runner compiles its candidate on its "
                         "turn, htamd's default for the CPU backend)")
    ap.add_argument("--max-variants", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=0, help="seconds; 0 = none")
    ap.add_argument("--grace", type=float, default=60,
                    help="seconds a task already started may run past --time-limit")
    ap.add_argument("--commit", default="")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--redo", action="store_true",
                    help="measure the selected families again (their new rows replace the old)")


def main(argv: List[str]) -> int:
    if not argv or argv[0] not in ("build", "check"):
        print("usage: htam-bench world build|check [options]  (--help after the verb)")
        return 2
    ap = argparse.ArgumentParser(prog="htam-bench world " + argv[0])
    add_args(ap)
    if argv[0] == "check":
        ap.add_argument("--sample", type=int, default=40)
        ap.add_argument("--seed", type=int, default=1)
        ap.add_argument("--tolerance", type=float, default=0.10)
        ap.add_argument("--min-agree", type=float, default=0.8)
        ap.add_argument("--report", default="")
    a = ap.parse_args(argv[1:])
    return Builder(a).run() if argv[0] == "build" else check(a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
