#!/usr/bin/python3
"""ModelNew candidates (language "kernelbench") on the CUDA backend, on a real GPU, through
htam-eval (the evaluator htamd uses: a sandboxed worker with the golden data, and its runner
whose child Python runs the candidate). Task tests/gpu/kernelbench/kb_relu (ReLU over 4M floats).

  - a load_inline CUDA ReLU is Ok and timed against PyTorch eager; evaluated again, its build
    comes from the build cache (eval.kernelbench_build_cache) and the evaluation is faster;
  - a wrong kernel is Incorrect;
  - a kernel on a side stream the static checks do not see gains nothing (the wall clock after a
    whole-device synchronize counts);
  - KernelBench's own catalogue: a C++ side stream is rejected ([streams]: the task forbids side
    streams, which the default policy only warns about, as KernelBench does); Triton passes
    where Triton is installed;
  - htam's fast path (kb_fastpath.py): a ReLU through htam.load_cuda is Ok, its build (nvcc
    alone) far shorter than load_inline's; a wrong one is Incorrect; a load_inline call without
    PyTorch headers takes the fast path transparently and is Ok.

Skips (with the reason) where no CUDA device is usable by the interpreter. Environment:
  HTAM_KB_PYTHON   python with PyTorch+CUDA (default: python3 on PATH)
  HTAM_EVAL        htam-eval (default: build/tools/eval/htam-eval)
  OUT              where to write kb_modelnew_gpu.jsonl (default /tmp)
Run: python3 tests/gpu/kb_modelnew_gpu_test.py -v   (tools/gpu/one_run.sh kbmodelnew does)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PY = os.environ.get("HTAM_KB_PYTHON") or shutil.which("python3") or "/usr/bin/python3"
EVALUATE = os.environ.get("HTAM_EVAL") or os.path.join(ROOT, "build/tools/eval/htam-eval")
TASK = os.path.join(ROOT, "tests/gpu/kernelbench/kb_relu")
MN = os.path.join(TASK, "modelnew")
HACKS = os.path.join(ROOT, "tests/hacks/kernelbench")
sys.path.insert(0, os.path.join(ROOT, "tests", "kernelbench"))
from kb_testlib import cuda_torch  # noqa: E402



@unittest.skipUnless(cuda_torch(PY), "no CUDA device usable by %s (set HTAM_KB_PYTHON to a "
                     "Python with PyTorch+CUDA on a GPU machine)" % PY)
@unittest.skipUnless(os.access(EVALUATE, os.X_OK), "htam-eval not found at %s (set "
                     "HTAM_EVAL)" % EVALUATE)
class KbModelNewGpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data = tempfile.mkdtemp(prefix="htam-kb-gpu-")
        os.chmod(cls.data, 0o755)
        files = [os.path.join(MN, "relu_inline.py"), os.path.join(MN, "relu_inline.py"),
                 os.path.join(MN, "relu_inline_wrong.py"),
                 os.path.join(MN, "relu_hidden_side_stream.py"),
                 os.path.join(HACKS, "cuda_side_stream.py"),
                 os.path.join(HACKS, "honest_triton.py"),
                 os.path.join(MN, "relu_load_cuda.py"), os.path.join(MN, "relu_load_cuda_wrong.py"),
                 os.path.join(MN, "relu_inline_no_torch.py")]
        cmd = [EVALUATE, "--task", TASK, "--backend", "cuda", "--language", "kernelbench",
               "--general.data_dir", cls.data, "--eval.backends", "cuda",
               "--eval.sdk_include_dir", os.path.join(ROOT, "sdk/include"),
               "--eval.kernelbench_python", PY,
               "--eval.kernelbench_helper", os.path.join(ROOT, "tools/kernelbench/kb_helper.py"),
               "--eval.seeds", "3", "--eval.repetitions", "50"] + files
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
        cls.output = p.stdout + p.stderr
        cls.results = []
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                cls.results.append(json.loads(line))
        out = os.environ.get("OUT", "/tmp")
        with open(os.path.join(out, "kb_modelnew_gpu.jsonl"), "w") as f:
            for r in cls.results:
                f.write(json.dumps(r) + "\n")
        for r in cls.results:
            print("kb_modelnew %-28s %-12s %9.2f us  eager %9.2f us  speedup %5.2fx  "
                  "wall %6.1f s  %s"
                  % (os.path.basename(r["file"]), r["status"], r["median_us"], r["baseline_us"],
                     r["speedup"], r["wall_ms"] / 1e3, r["diagnostics"][:200]), flush=True)
        if len(cls.results) != len(files):
            raise AssertionError("htam-eval gave %d results for %d files:\n%s" %
                                 (len(cls.results), len(files), cls.output[-4000:]))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.data, ignore_errors=True)

    def test_load_inline_cuda_is_ok_and_its_build_is_cached(self):
        miss, hit = self.results[0], self.results[1]
        self.assertEqual(miss["status"], "Ok", miss["diagnostics"])
        self.assertGreater(miss["baseline_us"], 0)
        self.assertGreater(miss["speedup"], 0)
        self.assertIn("htam_gpu_relu (built,", miss["diagnostics"])
        self.assertEqual(hit["status"], "Ok", hit["diagnostics"])
        self.assertIn("htam_gpu_relu (build cache hit,", hit["diagnostics"])
        self.assertLess(hit["wall_ms"], miss["wall_ms"])
        print("load_inline relu: evaluation %.1f s on a cache miss, %.1f s on a hit" %
              (miss["wall_ms"] / 1e3, hit["wall_ms"] / 1e3))

    def test_wrong_kernel_is_incorrect(self):
        r = self.results[2]
        self.assertEqual(r["status"], "Incorrect", r["diagnostics"])

    def test_hidden_side_stream_gains_nothing(self):
        honest, side = self.results[0], self.results[3]
        self.assertEqual(side["status"], "Ok", side["diagnostics"])
        self.assertLess(side["speedup"], 1.5 * honest["speedup"],
                        "side-stream work escaped the timing: %s" % side["diagnostics"])

    def test_kernelbench_catalogue(self):
        streams, triton = self.results[4], self.results[5]
        self.assertEqual(streams["status"], "Incorrect", streams["diagnostics"])
        self.assertIn("[streams]", streams["diagnostics"])
        if triton["status"] != "Ok" and "triton" in triton["diagnostics"].lower() and \
                "No module named" in triton["diagnostics"]:
            self.skipTest("Triton is not installed for %s" % PY)
        self.assertEqual(triton["status"], "Ok", triton["diagnostics"])

    def test_load_cuda_fast_path_is_ok_and_builds_fast(self):
        inline, fast = self.results[0], self.results[6]
        self.assertEqual(fast["status"], "Ok", fast["diagnostics"])
        self.assertIn("load_cuda: htam_relu_fast (fast path, built,", fast["diagnostics"])
        self.assertLess(fast["wall_ms"], inline["wall_ms"])
        print("relu: evaluation %.1f s through load_inline (a build), %.1f s through "
              "htam.load_cuda (a build)" % (inline["wall_ms"] / 1e3, fast["wall_ms"] / 1e3))

    def test_load_cuda_wrong_kernel_is_incorrect(self):
        r = self.results[7]
        self.assertEqual(r["status"], "Incorrect", r["diagnostics"])

    def test_load_inline_without_torch_headers_takes_the_fast_path(self):
        r = self.results[8]
        self.assertEqual(r["status"], "Ok", r["diagnostics"])
        self.assertIn("load_inline: htam_relu_inline_fast (fast path, built,", r["diagnostics"])


if __name__ == "__main__":
    unittest.main()
