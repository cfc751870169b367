"""`htam-bench kernelbench` (`python3 -m htam_bench kernelbench`): KernelBench's metrics of a set
of ModelNew files, evaluated by htam-eval (the evaluator htamd uses) without a daemon.

    htam-bench kernelbench --kernelbench KB_DIR --modelnew MODELNEW_DIR [--level N ...]
                           [--problems 1-20,25] [--backend cpu|cuda] [--jobs N]
                           [--tasks-dir DIR] [--htam-eval PATH] [--eval-arg ARG ...]
                           [--json OUT]

MODELNEW_DIR holds a folder per level (level1/, level_2/, ...) of ModelNew files named as
KernelBench's runs name them (level_1_problem_19_sample_0_kernel.py) or as its problems
(19_ReLU.py). Every selected problem of a level counts: a problem without a file, whose import
fails or whose file is not Ok is incorrect, as in KernelBench. Per level and over all levels:
correct, fast_0/fast_1/fast_2 (the fraction of problems correct and faster than PyTorch eager by
more than 0x/1x/2x) and the geometric mean speedup over the correct ones. Exit status: 0 scored,
1 an evaluation could not run (htam-eval missing, an infrastructure error), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Dict, List, Optional

from htam_agent.kernelbench import (KernelBenchError, all_levels_line, evaluate_with_htam_eval,
                          find_htam_eval, import_planned, metrics, parse_policy, parse_ranges,
                          plan_report, plan_scoring, table, write_reference_modelnew)


class DeviceMemoryWatch:
    """Peak device memory of each running evaluation: nvidia-smi's per-process use, summed over
    the process tree of its htam-eval (worker, golden helper, runner), sampled every interval."""

    def __init__(self, interval_s: float = 0.5):
        self.interval_s = interval_s
        self.lock = threading.Lock()
        self.peaks: Dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def watch(self, r):
        def on(pid):
            with self.lock:
                if pid is not None:
                    self.peaks[pid] = 0.0
                    r._watch_pid = pid
                else:
                    r.device_mib = self.peaks.pop(getattr(r, "_watch_pid", -1), 0.0)
        return on

    @staticmethod
    def _children() -> Dict[int, List[int]]:
        kids: Dict[int, List[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(entry))
        return kids

    def _loop(self):
        while not self.stop.wait(self.interval_s):
            try:
                out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                      "--format=csv,noheader,nounits"], capture_output=True,
                                     text=True, timeout=10).stdout
            except (OSError, subprocess.SubprocessError):
                return
            used = {}
            for line in out.splitlines():
                parts = [x.strip() for x in line.split(",")]
                if len(parts) == 2 and parts[0].isdigit():
                    try:
                        used[int(parts[0])] = float(parts[1])
                    except ValueError:
                        pass
            kids = self._children()
            with self.lock:
                for root in list(self.peaks):
                    tree, todo = set(), [root]
                    while todo:
                        p = todo.pop()
                        if p not in tree:
                            tree.add(p)
                            todo.extend(kids.get(p, []))
                    total = sum(used.get(p, 0.0) for p in tree)
                    self.peaks[root] = max(self.peaks[root], total)

    def close(self):
        self.stop.set()


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="htam-bench kernelbench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench", required=True, metavar="DIR",
                    help="KernelBench's problems: DIR/level<N>/<n>_<name>.py")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--modelnew", metavar="DIR",
                      help="the ModelNew files: DIR/level<N>/ (or DIR itself, one level)")
    what.add_argument("--reference-as-modelnew", action="store_true",
                      help="score each problem's own Model renamed ModelNew (what the harness "
                           "does with every problem at full size; pair with --policy "
                           "'{\"require_kernel\": false}'; levels default to 1-3)")
    ap.add_argument("--policy", default="",
                    help="a kernelbench_policy (JSON) for every imported task, e.g. "
                         "'{\"require_kernel\": false}' (default: the verifier's, KernelBench's)")
    ap.add_argument("--level", type=int, action="append", default=[],
                    help="level to score (repeatable; default every level folder of --modelnew)")
    ap.add_argument("--problems", default="", help="problem numbers, e.g. 1-20,25 (default all)")
    ap.add_argument("--backend", default="cpu", help="htam-eval's backend (default cpu)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="evaluations at once (default 1; verdicts do not depend on it)")
    ap.add_argument("--tasks-dir", default="",
                    help="where the problems are imported as tasks (default a temporary folder)")
    ap.add_argument("--htam-eval", default="", help="htam-eval (default $HTAM_EVAL, the build's)")
    ap.add_argument("--eval-arg", action="append", default=[],
                    help="one more argument for htam-eval (repeatable), e.g. --eval-arg=--reps "
                         "--eval-arg=20")
    ap.add_argument("--kernelbench-python", default="/usr/bin/python3",
                    help="interpreter with PyTorch for the import (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=3600.0,
                    help="seconds one htam-eval may take before it counts as an error")
    ap.add_argument("--json", dest="json_out", default="", help="also write the report here")
    ap.add_argument("--progress", default="",
                    help="append one JSON line per evaluated problem to this file as it ends")
    ap.add_argument("--time-limit", type=float, default=0.0,
                    help="start no evaluation after this many seconds (those left count as "
                         "not run, i.e. incorrect); 0 = none")
    ap.add_argument("--device-memory", action="store_true",
                    help="record each evaluation's peak device memory (nvidia-smi, sampled)")
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.jobs < 1:
        print("htam-bench kernelbench: --jobs must be at least 1", file=sys.stderr)
        return 2
    try:
        plan = plan_scoring(args.kernelbench, args.modelnew or "", args.level,
                            parse_ranges(args.problems))
        policy = parse_policy(args.policy)
        htam_eval = find_htam_eval(args.htam_eval)
    except KernelBenchError as e:
        print(f"htam-bench kernelbench: {e}", file=sys.stderr)
        return 2
    tmp = None
    tasks_dir = args.tasks_dir
    if not tasks_dir:
        tmp = tempfile.TemporaryDirectory(prefix="htam-kb-tasks-")
        tasks_dir = tmp.name
        # Sandboxed workers (their own user) read the tasks.
        os.chmod(tasks_dir, 0o755)
    try:
        if args.reference_as_modelnew:
            write_reference_modelnew(plan, os.path.join(tasks_dir, "reference-modelnew"))
        with_files = sum(1 for rs in plan.levels.values() for r in rs if r.modelnew)
        total = sum(len(rs) for rs in plan.levels.values())
        print(f"levels {', '.join(map(str, plan.levels))}: {total} problems, {with_files} with a "
              f"ModelNew file; evaluated by {htam_eval} on {args.backend}, {args.jobs} at once",
              flush=True)
        try:
            import_planned(plan, tasks_dir, python=args.kernelbench_python, policy=policy)
        except KernelBenchError as e:
            print(f"htam-bench kernelbench: {e}", file=sys.stderr)
            return 1
        todo = [r for rs in plan.levels.values() for r in rs if r.modelnew and r.task and
                r.status != "import_failed"]

        started = time.monotonic()
        memory = DeviceMemoryWatch() if args.device_memory else None
        progress_lock = threading.Lock()

        def one(r):
            if args.time_limit and time.monotonic() - started > args.time_limit:
                r.status, r.note = "not_run", f"not started: --time-limit {args.time_limit:.0f} s"
                return
            evaluate_with_htam_eval(r, tasks_dir, htam_eval, args.backend, args.eval_arg,
                                    timeout_s=args.timeout,
                                    watch=memory.watch(r) if memory else None)
            print(f"level {r.level} {r.problem}: {r.outcome or r.status}"
                  + (f" {r.speedup:.2f}x" if r.speedup else "") + f" ({r.seconds:.1f} s"
                  + (f", {r.device_mib:.0f} MiB on the device" if memory else "") + ")",
                  flush=True)
            if args.progress:
                with progress_lock, open(args.progress, "a", encoding="utf-8") as f:
                    row = {k: v for k, v in asdict(r).items() if not k.startswith("_")}
                    f.write(json.dumps(row) + "\n")

        try:
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                list(pool.map(one, todo))
        except KernelBenchError as e:
            print(f"htam-bench kernelbench: {e}", file=sys.stderr)
            return 1
        finally:
            if memory:
                memory.close()
    finally:
        if tmp is not None:
            tmp.cleanup()
    for level, results in plan.levels.items():
        print("\n" + table(level, results, metrics(results)), flush=True)
    print("\n" + all_levels_line(plan), flush=True)
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(plan_report(plan, args.backend, "htam-eval"), f, indent=1)
    errors = [r for rs in plan.levels.values() for r in rs if r.status == "error"]
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
