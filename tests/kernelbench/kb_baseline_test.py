"""The PyTorch baseline of a KernelBench task is timed in the precision a candidate runs in.

A candidate's calls run with TF32 off (kb_runner.py: fp32 means fp32, as the golden outputs are
computed). The eager baseline, timed once per task and kept in baseline.json, must be timed so
too: with PyTorch's defaults cuDNN's TF32 made a convolution 2-9x faster in the baseline than the
same code as a candidate (on an H200, every convolution problem of KernelBench's level 1 had a
"speedup" of 0.11-0.60x against itself). The problem below refuses to run with TF32 on, so a
baseline timed in the defaults fails here. baseline.json records the precision ("precision":
"fp32"); the daemon times a baseline without it again (kernelbench_gate_test).

The baseline's helper also takes the device's turn itself (--device-lock), exclusive and around
its timing loops only: a free device is taken and given back, and a device another job keeps
past the wait's bound is timed anyway, saying so in baseline.json ("eager_note").

Run from the repository root (ctest does). Skips without PyTorch in /usr/bin/python3.
"""
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELPER = os.path.join(ROOT, "tools/kernelbench/kb_helper.py")
PY = "/usr/bin/python3"

# A problem that says which precision it was called in: it raises where TF32 is allowed.
PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32:
            raise RuntimeError("called with TF32 allowed")
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
'''


def have_torch():
    return subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0


class HelperTest(unittest.TestCase):
    """kb_helper.py runs on the probe problem in a temporary folder."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kb-baseline-")
        self.problem = os.path.join(self.dir, "tf32_probe.py")
        with open(self.problem, "w") as f:
            f.write(PROBLEM)
        # PyTorch's own default: cuDNN may use TF32 unless told otherwise.
        import_default = subprocess.run(
            [PY, "-c", "import torch; print(torch.backends.cudnn.allow_tf32)"],
            capture_output=True, text=True)
        self.default_allows_tf32 = import_default.stdout.strip() == "True"

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def helper(self, *args):
        return subprocess.run([PY, HELPER] + list(args), capture_output=True, text=True,
                              timeout=300, cwd=ROOT)


@unittest.skipUnless(have_torch(), "PyTorch is not importable by /usr/bin/python3 "
                     "(install python3-torch; tools/setup.sh does)")
class BaselinePrecision(HelperTest):
    def test_the_baseline_is_timed_with_tf32_off_and_says_so(self):
        self.assertTrue(self.default_allows_tf32,
                        "this PyTorch does not allow cuDNN TF32 by default: the probe proves "
                        "nothing here")
        out = os.path.join(self.dir, "golden")
        p = self.helper("golden", "--problem", self.problem, "--out", out, "--device", "cpu",
                        "--seeds", "1", "--time-seeds", "1000,1001", "--reps", "5",
                        "--warmup", "1", "--flush-bytes", "4096", "--defer-compile")
        self.assertEqual(p.returncode, 0, p.stdout[-800:] + p.stderr[-800:])
        with open(os.path.join(out, "baseline.json")) as f:
            base = json.load(f)
        self.assertEqual(base.get("precision"), "fp32", base)
        self.assertGreater(base.get("eager_us", 0), 0, base)

    def test_the_background_measurement_times_a_baseline_from_before_again(self):
        # A baseline.json written before the precision was recorded: its eager figure was timed
        # with PyTorch's defaults, so `baseline --compile-only` does not keep it.
        out = os.path.join(self.dir, "golden")
        os.makedirs(out)
        old = {"device": "cpu", "eager_us": 1e9, "eager_spread_us": 0, "compile_pending": True}
        with open(os.path.join(out, "baseline.json"), "w") as f:
            json.dump(old, f)
        p = self.helper("baseline", "--problem", self.problem, "--out", out, "--device", "cpu",
                        "--time-seeds", "1000", "--reps", "5", "--warmup", "1",
                        "--flush-bytes", "4096", "--compile-only")
        self.assertEqual(p.returncode, 0, p.stdout[-800:] + p.stderr[-800:])
        with open(os.path.join(out, "baseline.json")) as f:
            base = json.load(f)
        self.assertEqual(base.get("precision"), "fp32", base)
        self.assertLess(base.get("eager_us", 1e9), 1e9, "the old figure was kept")


@unittest.skipUnless(have_torch(), "PyTorch is not importable by /usr/bin/python3 "
                     "(install python3-torch; tools/setup.sh does)")
class BaselineDeviceTurn(HelperTest):
    """The eager baseline's helper takes the device's turn itself, exclusive, around its timing
    loops (--device-lock): other jobs' work on the device waits for that loop only, and a
    baseline that could not have the device to itself says so in baseline.json."""

    def golden(self, lock, wait):
        out = os.path.join(self.dir, "golden")
        p = self.helper("golden", "--problem", self.problem, "--out", out, "--device", "cpu",
                        "--seeds", "1", "--time-seeds", "1000", "--reps", "5", "--warmup", "1",
                        "--flush-bytes", "4096", "--defer-compile", "--device-lock", lock,
                        "--device-lock-wait", str(wait))
        self.assertEqual(p.returncode, 0, p.stdout[-800:] + p.stderr[-800:])
        with open(os.path.join(out, "baseline.json")) as f:
            return json.load(f)

    def test_a_free_device_is_taken_and_given_back(self):
        lock = os.path.join(self.dir, "device-cpu-0.lock")
        base = self.golden(lock, 30)
        self.assertNotIn("eager_note", base)
        self.assertGreater(base.get("eager_us", 0), 0, base)
        for f in (lock, lock + ".turn"):  # released at the helper's end
            fd = os.open(f, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(fd)

    def test_a_device_another_job_keeps_is_waited_for_then_the_figure_says_so(self):
        lock = os.path.join(self.dir, "device-cpu-0.lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_SH)  # another job verifying on the device, for longer than 2 s
        try:
            t0 = time.monotonic()
            base = self.golden(lock, 2)
            took = time.monotonic() - t0
        finally:
            os.close(fd)
        self.assertIn("timed without the device to itself", base.get("eager_note", ""), base)
        self.assertGreaterEqual(took, 2.0)


if __name__ == "__main__":
    unittest.main()
