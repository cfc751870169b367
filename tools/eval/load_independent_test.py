"""Verdicts that do not depend on load: the same candidates evaluated one at a time and 16 at once
(16 htam-eval processes on this host, CPU backend) get the same statuses. Among them a candidate
whose every call takes a while (well inside its stage limit alone, past it in wall time when 16
evaluations share the host's cores) and one that hangs (a Timeout either way). The limits count
each job's own work (daemon/eval/work_clock.h; eval.load_independent_limits).

  HTAM_EVAL   the htam-eval binary (default build/tools/eval/htam-eval)
Run from the repository root (ctest does).
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVAL = os.environ.get("HTAM_EVAL") or os.path.join(ROOT, "build/tools/eval/htam-eval")
SMALL = os.path.join(ROOT, "tests/hacks/cpu/small_relu")
# A stage limit of 4 s: the slow candidate's timing stage needs about 1 s of CPU alone.
ARGS = ["--backend", "cpu", "--seeds", "1", "--reps", "5", "--sets", "2",
        "--eval.case_timeout_s", "4", "--eval.job_timeout_s", "60"]
CONCURRENT = 16

HONEST = r"""#include <htam/kernel_abi.h>
HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  for (long i = 0; i < htam_numel(&in[0]); ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return 0;
}
"""
WRONG = HONEST.replace("x[i] > 0.0f ? x[i] : 0.0f", "x[i]")
# Correct, and about 0.1 s of CPU per call (a busy loop the compiler cannot drop).
SLOW = HONEST.replace("  return 0;", """  volatile unsigned long spin = 0;
  for (unsigned long k = 0; k < SPIN; ++k) spin = spin + k;
  return 0;""")
HANG = HONEST.replace("  return 0;", """  volatile unsigned long spin = 0;
  for (;;) spin = spin + 1;
  return 0;""")


def spin_per_100ms():
    """Loop iterations this machine runs in about 0.1 s of CPU (measured, not assumed)."""
    src = ("#include <cstdio>\nint main(){volatile unsigned long s=0;"
           "for(unsigned long k=0;k<200000000UL;++k)s=s+k;return 0;}\n")
    d = tempfile.mkdtemp()
    try:
        with open(os.path.join(d, "spin.cc"), "w") as f:
            f.write(src)
        subprocess.run(["g++", "-O2", "-o", os.path.join(d, "spin"), os.path.join(d, "spin.cc")],
                       check=True)
        t0 = time.process_time()
        r0 = os.times()
        subprocess.run([os.path.join(d, "spin")], check=True)
        r1 = os.times()
        cpu = (r1.children_user + r1.children_system) - (r0.children_user + r0.children_system)
        del t0
        return max(1, int(200000000 * 0.10 / max(cpu, 1e-3)))
    finally:
        shutil.rmtree(d)


def evaluate(path, cache=None):
    extra = ["--cache", cache] if cache else []
    p = subprocess.run([EVAL, "--task", SMALL] + ARGS + extra + [path], capture_output=True,
                       text=True, timeout=900, cwd=ROOT)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if not lines:
        return "no result (exit %d): %s" % (p.returncode, p.stderr[-300:]), ""
    return lines[-1]["status"], lines[-1]["diagnostics"][:300]


@unittest.skipUnless(os.path.isfile(EVAL), "htam-eval is not built")
class LoadIndependentVerdicts(unittest.TestCase):
    def test_sixteen_at_once_match_one_at_a_time(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        os.chmod(d, 0o755)
        spin = spin_per_100ms()
        files = {}
        for name, src in (("honest", HONEST), ("wrong", WRONG),
                          ("slow", SLOW.replace("SPIN", "%dUL" % spin)), ("hang", HANG)):
            files[name] = os.path.join(d, name + ".cpp")
            with open(files[name], "w") as f:
                f.write(src)
            os.chmod(files[name], 0o644)
        alone = {name: evaluate(path) for name, path in files.items()}
        self.assertEqual(alone["honest"][0], "Ok", alone["honest"])
        self.assertEqual(alone["wrong"][0], "Incorrect", alone["wrong"])
        self.assertEqual(alone["slow"][0], "Ok", alone["slow"])
        self.assertEqual(alone["hang"][0], "Timeout", alone["hang"])
        order = [n for n in ("slow", "honest", "wrong", "slow", "hang", "slow", "honest",
                             "slow", "wrong", "slow", "honest", "slow", "hang", "slow",
                             "honest", "slow")][:CONCURRENT]
        # Each htam-eval with its own cache: concurrent htam-eval processes sharing one compile
        # cache race on its setup (a compile's output file denied to another's worker).
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=CONCURRENT) as pool:
            together = list(pool.map(lambda n: evaluate(files[n]), order))
        wall = time.monotonic() - t0
        for name, got in zip(order, together):
            with self.subTest(candidate=name):
                self.assertEqual(got[0], alone[name][0],
                                 "%s: %s at once, %s alone; %s" % (name, got, alone[name][0],
                                                                   got[1]))
        print("%d evaluations at once took %.0f s on %d cores" % (CONCURRENT, wall,
                                                                 os.cpu_count()))


if __name__ == "__main__":
    unittest.main()
