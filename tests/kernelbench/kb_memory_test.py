"""Jobs that share a device reserve its memory before they make their tensors.

Every ModelNew job checks the device's free memory when it starts; on an H200, four full-size
KernelBench jobs started together each found room, then ran the device out of memory together:
two verdicts of Crash ("CUDA out of memory") that no candidate earned, and a convolution's eager
baseline timed without room for cuDNN's workspace (1.86x for a Model against itself). So a job
reserves what it estimated (eval.kernelbench_memory_headroom x the copies it holds) in a ledger
beside the golden cache, and waits while the live reservations and its own would pass
eval.kernelbench_memory_share of the device's memory (timing_lock.h MemoryReservation; its
unit test covers the bound and a holder killed with SIGKILL).

The ledger lives in the host-wide folder eval.device_lock_dir, not beside a cache: htam-eval
runs without --cache each make a temporary cache of their own, and on an H200 four such runs
(htam-bench kernelbench --jobs 4) reserved in four ledgers, so none waited for another.

Here two htam-eval processes evaluate at once on the CPU backend, each with its own temporary
cache and one lock folder: with a share of the host's memory that holds one of them but not both
they run one after the other (one says it waited, and neither waited out its turn on the device),
with the default they overlap (neither waits); both are Ok either way. A job that can never fit
in the share is refused, saying so.

A job holds its turn on the device only while it works there. On an H200 eight full-size jobs
held theirs shared from start to end, their imports and builds included, so each timed phase
waited for all the others to end or went on without its turn: 18 of 100 level-1 problems in
500 s. Here one job's import takes 25 s (a build, as load_inline's) while another job, started
just after, times its candidate and its baseline with the device to itself and ends first.

  HTAM_EVAL   the htam-eval binary (default build/tools/eval/htam-eval)
Run from the repository root (ctest does). Skips without PyTorch in /usr/bin/python3.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVAL = os.environ.get("HTAM_EVAL") or os.path.join(ROOT, "build/tools/eval/htam-eval")
PY = "/usr/bin/python3"
TASK = os.path.join(ROOT, "tests/kernelbench/tasks/kb_linear_relu_open")
CANDIDATE = os.path.join(ROOT, "tests/kernelbench/modelnew/honest_torch.py")
ARGS = ["--backend", "cpu", "--language", "kernelbench", "--seeds", "1", "--sets", "1",
        "--reps", "3", "--task", TASK]
WAITED = "for device memory other evaluations had reserved"


def have_torch():
    return subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0


def evaluate(extra, candidate=CANDIDATE):
    p = subprocess.run([EVAL] + ARGS + extra + [candidate], capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if not lines:
        return {"status": "no result (exit %d)" % p.returncode, "diagnostics": p.stderr[-600:]}
    return lines[-1]


@unittest.skipUnless(os.path.isfile(EVAL), "htam-eval is not built")
@unittest.skipUnless(have_torch(), "PyTorch is not importable by /usr/bin/python3 "
                     "(install python3-torch; tools/setup.sh does)")
class SharedDeviceMemory(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kb-memory-")
        os.chmod(self.dir, 0o755)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def two_at_once(self, name, extra):
        # No --cache: each run makes a cache of its own (its golden data and baseline too, the
        # same work for both); the lock folder is the host's, here one of the test's own.
        locks = os.path.join(self.dir, name + "-locks")
        with ThreadPoolExecutor(2) as pool:
            rs = list(pool.map(evaluate, [["--eval.device_lock_dir", locks] + extra] * 2))
        for r in rs:
            self.assertEqual(r["status"], "Ok", r["diagnostics"])
        # Made for every user's evaluations: sticky and world-writable, the ledger inside.
        self.assertEqual(os.stat(locks).st_mode & 0o7777, 0o1777)
        self.assertTrue(any(f.endswith(".memory.d") for f in os.listdir(locks)),
                        os.listdir(locks))
        return [WAITED in r["diagnostics"] for r in rs], rs

    def test_jobs_that_do_not_fit_together_run_one_after_the_other(self):
        # A headroom that makes the small task ask about 1 GiB, and a share of the host's memory
        # that holds one such job but not two: read from the refusal that a share of almost
        # nothing gives (it names the need and the memory).
        big = ["--eval.kernelbench_memory_headroom", "10000"]
        cache = os.path.join(self.dir, "refused")
        refused = evaluate(["--cache", cache, "--eval.kernelbench_memory_share", "1e-12"] + big)
        self.assertEqual(refused["status"], "InfraError", refused["diagnostics"])
        self.assertIn("eval.kernelbench_memory_share", refused["diagnostics"])
        need = float(re.search(r"needs about ([0-9.]+) GiB", refused["diagnostics"]).group(1))
        total = float(re.search(r"GiB free of ([0-9.]+) GiB", refused["diagnostics"]).group(1))
        self.assertGreater(need, 0.1, refused["diagnostics"])
        share = "%.6f" % (1.5 * need / total)
        waited, rs = self.two_at_once("one-fits", ["--eval.kernelbench_memory_share", share] + big)
        self.assertEqual(sorted(waited), [False, True],
                         "exactly one job should have waited: " +
                         " | ".join(r["diagnostics"][-300:] for r in rs))
        # The waiting job held no turn on the device meanwhile: the other timed with the device
        # to itself, without waiting out its turn.
        for r in rs:
            self.assertNotIn("went on without its turn", r["diagnostics"])

    def test_jobs_that_fit_together_do_not_wait(self):
        waited, rs = self.two_at_once("default-share", [])
        self.assertEqual(waited, [False, False], " | ".join(r["diagnostics"][-300:] for r in rs))

    def test_a_job_that_builds_holds_no_turn_on_the_device(self):
        # Bounds short enough that a wait for the other job's build would pass them (and say so
        # in the verdict): 3 s for a timed phase, 5 s for the eager baseline's.
        locks = os.path.join(self.dir, "turn-locks")
        bounds = ["--eval.device_lock_dir", locks, "--eval.timing_lock_wait_s", "3",
                  "--eval.device_memory_wait_s", "5"]
        slow = os.path.join(self.dir, "slow_build.py")
        with open(CANDIDATE) as f:
            honest = f.read()
        with open(slow, "w") as f:
            f.write("import time\ntime.sleep(25)  # as long as a load_inline build\n" + honest)
        ended = {}

        def run(name, candidate, delay):
            time.sleep(delay)
            r = evaluate(bounds, candidate)
            ended[name] = time.monotonic()
            return r

        with ThreadPoolExecutor(2) as pool:
            building = pool.submit(run, "building", slow, 0)
            timing = pool.submit(run, "timing", CANDIDATE, 2)
            rs = [building.result(), timing.result()]
        for r in rs:
            self.assertEqual(r["status"], "Ok", r["diagnostics"])
            self.assertNotIn("went on without its turn", r["diagnostics"])
        self.assertLess(ended["timing"], ended["building"],
                        "the job that timed waited for the other's build")


if __name__ == "__main__":
    unittest.main()
