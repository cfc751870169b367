"""Command line of htam-agent.

    htam-agent run --task NAME [--proposer llm|replay] [--budget N] [--backend B] ...
                   [--language lean|kernelbench|auto]   (kernelbench: ModelNew Python files)
    htam-agent run --kernelbench DIR --level N [--problems 1-20] --tasks-dir TASKS ...
    htam-agent run --kernelbench DIR --modelnew MODELNEW_DIR [--level N] --tasks-dir TASKS ...
                                                    (KernelBench's metrics of ModelNew files)
    htam-agent import-lineage TASK_DIR... [--backend B] [--recorded]

The benchmarks over this agent are htam-bench's: `htam-bench quality`, `htam-bench world`,
`htam-bench kernelbench` (tools/bench/python/htam_bench).

`run` is the default: `htam-agent --task relu` works too. Exit status: 0 on success, 1 when the
session or import failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from typing import List, Optional

from . import __version__
from .daemon import DEFAULT_ENDPOINT, DaemonError, connect
from .lineage import LineageError, load_task

SUBCOMMANDS = ("run", "import-lineage", "wait-ready")
# htam-bench's subcommands in Python (tools/bench/python/htam_bench), named here for a clear error.
BENCHMARKS = ("quality", "world", "kernelbench")


def _flush_print(msg: str) -> None:
    print(msg, flush=True)


def gpu_present() -> bool:
    """True when nvidia-smi lists a GPU (used to pick the best backend present)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        r = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0 and "GPU" in r.stdout


def choose_backend(requested: str, offered: List[str], lineages: List[str]) -> str:
    """The backend to use: the requested one, else the best the daemon offers (cuda, hip, cpu)
    for which the task has what the proposer needs."""
    if requested and requested != "auto":
        return requested
    for b in ("cuda", "hip", "cpu"):
        if (not offered or b in offered) and (not lineages or b in lineages):
            if b == "cuda" and not gpu_present():
                continue
            return b
    return "cpu"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoint", default=os.environ.get("HTAM_ENDPOINT", DEFAULT_ENDPOINT),
                   help="htamd endpoint (env HTAM_ENDPOINT; default %(default)s)")
    p.add_argument("--server-key", default=os.environ.get("HTAM_SERVER_KEY", ""),
                   help="server public key (Z85) when htamd requires CURVE")
    p.add_argument("--client-key-file", default=os.environ.get("HTAM_CLIENT_KEY_FILE", ""),
                   help="client key pair file (htam-keygen) when htamd requires CURVE")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="seconds to wait for one daemon answer (evaluations included)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="htam-agent", description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", action="version", version=f"htam-agent {__version__}")
    sub = ap.add_subparsers(dest="command")

    run = sub.add_parser("run", help="run an optimization session on a task")
    _common(run)
    run.add_argument("--task", default="", help="task name (a folder of --tasks-dir)")
    run.add_argument("--tasks-dir", default=os.environ.get("HTAM_TASKS_DIR", "configs/tasks"),
                     help="task suite folder (specification and lineage; default %(default)s)")
    run.add_argument("--backend", default="auto",
                     help="cpu, cuda, hip or auto: the best the daemon offers (default)")
    run.add_argument("--arch", default="", help="device architecture to ask for (e.g. sm_90)")
    run.add_argument("--budget", type=int, default=6, help="steps (submissions; default 6)")
    run.add_argument("--proposer", choices=("llm", "replay"), default="llm")
    run.add_argument("--language", choices=("lean", "kernelbench", "auto"), default="lean",
                     help="what the model writes: lean (default) a lean-ABI kernel "
                          "(htam_kernel) in the backend's language; kernelbench a KernelBench "
                          "ModelNew Python file, starting from the problem's PyTorch code "
                          "(KernelBench tasks only); auto: kernelbench on a KernelBench task, "
                          "else lean")
    run.add_argument("--recorded", action="store_true",
                     help="replay only: report the lineage's measured outcomes (Record) instead "
                          "of evaluating the variants")
    run.add_argument("--no-fallback", action="store_true",
                     help="replay only: do not fall back to the next-ranked direction when the "
                          "lineage has no variant for the memory's choice")
    run.add_argument("--session", type=int, default=0,
                     help="resume this session id (without CURVE a session is its opener's: a "
                          "new process resumes it with the same HTAM_IDENTITY_SECRET)")
    run.add_argument("--profile", action="store_true",
                     help="profile every Ok candidate with Nsight Compute (htamd's eval.ncu): "
                          "DRAM/SM throughput, occupancy and the bottleneck class")
    run.add_argument("--json", dest="json_out", default="",
                     help="also write the session report as JSON to this file")
    kb = run.add_argument_group("a KernelBench level (one session per problem, KernelBench's "
                                "metrics; instead of --task)")
    kb.add_argument("--kernelbench", default="", metavar="DIR",
                    help="KernelBench problems: DIR/level<N>/<n>_<name>.py (imported into "
                         "--tasks-dir, which must be the daemon's server.tasks_dir)")
    kb.add_argument("--level", type=int, default=0,
                    help="level (default 1; with --modelnew every level folder there)")
    kb.add_argument("--modelnew", default="", metavar="DIR",
                    help="score these ModelNew files instead of running a model: DIR/level<N>/ "
                         "holds one file per problem (level_1_problem_19_sample_0_kernel.py or "
                         "19_ReLU.py), each submitted once to the daemon")
    kb.add_argument("--policy", default="",
                    help="with --modelnew: a kernelbench_policy (JSON) for every imported task")
    kb.add_argument("--problems", default="", help="problem numbers, e.g. 1-20,25 (default all)")
    kb.add_argument("--lineages", default="",
                    help="folder of <task name>/lineage.json (+ variants) for --proposer replay")
    kb.add_argument("--kernelbench-python", default="/usr/bin/python3",
                    help="interpreter with PyTorch for the import (default %(default)s)")
    llm = run.add_argument_group("model (OpenAI-compatible chat completions)")
    llm.add_argument("--llm-base-url", default=None,
                     help="e.g. http://127.0.0.1:8000/v1 (env HTAM_LLM_BASE_URL)")
    llm.add_argument("--llm-model", default=None, help="model name (env HTAM_LLM_MODEL)")
    llm.add_argument("--llm-api-key", default=None, help="API key (env HTAM_LLM_API_KEY)")
    llm.add_argument("--temperature", type=float, default=None)
    llm.add_argument("--max-tokens", type=int, default=None)
    llm.add_argument("--llm-timeout", type=float, default=None, help="seconds per request")
    llm.add_argument("--llm-retries", type=int, default=None, help="retries of transient errors")
    llm.add_argument("--max-repairs", type=int, default=1,
                     help="repair attempts in a row after a compile error or wrong result")

    imp = sub.add_parser("import-lineage", help="walk lineages through the daemon into memory")
    _common(imp)
    imp.add_argument("task_dirs", nargs="+", help="task folders (holding task.json + lineage)")
    imp.add_argument("--backend", action="append", default=[],
                     help="import only this backend's lineage (repeatable; default all present)")
    imp.add_argument("--recorded", action="store_true",
                     help="record the lineage's measured outcomes (unverified) instead of "
                          "evaluating each variant; for backends this host does not have")
    imp.add_argument("--strict", action="store_true",
                     help="exit 1 when an outcome differs from what the lineage expects")

    w = sub.add_parser("wait-ready", help="wait until htamd answers (for scripts)")
    _common(w)
    w.add_argument("--within", type=float, default=60.0, help="seconds to wait (default 60)")
    return ap


def _llm_proposer(args):
    from .llm import ChatClient, LLMConfig
    from .proposers import LLMProposer
    cfg = LLMConfig.from_env(base_url=args.llm_base_url, model=args.llm_model,
                             api_key=args.llm_api_key, temperature=args.temperature,
                             max_tokens=args.max_tokens, timeout_s=args.llm_timeout,
                             max_retries=args.llm_retries)
    return LLMProposer(ChatClient(cfg, log=_flush_print), max_repairs=args.max_repairs), cfg.model


def _modelnew_args(args, task) -> dict:
    """run_session's language arguments for --language (KernelBenchError when kernelbench is
    asked for a task that has no problem file to start from)."""
    from .kernelbench import modelnew_start, session_language, task_policy
    language = session_language(args.language if args.proposer == "llm" else "lean", task)
    if not language:
        return {"language": "", "start_source": "", "policy": None}
    return {"language": language, "start_source": modelnew_start(task),
            "policy": task_policy(task)}


def cmd_score_modelnew(args) -> int:
    """--kernelbench with --modelnew: each ModelNew file submitted once, KernelBench's metrics."""
    from .kernelbench import (KernelBenchError, all_levels_line, import_planned, metrics,
                              parse_policy, parse_ranges, plan_report, plan_scoring,
                              score_outcome, table)
    try:
        plan = plan_scoring(args.kernelbench, args.modelnew, [args.level] if args.level else [],
                            parse_ranges(args.problems))
        import_planned(plan, args.tasks_dir, python=args.kernelbench_python,
                       policy=parse_policy(args.policy))
    except KernelBenchError as e:
        print(f"htam-agent: {e}", file=sys.stderr)
        return 2
    daemon = connect(args.endpoint, timeout_s=args.timeout, server_public_key=args.server_key,
                     client_key_file=args.client_key_file)
    backend = ""
    try:
        offered = list(daemon.hello().get("backends") or [])
        backend = choose_backend(args.backend, offered, [])
        for level, results in plan.levels.items():
            for r in results:
                if not r.modelnew or not r.task or r.status == "import_failed":
                    continue
                with open(r.modelnew, encoding="utf-8") as f:
                    source = f.read()
                t0 = time.monotonic()
                try:
                    info = daemon.open_session(r.task, backend, arch=args.arch, budget=1,
                                               model="modelnew-files")
                    r.session_id = info.session_id
                    # htamd records every step under a direction: the one it advises here.
                    step = daemon.next_step(info.session_id)
                    out = daemon.submit(info.session_id, source, "kernelbench", step.direction_id, [],
                                        "ModelNew file " + os.path.basename(r.modelnew))
                    daemon.close(info.session_id)
                except DaemonError as e:
                    r.status, r.note = "error", str(e)
                    _flush_print(f"level {level} {r.problem}: {e}")
                    continue
                r.seconds = time.monotonic() - t0
                score_outcome(r, out.status, out.speedup, out.diagnostics)
                _flush_print(f"level {level} {r.problem}: {out.status}"
                             + (f" {r.speedup:.2f}x" if r.speedup else ""))
    except (DaemonError, OSError) as e:
        print(f"htam-agent: {e}", file=sys.stderr)
        return 1
    finally:
        daemon.close_connection()
    for level, results in plan.levels.items():
        print("\n" + table(level, results, metrics(results)), flush=True)
    print("\n" + all_levels_line(plan), flush=True)
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(plan_report(plan, backend, "htamd"), f, indent=1)
    return 0


def cmd_run_kernelbench(args) -> int:
    from dataclasses import asdict

    from .agent import run_session
    from .kernelbench import (KernelBenchError, attach_lineages, import_problems, level_problems,
                              metrics, parse_ranges, score_session, spec_text, table)
    from .proposers import ReplayProposer
    if args.language == "kernelbench" and args.proposer == "replay":
        print("htam-agent: --language kernelbench is for the model proposer (a lineage holds "
              "lean-ABI kernels)", file=sys.stderr)
        return 2
    try:
        files = level_problems(args.kernelbench, args.level, parse_ranges(args.problems))
        _flush_print(f"level {args.level}: {len(files)} problems from {args.kernelbench}, "
                     f"imported into {args.tasks_dir}")
        results = import_problems(files, args.tasks_dir, python=args.kernelbench_python)
    except KernelBenchError as e:
        print(f"htam-agent: {e}", file=sys.stderr)
        return 2
    if args.lineages:
        attach_lineages(results, args.lineages, args.tasks_dir)
    daemon = connect(args.endpoint, timeout_s=args.timeout, server_public_key=args.server_key,
                     client_key_file=args.client_key_file)
    backends = set()
    try:
        offered = list(daemon.hello().get("backends") or [])
        for r in results:
            if not r.task:
                _flush_print(f"{r.problem}: {r.note}")
                continue
            task = load_task(os.path.join(args.tasks_dir, r.task))
            if args.proposer == "replay":
                backend = choose_backend(args.backend, offered, sorted(task.lineages))
                if backend not in task.lineages:
                    r.status, r.note = "no_candidate", f"no {backend} lineage to replay"
                    _flush_print(f"{r.problem}: {r.note}")
                    continue
                proposer = ReplayProposer(task, task.lineages[backend],
                                          fallback=not args.no_fallback)
                model = "replay"
            else:
                backend = choose_backend(args.backend, offered, [])
                proposer, model = _llm_proposer(args)
            backends.add(backend)
            try:
                lang = _modelnew_args(args, task)
                report = run_session(daemon, r.task, backend, proposer, args.budget,
                                     arch=args.arch, model=model, recorded=args.recorded,
                                     spec_text=spec_text(task, lang["language"]),
                                     out=_flush_print, **lang)
            except (DaemonError, KernelBenchError) as e:
                r.status, r.note = "error", str(e)
                _flush_print(f"{r.problem}: {e}")
                continue
            r.session_id = report.session_id
            score_session(r, report.rows, verified_only=not args.recorded)
    except (DaemonError, LineageError) as e:
        print(f"htam-agent: {e}", file=sys.stderr)
        return 1
    finally:
        daemon.close_connection()
    m = metrics(results)
    print("\n" + table(args.level, results, m), flush=True)
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump({"level": args.level, "proposer": args.proposer,
                       "backends": sorted(backends), "recorded": bool(args.recorded),
                       "problems": [asdict(r) for r in results], "metrics": m}, f, indent=1)
    return 0


def cmd_run(args) -> int:
    from .agent import final_table, run_session
    if args.kernelbench and args.modelnew:
        return cmd_score_modelnew(args)
    if args.kernelbench:
        args.level = args.level or 1
        return cmd_run_kernelbench(args)
    if args.modelnew:
        print("htam-agent: --modelnew needs --kernelbench DIR (the problems)", file=sys.stderr)
        return 2
    if not args.task:
        print("htam-agent: run needs --task NAME or --kernelbench DIR", file=sys.stderr)
        return 2
    from .kernelbench import KernelBenchError
    from .proposers import ReplayProposer
    task_dir = os.path.join(args.tasks_dir, args.task)
    task = None
    if os.path.exists(os.path.join(task_dir, "task.json")):
        task = load_task(task_dir)
    elif args.proposer == "replay":
        print(f"htam-agent: no task folder {task_dir} (the replay proposer needs its lineage)",
              file=sys.stderr)
        return 2
    if args.language == "kernelbench" and args.proposer == "replay":
        print("htam-agent: --language kernelbench is for the model proposer (a lineage holds "
              "lean-ABI kernels)", file=sys.stderr)
        return 2
    if args.language == "kernelbench" and task is None:
        print(f"htam-agent: --language kernelbench starts from the task's PyTorch problem: no "
              f"task folder {task_dir} (set --tasks-dir to the daemon's task suite)",
              file=sys.stderr)
        return 2
    try:
        lang = _modelnew_args(args, task)
    except KernelBenchError as e:
        print(f"htam-agent: {e}", file=sys.stderr)
        return 2
    daemon = connect(args.endpoint, timeout_s=args.timeout, server_public_key=args.server_key,
                     client_key_file=args.client_key_file)
    daemon.profile = bool(getattr(args, "profile", False))
    try:
        hello = daemon.hello()
        backend = choose_backend(args.backend, list(hello.get("backends") or []),
                                 sorted(task.lineages) if (task and args.proposer == "replay")
                                 else [])
        model = ""
        if args.proposer == "replay":
            if backend not in task.lineages:
                print(f"htam-agent: task {task.name} has no {backend} lineage to replay "
                      f"(it has: {', '.join(sorted(task.lineages)) or 'none'})", file=sys.stderr)
                return 2
            proposer = ReplayProposer(task, task.lineages[backend],
                                      fallback=not args.no_fallback)
            model = "replay"
        else:
            proposer, model = _llm_proposer(args)
        from .kernelbench import spec_text
        spec = spec_text(task, lang["language"]) if task else ""
        report = run_session(daemon, args.task, backend, proposer, args.budget, arch=args.arch,
                             model=model, recorded=args.recorded, spec_text=spec,
                             out=_flush_print, session_id=args.session, **lang)
    except DaemonError as e:
        print(f"htam-agent: {e}", file=sys.stderr)
        return 1
    finally:
        daemon.close_connection()
    print("\n" + final_table(report), flush=True)
    if args.json_out:
        from dataclasses import asdict
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(asdict(report), f, indent=1)
    return 0


def cmd_import(args) -> int:
    from .importer import ImportReport, import_task
    daemon = connect(args.endpoint, timeout_s=args.timeout, server_public_key=args.server_key,
                     client_key_file=args.client_key_file)
    report = ImportReport()
    try:
        for d in args.task_dirs:
            try:
                task = load_task(d)
            except LineageError as e:
                print(f"htam-agent: {e}", file=sys.stderr)
                report.skipped.append(str(e))
                continue
            if not task.lineages:
                print(f"{task.name}: no lineage, nothing to import", flush=True)
                continue
            import_task(daemon, task, backends=args.backend or None, recorded=args.recorded,
                        out=_flush_print, report=report)
    except DaemonError as e:
        print(f"htam-agent: {e}", file=sys.stderr)
        return 1
    finally:
        daemon.close_connection()
    print(f"imported {len(report.steps)} steps in {len(report.sessions)} sessions; "
          f"{len(report.disagreements)} differ from their lineage; "
          f"{len(report.skipped)} skipped", flush=True)
    for s in report.skipped:
        print(f"  skipped: {s}")
    if not report.steps and report.skipped:
        return 1
    if args.strict and report.disagreements:
        return 1
    return 0


def cmd_wait_ready(args) -> int:
    import time
    deadline = time.monotonic() + args.within
    last = ""
    while time.monotonic() < deadline:
        try:
            d = connect(args.endpoint, timeout_s=2.0, server_public_key=args.server_key,
                        client_key_file=args.client_key_file)
            try:
                hello = d.hello()
            finally:
                d.close_connection()
            print(f"htamd {hello.get('server_version', '?')} at {args.endpoint}; backends: "
                  f"{', '.join(hello.get('backends') or []) or 'none'}", flush=True)
            return 0
        except DaemonError as e:
            last = str(e)
            time.sleep(0.2)
    print(f"htam-agent: no answer from {args.endpoint} within {args.within:.0f}s: {last}",
          file=sys.stderr)
    return 1


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version"):
        argv = ["run"] + argv
    if argv and argv[0] in BENCHMARKS:
        print(f"htam-agent: '{argv[0]}' is a benchmark: run htam-bench {argv[0]}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return cmd_run(args)
    if args.command == "import-lineage":
        return cmd_import(args)
    if args.command == "wait-ready":
        return cmd_wait_ready(args)
    build_parser().print_help()
    return 2
