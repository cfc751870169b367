#!/usr/bin/python3
"""ModelNew candidates at full size and their timing's stability on a real GPU, through htam-eval
(language kernelbench, CUDA backend).

  - a KernelBench problem whose tensors need 4 GiB (ReLU over 2**29 floats; eval.max_case_mb is
    2 GiB) is evaluated: golden data generated, kept and compared on the device by kb_golden.py;
    no tensor file is written under the cache or the scratch directory; a wrong candidate is
    Incorrect at the element it got wrong;
  - a task that does not fit in the device's free memory is refused saying so;
  - the same device-bound ModelNew (relu_load_cuda.py on a ReLU over 2**26 floats) evaluated
    three times in one run: medians within 3 % of each other (warm-up of
    eval.kernelbench_warmup_ms, the device's turn exclusive while timing), each with its spread
    and KernelBench's CUDA-event figure;
  - the same ModelNew on tests/gpu/kernelbench/kb_relu (2**22 floats, host-bound: Python's time
    per call outweighs the kernel's) three times: each median within 3 % of KernelBench's
    CUDA-event figure of the same run (the host's own noise between processes is not the
    harness's to remove).

Skips (with the reason) where no CUDA device is usable by the interpreter. Environment:
  HTAM_KB_PYTHON   python with PyTorch+CUDA (default: python3 on PATH)
  HTAM_EVAL        htam-eval (default: build/tools/eval/htam-eval)
  OUT              where to write kb_device_golden_gpu.jsonl (default /tmp)
Run: python3 tests/gpu/kb_device_golden_gpu_test.py -v   (tools/gpu/one_run.sh kbdevice does)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PY = os.environ.get("HTAM_KB_PYTHON") or shutil.which("python3") or "/usr/bin/python3"
EVALUATE = os.environ.get("HTAM_EVAL") or os.path.join(ROOT, "build/tools/eval/htam-eval")
HELPER = os.path.join(ROOT, "tools/kernelbench/kb_helper.py")
RELU_TASK = os.path.join(ROOT, "tests/gpu/kernelbench/kb_relu")
RELU_MN = os.path.join(RELU_TASK, "modelnew/relu_load_cuda.py")
sys.path.insert(0, os.path.join(ROOT, "tests", "kernelbench"))
from kb_testlib import (CLAMP_MODELNEW, OPEN_POLICY, big_relu_problem,  # noqa: E402
                        cuda_torch, import_task)
BIG_PROBLEM = big_relu_problem("1 << 29")
BIG_MODELNEW = CLAMP_MODELNEW


def big_files(root, over=1 << 20):
    return [(os.path.join(d, f), os.path.getsize(os.path.join(d, f)))
            for d, _, fs in os.walk(root) for f in fs
            if os.path.isfile(os.path.join(d, f)) and os.path.getsize(os.path.join(d, f)) > over]


@unittest.skipUnless(cuda_torch(PY), "no CUDA device usable by %s (set HTAM_KB_PYTHON to a "
                     "Python with PyTorch+CUDA on a GPU machine)" % PY)
@unittest.skipUnless(os.access(EVALUATE, os.X_OK), "htam-eval not found at %s (set "
                     "HTAM_EVAL)" % EVALUATE)
class KbDeviceGoldenGpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="htam-kb-device-")
        os.chmod(cls.work, 0o755)
        cls.task = import_task(PY, HELPER, BIG_PROBLEM, cls.work, "kb_big_relu", OPEN_POLICY)
        cls.good = os.path.join(cls.work, "big_good.py")
        with open(cls.good, "w") as f:
            f.write(BIG_MODELNEW)
        cls.wrong = os.path.join(cls.work, "big_wrong.py")
        with open(cls.wrong, "w") as f:
            f.write(BIG_MODELNEW.replace(
                "return x.clamp_min(0)", "y = x.clamp_min(0)\n        y[-1] = 7.0\n        return y"))
        cls.rows = []

    @classmethod
    def tearDownClass(cls):
        with open(os.path.join(os.environ.get("OUT", "/tmp"), "kb_device_golden_gpu.jsonl"),
                  "w") as f:
            for r in cls.rows:
                f.write(json.dumps(r) + "\n")
        shutil.rmtree(cls.work, ignore_errors=True)

    def evaluate(self, task, files, *extra):
        scratch = tempfile.mkdtemp(dir=self.work)
        cache = tempfile.mkdtemp(dir=self.work)
        for d in (scratch, cache):
            os.chmod(d, 0o755)
        cmd = [EVALUATE, "--task", task, "--backend", "cuda", "--language", "kernelbench",
               "--eval.kernelbench_python", PY, "--eval.kernelbench_helper", HELPER,
               "--eval.scratch_dir", scratch, "--cache", cache] + list(extra) + files
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1500,
                           env=dict(os.environ, TMPDIR=scratch))
        rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        self.rows += rows
        self.assertTrue(rows, p.stderr[-800:])
        return rows, big_files(cache) + big_files(scratch)

    def test_a_four_gib_problem_is_evaluated_on_the_device(self):
        rows, files = self.evaluate(self.task, [self.good, self.wrong], "--seeds", "2",
                                    "--sets", "2", "--reps", "20")
        for r in rows:
            print("full size %s: %s: %s" % (os.path.basename(r["file"]), r["status"],
                                            r["diagnostics"][:300]))
        self.assertEqual(rows[0]["status"], "Ok", rows[0]["diagnostics"])
        self.assertEqual(rows[1]["status"], "Incorrect", rows[1]["diagnostics"])
        self.assertIn("1 of %d elements of 'out' outside tolerance" % (1 << 29),
                      rows[1]["diagnostics"])
        self.assertEqual(files, [], "tensor files on the host")

    def test_a_problem_that_does_not_fit_is_refused(self):
        rows, files = self.evaluate(self.task, [self.good],
                                    "--eval.kernelbench_memory_headroom", "100000")
        self.assertEqual(rows[0]["status"], "InfraError", rows[0]["diagnostics"])
        self.assertIn("cannot be evaluated on this device", rows[0]["diagnostics"])
        self.assertEqual(files, [])

    @staticmethod
    def event_medians(rows):
        return [float(m.group(1)) for m in
                (re.search(r"CUDA events: median ([0-9.]+) us", r["diagnostics"]) for r in rows)
                if m]

    def test_the_same_candidate_three_times_within_three_percent(self):
        """A device-bound ModelNew (load_cuda ReLU over 2**26 floats: 512 MiB moved per call, the
        device's time well above Python's per call) evaluated three times in one run. The figure
        includes the forward's Python work up to the launch (the start event precedes the call,
        as in KernelBench's method): on an H200 machine whose host path varies by 30-50 us between
        processes this failed at 13.8 % and 18.6 %."""
        task = import_task(PY, HELPER, big_relu_problem("1 << 26"), self.work, "kb_relu_64m")
        rows, _ = self.evaluate(task, [RELU_MN] * 3)
        self.assertEqual([r["status"] for r in rows], ["Ok"] * 3,
                         [r["diagnostics"][:200] for r in rows])
        med = [r["median_us"] for r in rows]
        events = self.event_medians(rows)
        spread = max(abs(a - b) / min(a, b) for a in med for b in med)
        print("stable: medians %s us, spreads %s us, CUDA-event medians %s us, max difference "
              "%.1f %% (target <= 3 %%), eager %.1f us" % (
                  [round(m, 2) for m in med], [round(r["spread_us"], 2) for r in rows],
                  events, 100 * spread, rows[0]["baseline_us"]))
        self.assertEqual(len(events), 3, "KernelBench's CUDA-event figure missing")
        for r in rows:
            self.assertIn("spread (IQR)", r["diagnostics"])
        self.assertLessEqual(spread, 0.03)

    def test_a_host_bound_candidate_reads_as_kernelbench_times_it(self):
        """A host-bound ModelNew (the same ReLU over 2**22 floats: Python's work per call, 35-65
        us on an H200 machine, outweighs the kernel's 7 us) evaluated three times in one run.
        Its time moves between processes with the host (measured: pinned to one core or not,
        with no background work, 36-66 us), so the check is the one the harness owns: each
        evaluation's median is KernelBench's own CUDA-event figure of that run within 3 %."""
        rows, _ = self.evaluate(RELU_TASK, [RELU_MN] * 3)
        self.assertEqual([r["status"] for r in rows], ["Ok"] * 3,
                         [r["diagnostics"][:200] for r in rows])
        med = [r["median_us"] for r in rows]
        events = self.event_medians(rows)
        print("host-bound: medians %s us, CUDA-event medians %s us, eager %.1f us" % (
            [round(m, 2) for m in med], events, rows[0]["baseline_us"]))
        self.assertEqual(len(events), 3, "KernelBench's CUDA-event figure missing")
        for m, e in zip(med, events):
            self.assertLessEqual(abs(m - e) / e, 0.03, (med, events))

if __name__ == "__main__":
    unittest.main()
