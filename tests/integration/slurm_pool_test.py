"""htamd's worker pool against a real Slurm (docs/operations.md, "Clusters"): a one-node
cluster on this machine (slurm_cluster.py), htamd with no local devices, pool.manager = slurm
and CURVE on the worker endpoint. Candidates submitted to htamd make it sbatch CPU-backend worker
jobs; they are evaluated through them; a worker job scancelled while it evaluates loses nothing
(its job is requeued and completes on another worker job); the pool never exceeds
pool.max_jobs; once idle it shrinks to zero jobs in Slurm and zero workers in htamd.

Where no cluster can start here (not root, Slurm not installed, a daemon that does not come up)
the test exits 77, which ctest reports as skipped, with the reason.

Needs HTAM_HTAMD, HTAM_KEYGEN, HTAM_CLI and the SDK on PYTHONPATH; ctest sets them.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import htam  # noqa: E402
from slurm_cluster import ClusterUnavailable, OneNodeSlurm, start_daemon, stop_daemon  # noqa: E402

CLI = os.environ.get("HTAM_CLI", "build/tools/cli/htam")
SKIP = 77
TASK = "cpu_relu"
MAX_JOBS = 2
IDLE_S = 6

with open(os.path.join("configs", "tasks", TASK, "reference.cpp")) as f:
    REFERENCE = f.read()
# The same relu, slower: every call sleeps, so that its evaluation lasts long enough to cancel
# the worker job under it.
SLOW = REFERENCE.replace("#include <htam/kernel_abi.h>",
                         "#include <htam/kernel_abi.h>\n#include <unistd.h>").replace(
    "  const long n = htam_numel(&in[0]);", "  usleep(40000);\n  const long n = htam_numel(&in[0]);")


def status_fields(text):
    return dict(re.findall(r"^([a-zA-Z0-9_./:-]+): (.*)$", text, re.M))


class SlurmPoolTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = OneNodeSlurm.unavailable()
        if why:
            print(f"SKIP: {why}", flush=True)
            sys.exit(SKIP)
        cls.tmp = tempfile.mkdtemp(prefix="htam-slurm-")
        os.chmod(cls.tmp, 0o755)  # the sandboxed evaluation workers traverse it
        cls.slurm = OneNodeSlurm(os.path.join(cls.tmp, "slurm"))
        os.makedirs(cls.slurm.dir)
        cls.proc = None
        cls.job_name = f"htam-test-{os.getpid()}"
        try:
            cls.slurm.start()
        except ClusterUnavailable as e:
            cls.tearDownClass()
            print(f"SKIP: {e}", flush=True)
            sys.exit(SKIP)
        try:
            cls.proc, cls.endpoint, cls.log_path = start_daemon(
                cls.tmp, cls.slurm, cls.job_name, [
                    "--pool.max_jobs", str(MAX_JOBS), "--pool.queued_per_job", "1",
                    "--pool.idle_s", str(IDLE_S)])
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        stop_daemon(cls.proc)
        try:
            for job in cls.slurm.squeue(cls.job_name):
                cls.slurm.scancel(job)
        except Exception:  # noqa: BLE001 (the cluster may never have started)
            pass
        cls.slurm.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def workers(self, c):
        return status_fields(c.status("workers"))

    def wait_result(self, c, job_id, timeout_s=120):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            r = c.poll(job_id, wait_ms=1000)
            if r.get("done"):
                return r
        self.fail(f"job {job_id} not done in {timeout_s} s\n{self.log()[-4000:]}")

    def test_pool_submits_survives_scancel_and_shrinks_to_zero(self):
        with htam.Client(self.endpoint, timeout_s=60) as c:
            # Nothing queued: no worker job.
            time.sleep(1)
            self.assertEqual(self.slurm.squeue(self.job_name), {})
            sid = c.open_session(task=TASK, backend="cpu", budget=20)["session"]["id"]
            d = c.next_step(sid)["direction"]["id"]

            # 1. A queued evaluation with no worker: the pool submits a job, which evaluates it.
            ack = c.submit(sid, REFERENCE, direction_id=d, summary="the reference", wait=False)
            first = self.wait_result(c, ack["job_id"])
            self.assertEqual(first["status_name"], "Ok", first)
            w = self.workers(c)
            self.assertGreaterEqual(int(w["pool_jobs_submitted"]), 1, w)
            self.assertRegex(self.log(), rf"submitted worker job \d+ for backend 'cpu'")
            self.assertRegex(self.log(), rf"worker {self.job_name}-\d+ joined")
            # What Slurm stores of a worker job names the key file and holds no key.
            job = next(iter(self.slurm.squeue(self.job_name)))
            script, record = self.slurm.stored_job(job)
            work = os.path.join(self.tmp, "data", "pool")
            with open(os.path.join(work, "keys", "worker.key")) as f:
                secret = re.search(r"secret = (\S+)", f.read()).group(1)
            self.assertIn(os.path.join(work, "keys", "worker.key"), script)
            self.assertNotIn(secret, script)
            self.assertNotIn(secret, record)
            self.assertIn("Comment=htam:cpu", record)
            # What an operator reads: the pool's lines in `htam workers`.
            cli = subprocess.run([CLI, "--connect", self.endpoint, "workers"],
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(cli.returncode, 0, cli.stderr)
            self.assertIn("pool_manager: slurm", cli.stdout)
            self.assertRegex(cli.stdout, r"pool_jobs_submitted: [1-9]")

            # 2. scancel the worker job under a running evaluation: it completes elsewhere.
            ack = c.submit(sid, SLOW, direction_id=d, summary="slow relu", wait=False)
            victim = None
            deadline = time.monotonic() + 60
            while victim is None and time.monotonic() < deadline:
                text = c.status("workers")
                m = re.search(rf"^worker_{self.job_name}-(\d+): .* running=1 ", text, re.M)
                if m:
                    victim = m.group(1)
                else:
                    time.sleep(0.05)
            self.assertIsNotNone(victim, self.log()[-3000:])
            requeued_before = int(self.workers(c)["jobs_requeued"])
            self.slurm.scancel(victim)
            slow = self.wait_result(c, ack["job_id"])
            self.assertEqual(slow["status_name"], "Ok", slow)
            w = self.workers(c)
            self.assertEqual(int(w["jobs_requeued"]), requeued_before + 1, w)
            self.assertNotIn(victim, self.slurm.squeue(self.job_name))
            self.assertRegex(self.log(), rf"worker {self.job_name}-{victim} dropped: it left; "
                                         r"1 job\(s\) requeued")

            # 3. A burst: every candidate evaluated, never more than pool.max_jobs jobs.
            acks = [c.submit(sid, REFERENCE, direction_id=d, summary=f"burst {i}", wait=False)
                    for i in range(5)]
            most = 0
            pending = {a["job_id"] for a in acks}
            deadline = time.monotonic() + 120
            while pending and time.monotonic() < deadline:
                most = max(most, len(self.slurm.squeue(self.job_name)))
                for j in list(pending):
                    r = c.poll(j)
                    if r.get("done"):
                        self.assertEqual(r["status_name"], "Ok", r)
                        pending.discard(j)
                time.sleep(0.1)
            self.assertFalse(pending, self.log()[-3000:])
            self.assertLessEqual(most, MAX_JOBS)
            self.assertGreaterEqual(most, 1)

            # 4. Idle: the pool drains and cancels its jobs; none left in Slurm or in htamd.
            deadline = time.monotonic() + IDLE_S + 30
            while time.monotonic() < deadline:
                w = self.workers(c)
                # The pool's own view (pool_jobs) follows squeue at its next tick.
                if (not self.slurm.squeue(self.job_name) and w["workers"] == "0"
                        and w["pool_jobs"] == "0"):
                    break
                time.sleep(0.5)
            self.assertEqual(self.slurm.squeue(self.job_name), {}, self.log()[-3000:])
            w = self.workers(c)
            self.assertEqual(w["workers"], "0", w)
            self.assertEqual(w["pool_jobs"], "0", w)
            self.assertGreaterEqual(int(w["pool_jobs_cancelled_idle"]), 1, w)
            self.assertEqual(w["jobs_failed"], "0", w)
            self.assertRegex(self.log(), r"idle for \d+ s \(pool\.idle_s\): cancelled")
            self.assertNotIn("result not recorded", self.log())

        # The job script names the key; the key lives in a folder only htamd's user may enter.
        work = os.path.join(self.tmp, "data", "pool")
        with open(os.path.join(work, "worker-job.sh")) as f:
            script = f.read()
        with open(os.path.join(work, "keys", "worker.key")) as f:
            secret = re.search(r"secret = (\S+)", f.read()).group(1)
        self.assertNotIn(secret, script)
        self.assertIn("--worker.key_file", script)
        self.assertEqual(os.stat(os.path.join(work, "keys")).st_mode & 0o777, 0o700)


if __name__ == "__main__":
    unittest.main()
