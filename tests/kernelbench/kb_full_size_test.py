"""KernelBench problems at full size on the CPU backend, through htam-eval (language kernelbench).

- A problem whose tensors need more than eval.max_case_mb (2 GiB: a ReLU over 2**28 + 2**20
  floats, 2.01 GiB of input and output) is evaluated: its golden data is generated, kept and
  compared by kb_golden.py in memory (the device's; here the host's), and no tensor file is
  written under the cache or the temporary directory. Where this host lacks the memory the
  verdict says so instead ("cannot be evaluated on this device"). A kernel-ABI candidate on the
  same task, whose golden data goes through host files, is still refused by eval.max_case_mb.
- A task that does not fit is refused before any tensor is made, with the memory message.
- The golden cache of kernel-ABI candidates stays under eval.kernelbench_cache_mb (the least
  recently used entries evicted), concurrent htam-eval processes sharing it compute a task's
  golden data once and all read it whole, and a full disk fails the one job with a message that
  says so, while the next job on a disk with room is Ok.

  HTAM_EVAL   the htam-eval binary (default build/tools/eval/htam-eval)
Run from the repository root (ctest does). Skips without PyTorch in /usr/bin/python3.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVAL = os.environ.get("HTAM_EVAL") or os.path.join(ROOT, "build/tools/eval/htam-eval")
HELPER = os.path.join(ROOT, "tools/kernelbench/kb_helper.py")
PY = "/usr/bin/python3"
SMALL_TASK = os.path.join(ROOT, "tests/kernelbench/tasks/kb_linear_relu_open")
sys.path.insert(0, os.path.join(ROOT, "tests", "kernelbench"))
from kb_testlib import (CLAMP_MODELNEW, OPEN_POLICY, big_relu_problem,  # noqa: E402
                        import_task)
BIG_PROBLEM = big_relu_problem("(1 << 28) + (1 << 20)")
BIG_MODELNEW = CLAMP_MODELNEW

# A kernel-ABI candidate for the big task (its golden data would be host files).
RELU_CPP = r'''#include <htam/kernel_abi.h>
HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  for (long i = 0; i < htam_numel(&in[0]); ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return 0;
}
'''

# Limits that let the host's memory decide (not the sandbox's defaults for small tasks).
FULL_SIZE = ["--backend", "cpu", "--seeds", "1", "--sets", "1", "--reps", "3",
             "--eval.warmup_reps", "1", "--eval.memory_limit_mb", "0",
             "--eval.host_memory_limit_mb", "0", "--eval.kernelbench_memory_headroom", "1"]
MEMORY_REFUSAL = "cannot be evaluated on this device"


def have_torch():
    return subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0


def evaluate(task, candidate, extra, env=None, language=None):
    argv = [EVAL, "--task", task] + extra + (["--language", language] if language else [])
    p = subprocess.run(argv + [candidate], capture_output=True, text=True, timeout=1500,
                       cwd=ROOT, env=env)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if not lines:
        return {"status": "no result (exit %d)" % p.returncode, "diagnostics": p.stderr[-600:]}
    return lines[-1]


def big_files(root, over=1 << 20):
    found = []
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            try:
                if os.path.getsize(p) > over:
                    found.append((p, os.path.getsize(p)))
            except OSError:
                pass
    return found


def tree_bytes(root):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs
               if os.path.isfile(os.path.join(d, f)))


@unittest.skipUnless(os.path.isfile(EVAL), "htam-eval is not built")
@unittest.skipUnless(have_torch(), "PyTorch is not importable by /usr/bin/python3 "
                     "(install python3-torch; tools/setup.sh does)")
class FullSize(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="kb-full-")
        os.chmod(cls.dir, 0o755)
        cls.task = import_task(PY, HELPER, BIG_PROBLEM, cls.dir, "kb_big_relu", OPEN_POLICY,
                               timeout=None)
        cls.candidate = os.path.join(cls.dir, "big_modelnew.py")
        with open(cls.candidate, "w") as f:
            f.write(BIG_MODELNEW)
        cls.cpp = os.path.join(cls.dir, "relu.cpp")
        with open(cls.cpp, "w") as f:
            f.write(RELU_CPP)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def fresh(self, name):
        d = os.path.join(self.dir, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        os.chmod(d, 0o755)
        return d

    def test_a_task_over_two_gib_is_evaluated_with_no_tensor_file(self):
        cache, tmp = self.fresh("cache-big"), self.fresh("tmp-big")
        env = dict(os.environ, TMPDIR=tmp)
        r = evaluate(self.task, self.candidate, FULL_SIZE + ["--cache", cache], env=env)
        print("\nfull size: %s: %s" % (r["status"], r["diagnostics"][:400]))
        self.assertNotIn("eval.max_case_mb", r["diagnostics"])
        if r["status"] != "Ok":
            self.assertEqual(r["status"], "InfraError", r["diagnostics"])
            self.assertIn(MEMORY_REFUSAL, r["diagnostics"])
        else:
            self.assertIn("passed 1 correctness trials", r["diagnostics"])
            self.assertGreater(r["median_us"], 0)
        self.assertEqual(big_files(cache) + big_files(tmp), [],
                         "tensor files written under the cache or temporary directory")

    def test_a_wrong_candidate_at_full_size_is_incorrect(self):
        if os.environ.get("HTAM_FULL_SIZE_WRONG", "1") == "0":
            self.skipTest("HTAM_FULL_SIZE_WRONG=0")
        wrong = os.path.join(self.dir, "big_wrong.py")
        with open(wrong, "w") as f:
            # Right everywhere but the last element: compared to the last element.
            f.write(BIG_MODELNEW.replace("return x.clamp_min(0)",
                                         "y = x.clamp_min(0)\n        y[-1] = 7.0\n        return y"))
        r = evaluate(self.task, wrong, FULL_SIZE + ["--cache", self.fresh("cache-wrong")])
        print("\nfull size, wrong: %s: %s" % (r["status"], r["diagnostics"][:300]))
        if r["status"] == "InfraError" and MEMORY_REFUSAL in r["diagnostics"]:
            self.skipTest("this host lacks the memory: " + r["diagnostics"][:200])
        self.assertEqual(r["status"], "Incorrect", r["diagnostics"])
        self.assertIn("1 of %d elements of 'out' outside tolerance" % ((1 << 28) + (1 << 20)),
                      r["diagnostics"])

    def test_the_host_files_path_keeps_its_bound(self):
        r = evaluate(self.task, self.cpp, ["--backend", "cpu", "--cache",
                                           self.fresh("cache-cpp")], language="cpp")
        # Refused up front (a usage error of htam-eval: --language cpp is known before any job).
        self.assertNotEqual(r["status"], "Ok", r)
        self.assertIn("over the limit of 2147483648 (eval.max_case_mb)", r["diagnostics"])

    def test_a_task_that_does_not_fit_is_refused_saying_so(self):
        cache, tmp = self.fresh("cache-refused"), self.fresh("tmp-refused")
        extra = [a for a in FULL_SIZE] + ["--cache", cache]
        extra[extra.index("--eval.kernelbench_memory_headroom") + 1] = "100000"
        r = evaluate(self.task, self.candidate, extra, env=dict(os.environ, TMPDIR=tmp))
        self.assertEqual(r["status"], "InfraError", r)
        self.assertIn(MEMORY_REFUSAL, r["diagnostics"])
        self.assertIn("GiB free of", r["diagnostics"])
        self.assertEqual(big_files(cache) + big_files(tmp), [])


KERNEL_CPP = r'''#include <htam/kernel_abi.h>
#include <cmath>
// y = relu(x W^T + b) for kb_linear_relu_open (x [32, 64], W [48, 64], b [48]).
HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* x = static_cast<const float*>(in[0].data);
  const float* w = static_cast<const float*>(in[1].data);
  const float* b = static_cast<const float*>(in[2].data);
  float* y = static_cast<float*>(out[0].data);
  for (int i = 0; i < 32; ++i)
    for (int j = 0; j < 48; ++j) {
      double s = b[j];
      for (int k = 0; k < 64; ++k) s += double(x[i * 64 + k]) * double(w[j * 64 + k]);
      y[i * 48 + j] = s > 0 ? float(s) : 0.0f;
    }
  return 0;
}
'''


@unittest.skipUnless(os.path.isfile(EVAL), "htam-eval is not built")
@unittest.skipUnless(have_torch(), "PyTorch is not importable by /usr/bin/python3")
class GoldenCache(unittest.TestCase):
    """The host golden cache of kernel-ABI candidates on KernelBench tasks."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="kb-cache-")
        os.chmod(cls.dir, 0o755)
        cls.cpp = os.path.join(cls.dir, "linear_relu.cpp")
        with open(cls.cpp, "w") as f:
            f.write(KERNEL_CPP)
        # Copies of the small task that differ in their task.json: separate cache entries.
        cls.tasks = []
        for i in range(3):
            d = os.path.join(cls.dir, "kb_small_%d" % i)
            shutil.copytree(SMALL_TASK, d)
            with open(os.path.join(d, "task.json")) as f:
                t = json.load(f)
            t["description"] += " (copy %d)" % i
            with open(os.path.join(d, "task.json"), "w") as f:
                json.dump(t, f, indent=2)
            cls.tasks.append(d)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    ARGS = ["--backend", "cpu", "--seeds", "2", "--sets", "2", "--reps", "3", "--language", "cpp",
            "--eval.kernelbench_seed_pool", "0"]

    def run_cpp(self, task, cache, extra=()):
        return evaluate(task, self.cpp, self.ARGS + ["--cache", cache] + list(extra))

    def entries(self, cache):
        root = os.path.join(cache, "kernelbench")
        return sorted(os.path.join(k, d) for k in os.listdir(root)
                      if os.path.isdir(os.path.join(root, k))
                      for d in os.listdir(os.path.join(root, k)))

    def test_the_cache_stays_under_its_bound_evicting_the_oldest(self):
        cache = tempfile.mkdtemp(dir=self.dir)
        os.chmod(cache, 0o755)
        root = os.path.join(cache, "kernelbench")
        bound = 1 << 20
        limit = ["--eval.kernelbench_cache_mb", "1"]
        # Two tasks, each entry padded to 45 % of the bound: the third task's golden data takes
        # the cache over it, and the oldest entry (the first task's) is evicted.
        for t in self.tasks[:2]:
            r = self.run_cpp(t, cache, limit)
            self.assertEqual(r["status"], "Ok", r["diagnostics"])
            if t == self.tasks[0]:
                oldest = self.entries(cache)[0]
            for e in self.entries(cache):
                pad = os.path.join(root, e, "pad.bin")
                if not os.path.exists(pad):
                    size = tree_bytes(os.path.join(root, e))
                    self.assertLess(size, 0.45 * bound, "an entry is larger than assumed")
                    with open(pad, "wb") as f:
                        f.write(b"\0" * int(0.45 * bound - size))
        before = set(self.entries(cache))
        self.assertEqual(len(before), 2)
        r = self.run_cpp(self.tasks[2], cache, limit)
        self.assertEqual(r["status"], "Ok", r["diagnostics"])
        after = self.entries(cache)
        total = tree_bytes(root)
        print("\ncache after 3 tasks: %d bytes, bound %d; %d entries" % (total, bound, len(after)))
        self.assertLessEqual(total, bound)
        self.assertEqual(len(after), 2, after)
        evicted = before - set(after)
        self.assertEqual(len(evicted), 1)
        self.assertEqual(evicted, {oldest}, "not the least recently used entry")
        # The task evicted is evaluated again (its golden data computed anew): Ok.
        r = self.run_cpp(self.tasks[0], cache, limit)
        self.assertEqual(r["status"], "Ok", r["diagnostics"])
        self.assertTrue(r["golden_computed"])
        self.assertLessEqual(tree_bytes(root), bound)

    def test_concurrent_processes_share_a_fresh_cache(self):
        cache = tempfile.mkdtemp(dir=self.dir)
        os.chmod(cache, 0o755)
        with ThreadPoolExecutor(6) as ex:
            rs = list(ex.map(lambda _: self.run_cpp(self.tasks[1], cache), range(6)))
        self.assertEqual([r["status"] for r in rs], ["Ok"] * 6,
                         [r["diagnostics"][:200] for r in rs])
        computed = sum(1 for r in rs if r["golden_computed"])
        print("\n6 processes at once: golden data computed by %d" % computed)
        self.assertEqual(computed, 1, "the golden data was computed more than once")
        leftovers = [f for d, _, fs in os.walk(cache) for f in fs if ".tmp" in f]
        self.assertEqual(leftovers, [])

    def test_a_full_disk_fails_the_job_alone(self):
        if shutil.which("unshare") is None or subprocess.run(
                ["unshare", "-m", "true"], capture_output=True).returncode != 0:
            self.skipTest("no mount namespace here (unshare -m) for a small file system")
        cache = tempfile.mkdtemp(dir=self.dir)
        os.chmod(cache, 0o755)
        # A 64 KiB file system as the cache: the golden files of the task do not fit (the
        # sandbox's read-only view would hide the mount: off for this job).
        script = ('mount -t tmpfs -o size=64k tmpfs "$1" && chmod 755 "$1" && shift && '
                  'exec "$@"')
        argv = ["unshare", "-m", "sh", "-c", script, "sh", cache, EVAL, "--task", self.tasks[2],
                ] + self.ARGS + ["--cache", cache, "--eval.sandbox_readonly_fs", "false",
                                 self.cpp]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=900, cwd=ROOT)
        lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        self.assertTrue(lines, p.stderr[-500:])
        r = lines[-1]
        print("\nfull disk: %s: %s" % (r["status"], r["diagnostics"][:300]))
        self.assertEqual(r["status"], "InfraError", r["diagnostics"])
        self.assertTrue("MiB free" in r["diagnostics"] or "No space left" in r["diagnostics"],
                        r["diagnostics"])
        # The next job, on a disk with room, is Ok.
        r = self.run_cpp(self.tasks[2], tempfile.mkdtemp(dir=self.dir))
        self.assertEqual(r["status"], "Ok", r["diagnostics"])


if __name__ == "__main__":
    unittest.main()
