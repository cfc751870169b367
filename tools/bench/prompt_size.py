"""Size of one next-step answer as the agent reads it, under each of several htamd option sets:
strategies listed, the daemon's prompt_context, and the model prompt that the SDK's agent builds
from the step (htam_agent.prompt.build_messages). Runs htamd on a copy of an existing store, so
the store itself is not changed. docs/journal/2026-11-benchmarks-world.md, "Cost of a longer strategy list".

  PYTHONPATH=build/python:sdk/python /usr/bin/python3 tools/bench/prompt_size.py \
      --htamd build/daemon/htamd --store DIR --task NAME --backend cuda \
      --variant k24:memory.top_k_strategies=24 --variant k64:memory.top_k_strategies=64

Prints one JSON line per variant and task.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile

from htam_agent.htamd import HtamdProcess
from htam_agent.prompt import build_messages


def parse_variant(text: str):
    name, _, opts = text.partition(":")
    options = {}
    for kv in filter(None, opts.split(",")):
        k, eq, v = kv.partition("=")
        if not eq:
            raise SystemExit(f"prompt_size: --variant {text}: expected NAME:KEY=VALUE[,...]")
        options[k] = v
    return name, options


def measure(htamd: str, store: str, tasks_dir: str, task: str, backend: str, options: dict):
    with tempfile.TemporaryDirectory(prefix="htam-prompt-size-") as tmp:
        data = os.path.join(tmp, "store")
        shutil.copytree(store, data, ignore=shutil.ignore_patterns("*.sock", "htamd.log", "*.pid"))
        with HtamdProcess(htamd, data, tasks_dir, options=options) as proc:
            d = proc.client()
            try:
                session = d.open_session(task, backend, client="prompt-size")
                step = d.next_step(session.session_id)
                d.close(session.session_id)
            finally:
                d.close_connection()
    best = session.best_source or session.baseline_source or ""
    user = build_messages(session, step, best, 1.0, [])[1]["content"]
    bare = dataclasses.replace(step, strategies=[], prompt_context="")
    without = build_messages(session, bare, best, 1.0, [])
    return {
        "strategies": len(step.strategies),
        "with_example": sum(1 for s in step.strategies if s.example_source),
        "prompt_context_chars": len(step.prompt_context),
        "prompt_chars": len(user),
        "prompt_chars_without_strategies": len(without[1]["content"]),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--htamd", required=True)
    ap.add_argument("--store", required=True, help="data directory of an existing store")
    ap.add_argument("--tasks-dir", default="configs/tasks")
    ap.add_argument("--task", action="append", required=True, help="task name (repeatable)")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--variant", action="append", required=True,
                    help="NAME:KEY=VALUE[,KEY=VALUE...] (repeatable)")
    a = ap.parse_args(argv)
    for v in a.variant:
        name, options = parse_variant(v)
        for task in a.task:
            row = {"variant": name, "task": task, "options": options}
            row.update(measure(a.htamd, a.store, a.tasks_dir, task, a.backend, options))
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
