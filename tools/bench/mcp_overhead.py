#!/usr/bin/python3
"""What htam-mcp adds to a request: `next_step` on one session, N times each, through the Python
SDK directly (the baseline) and through htam-mcp over stdio, in the same run against one htamd
(CPU backend, a fresh temporary store), on an ipc:// and on a tcp:// endpoint. Prints a table of
medians and 90th percentiles (ms) with the ratio to the SDK's median, and one JSON line.

    PYTHONPATH=build/python:sdk/python:tests/mcp /usr/bin/python3 tools/bench/mcp_overhead.py \
        [--calls 200] [--transports ipc,tcp]

Needs the build (htamd, the CPU plugin, build/bin/htam-mcp; HTAM_HTAMD / HTAM_MCP name others).
docs/mcp.md, "Overhead", quotes its output.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import sys
import time
from typing import Dict, List

import htam
from harness import StdioMcp, start_htamd, tmpdir  # tests/mcp/harness.py


def pct(xs: List[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(endpoint: str, calls: int) -> Dict[str, List[float]]:
    out: Dict[str, List[float]] = {}
    with htam.Client(endpoint, timeout_s=60) as c:
        sid = c.open_session(task="cpu_relu", backend="cpu")["session"]["id"]
        for _ in range(5):
            c.next_step(sid)
        t = []
        for _ in range(calls):
            t0 = time.perf_counter()
            c.next_step(sid)
            t.append((time.perf_counter() - t0) * 1e3)
        out["sdk"] = t
    mcp = StdioMcp("--endpoint", endpoint)
    try:
        mcp.initialize()
        for _ in range(5):
            mcp.call("next_step", {"session_id": sid})
        t = []
        for _ in range(calls):
            t0 = time.perf_counter()
            r = mcp.call("next_step", {"session_id": sid})
            t.append((time.perf_counter() - t0) * 1e3)
            if r["result"].get("isError"):
                raise RuntimeError(r["result"]["content"][0]["text"])
        out["mcp-stdio"] = t
    finally:
        mcp.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--transports", default="ipc,tcp")
    a = ap.parse_args()
    rows = []
    for transport in a.transports.split(","):
        tmp = tmpdir("htam-mcp-overhead-")
        try:
            if transport == "ipc":
                htamd = start_htamd(tmp)
            else:
                from htam_agent.htamd import HtamdProcess, find_htamd
                from harness import ROOT, TASKS
                os.chmod(tmp, 0o755)
                htamd = HtamdProcess(find_htamd(), os.path.join(tmp, "data"), tasks_dir=TASKS,
                                     cwd=ROOT, endpoint=f"tcp://127.0.0.1:{free_port()}").start()
            try:
                times = measure(htamd.endpoint, a.calls)
            finally:
                htamd.stop()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        base = statistics.median(times["sdk"])
        for path, t in times.items():
            rows.append({"endpoint": transport, "path": path, "calls": len(t),
                         "median_ms": round(statistics.median(t), 3),
                         "p90_ms": round(pct(t, 0.9), 3),
                         "ratio_to_sdk": round(statistics.median(t) / base, 2)})
    print(f"{'endpoint':8s} {'path':10s} {'calls':>5s} {'median ms':>10s} {'p90 ms':>8s} "
          f"{'x SDK':>6s}")
    for r in rows:
        print(f"{r['endpoint']:8s} {r['path']:10s} {r['calls']:5d} {r['median_ms']:10.2f} "
              f"{r['p90_ms']:8.2f} {r['ratio_to_sdk']:6.2f}")
    print(json.dumps({"mcp_overhead": rows, "loadavg": os.getloadavg()[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
