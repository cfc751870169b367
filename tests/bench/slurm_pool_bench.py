"""Worker pool on Slurm, measured: how long a queued evaluation waits for the first result of a
worker job the pool starts (cold pool: sbatch, scheduling, htam-worker start, registration,
evaluation), and throughput of CPU-backend evaluations with 1, 2 and 4 worker jobs, side by side
with the same number of htam-worker processes started by hand (today's deployment, no Slurm) on
the same one-node cluster's machine, in the same run.

Run from the source root, as root, with Slurm installed (tools/setup.sh):

  HTAM_HTAMD=build/daemon/htamd HTAM_KEYGEN=build/daemon/server/htam-keygen \\
  HTAM_WORKER=build/daemon/eval/worker/htam-worker PYTHONPATH=build/python \\
    /usr/bin/python3 tests/bench/slurm_pool_bench.py [--batch 12] [--jobs 1,2,4] \\
    [--device-ms 30] [--json out.json]

Every worker (pool or by hand) runs with the same light gate settings (start_daemon's worker.conf:
1 seed, 10 timed repetitions), so that the figures are about starting and feeding workers, not
about timing candidates. Each configuration gets a fresh htamd. Per worker count: the cold-start latency (pool only),
then a warm-up batch (the pool grows to its size), then the measured batch of --batch candidates
submitted at once; throughput = batch / (last result - first submit). Reported: medians over
--repeats measured batches, and the ratio pool / by hand.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import htam  # noqa: E402
from slurm_cluster import (KEYGEN, ClusterUnavailable, OneNodeSlurm, start_daemon,  # noqa: E402
                           stop_daemon)

WORKER = os.environ.get("HTAM_WORKER", "build/daemon/eval/worker/htam-worker")
with open(os.path.join("configs", "tasks", "cpu_relu", "reference.cpp")) as f:
    REFERENCE = f.read()


def wait_all(c, job_ids, timeout_s=600):
    pending = set(job_ids)
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        for j in list(pending):
            r = c.poll(j, wait_ms=0)
            if r.get("done"):
                if r["status_name"] != "Ok":
                    raise RuntimeError(f"job {j}: {r}")
                pending.discard(j)
        time.sleep(0.02)
    if pending:
        raise RuntimeError(f"{len(pending)} job(s) not done in {timeout_s} s")
    return time.monotonic()


def candidate(device_ms):
    """The task's reference; with device_ms, every call also sleeps that long, a stand-in for
    device time during which the host's cores idle (as htam-bench workers --device-ms)."""
    if not device_ms:
        return REFERENCE
    return REFERENCE.replace("#include <htam/kernel_abi.h>",
                             "#include <htam/kernel_abi.h>\n#include <unistd.h>").replace(
        "  const long n = htam_numel(&in[0]);",
        f"  usleep({int(device_ms) * 1000});\n  const long n = htam_numel(&in[0]);")


def batch(c, sid, direction, n, tag, source):
    t0 = time.monotonic()
    ids = [c.submit(sid, source, direction_id=direction, summary=f"{tag} {i}",
                    wait=False)["job_id"] for i in range(n)]
    return n / (wait_all(c, ids) - t0)


def log_time(log, pattern):
    """Seconds since the epoch of the first htamd log line matching `pattern`, or None."""
    import datetime
    import re
    with open(log, errors="replace") as f:
        for line in f:
            if re.search(pattern, line):
                ts = line.split()[0].rstrip("Z")
                return datetime.datetime.fromisoformat(ts).replace(
                    tzinfo=datetime.timezone.utc).timestamp()
    return None


def connected(c):
    text = c.status("workers")
    for line in text.splitlines():
        if line.startswith("workers: "):
            return int(line.split()[1])
    return 0


def run_one(root, slurm, mode, n, args):
    tmp = tempfile.mkdtemp(prefix=f"{mode}-{n}-", dir=root)
    os.chmod(tmp, 0o755)
    job_name = f"htam-bench-{os.getpid()}-{n}"
    workers = []
    out = {"mode": mode, "jobs": n}
    if mode == "pool":
        options = ["--pool.max_jobs", str(n), "--pool.queued_per_job", "1",
                   "--pool.idle_s", "600"]
        proc, endpoint, log = start_daemon(tmp, slurm, job_name, options)
    else:
        wkeys = os.path.join(tmp, "wkeys")
        subprocess.run([KEYGEN, wkeys, "worker"], check=True, capture_output=True)
        with open(os.path.join(wkeys, "worker.pub")) as f:
            pub = [l.split("=", 1)[1].strip() for l in f if l.startswith("public")][0]
        with open(os.path.join(wkeys, "authorized"), "w") as f:
            f.write(pub + "\n")
        proc, endpoint, log = start_daemon(
            tmp, slurm, job_name, ["--worker.curve_authorized_keys",
                                   os.path.join(wkeys, "authorized")], pool=False)
        with open(os.path.join(tmp, "worker_endpoint")) as f:
            wep = f.read().strip()
        for i in range(n):
            workers.append(subprocess.Popen(
                [os.path.abspath(WORKER), "--config", os.path.join(tmp, "worker.conf"),
                 "--worker.connect", wep,
                 "--worker.server_public_key_file", os.path.join(tmp, "keys", "server.pub"),
                 "--worker.key_file", os.path.join(wkeys, "worker.key"),
                 "--worker.name", f"hand-{i}", "--eval.backends", "cpu",
                 "--general.data_dir", os.path.join(tmp, f"w{i}")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        with htam.Client(endpoint, timeout_s=120) as c:
            sid = c.open_session(task="cpu_relu", backend="cpu", budget=100000)["session"]["id"]
            direction = c.next_step(sid)["direction"]["id"]
            if mode == "hand":
                deadline = time.monotonic() + 60
                while connected(c) < n and time.monotonic() < deadline:
                    time.sleep(0.1)
            t0 = time.monotonic()
            source = candidate(args.device_ms)
            first = c.submit(sid, source, direction_id=direction, summary="first",
                             wait=False)["job_id"]
            out["first_result_s"] = wait_all(c, [first]) - t0
            if mode == "pool":  # where the cold start goes: sbatch to the worker's registration
                sub = log_time(log, r"submitted worker job")
                joined = log_time(log, r"worker htam-bench-\S+ joined")
                out["submit_to_joined_s"] = round(joined - sub, 2) if sub and joined else None
            batch(c, sid, direction, args.batch, "warm-up", source)  # the pool grows to n here
            out["workers"] = connected(c)
            rates = [batch(c, sid, direction, args.batch, f"run {r}", source)
                     for r in range(args.repeats)]
            out["throughput_per_min"] = statistics.median(rates) * 60
            out["throughput_runs"] = [round(r * 60, 1) for r in rates]
    finally:
        stop_daemon(proc)
        for w in workers:
            w.terminate()
            w.wait(timeout=30)
        for job in slurm.squeue(job_name):
            slurm.scancel(job)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--jobs", default="1,2,4")
    p.add_argument("--device-ms", type=int, default=0,
                   help="every call of the candidate also sleeps this long (device time)")
    p.add_argument("--json", default="")
    args = p.parse_args()
    why = OneNodeSlurm.unavailable()
    if why:
        sys.exit(f"slurm_pool_bench: {why}")
    root = tempfile.mkdtemp(prefix="htam-slurm-bench-")
    os.chmod(root, 0o755)
    slurm = OneNodeSlurm(os.path.join(root, "slurm"))
    os.makedirs(slurm.dir)
    results = []
    try:
        slurm.start()
        for n in [int(x) for x in args.jobs.split(",")]:
            for mode in ("pool", "hand"):
                r = run_one(root, slurm, mode, n, args)
                results.append(r)
                print(json.dumps(r), flush=True)
    except ClusterUnavailable as e:
        sys.exit(f"slurm_pool_bench: {e}")
    finally:
        slurm.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.1f}; batch {args.batch}, "
          f"median of {args.repeats}; device_ms {args.device_ms}")
    print("| worker jobs | first result, pool (s) | first result, by hand (s) | "
          "evaluations/min, pool | evaluations/min, by hand | pool / by hand |")
    print("| --- | --- | --- | --- | --- | --- |")
    by = {(r["mode"], r["jobs"]): r for r in results}
    for n in sorted({r["jobs"] for r in results}):
        pl, hd = by[("pool", n)], by[("hand", n)]
        print(f"| {n} | {pl['first_result_s']:.2f} | {hd['first_result_s']:.2f} | "
              f"{pl['throughput_per_min']:.1f} | {hd['throughput_per_min']:.1f} | "
              f"{pl['throughput_per_min'] / hd['throughput_per_min']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
