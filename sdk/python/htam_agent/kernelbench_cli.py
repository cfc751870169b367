"""`htam-bench kernelbench` (`python3 -m htam_agent kernelbench`): KernelBench's metrics of a set
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
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import List, Optional

from .kernelbench import (KernelBenchError, all_levels_line, evaluate_with_htam_eval,
                          find_htam_eval, import_planned, metrics, parse_policy, parse_ranges,
                          plan_report, plan_scoring, table, write_reference_modelnew)


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

        def one(r):
            evaluate_with_htam_eval(r, tasks_dir, htam_eval, args.backend, args.eval_arg,
                                    timeout_s=args.timeout)
            print(f"level {r.level} {r.problem}: {r.outcome or r.status}"
                  + (f" {r.speedup:.2f}x" if r.speedup else "") + f" ({r.seconds:.1f} s)",
                  flush=True)

        try:
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                list(pool.map(one, todo))
        except KernelBenchError as e:
            print(f"htam-bench kernelbench: {e}", file=sys.stderr)
            return 1
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
