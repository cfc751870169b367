"""A job that ran out of device memory beside other jobs is evaluated again, alone.

Jobs sharing a device reserve what they estimate they need (kb_memory_test); the estimate misses
a reference's own temporaries and PyTorch's caching. On an H200, two of four full-size jobs ran
out of memory computing their golden data (InfraError, no verdict), and a problem's own Model as
its ModelNew crashed in the candidate's process with 6 GiB inputs (a Crash that was the other
jobs' doing). Such a job now starts again from the top with the whole share of the device's
memory reserved, so that it runs once the others have ended, and says that it did: the golden
data's case inside the job, the candidate's process's case through the evaluator, on a fresh
runner (JobResult.retry_alone). Once only: what runs out of memory alone too keeps its ending.
Without reservations (eval.kernelbench_memory_share 0) nothing is retried.

Here, on the CPU backend (or HTAM_KB_BACKEND), PyTorch's out-of-memory error is raised by the
problem's Model in the golden data's process (kb_golden.py) or by ModelNew, the first time only or
every time (a marker says which); the baseline and the import run the Model in other processes,
where it never raises.

  HTAM_EVAL         the htam-eval binary (default build/tools/eval/htam-eval)
  HTAM_KB_PYTHON    the Python with PyTorch (default /usr/bin/python3)
  HTAM_KB_BACKEND   the backend (default cpu; cuda on a GPU machine)
Run from the repository root (ctest does). Skips without PyTorch in that Python.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "kernelbench"))
from kb_testlib import CLAMP_MODELNEW, OPEN_POLICY, import_task  # noqa: E402

EVAL = os.environ.get("HTAM_EVAL") or os.path.join(ROOT, "build/tools/eval/htam-eval")
PY = os.environ.get("HTAM_KB_PYTHON") or "/usr/bin/python3"
BACKEND = os.environ.get("HTAM_KB_BACKEND") or "cpu"
HELPER = os.path.join(ROOT, "tools/kernelbench/kb_helper.py")
TWICE = "evaluated twice: the first try ran out of memory computing the golden data"

# ReLU over 4096 floats whose Model, in kb_golden.py only, raises what PyTorch raises when the
# device is out of memory: once (then it leaves MARKER) or, with MARKER/always, every time.
PROBLEM = '''import os
import sys
import tempfile

import torch
import torch.nn as nn

MARKER = %r  # read-only where kb_golden.py runs
RAISED = os.path.join(tempfile.gettempdir(), %r)  # the job's own scratch, kept between tries


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if os.path.basename(sys.argv[0]) == "kb_golden.py":
            if os.path.exists(os.path.join(MARKER, "always")) or not os.path.exists(RAISED):
                open(RAISED, "w").close()
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (test)")
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4096)]


def get_init_inputs():
    return []
'''


def have_torch():
    return subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0


@unittest.skipUnless(os.path.isfile(EVAL), "htam-eval is not built")
@unittest.skipUnless(have_torch(), "PyTorch is not importable by %s "
                     "(install python3-torch; tools/setup.sh does)" % PY)
class GoldenOutOfMemory(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kb-golden-oom-")
        os.chmod(self.dir, 0o755)
        self.marker = os.path.join(self.dir, "marker")
        os.makedirs(self.marker)
        os.chmod(self.marker, 0o777)
        self.task = import_task(PY, HELPER, PROBLEM % (self.marker, "kb-oom-raised-" +
                                                       os.path.basename(self.dir)),
                                self.dir, "kb_oom", OPEN_POLICY)
        self.candidate = os.path.join(self.dir, "clamp.py")
        with open(self.candidate, "w") as f:
            f.write(CLAMP_MODELNEW)
        os.system("chmod -R a+rX %s" % self.dir)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def evaluate(self, *extra, cache=None):
        cache, scratch = cache or tempfile.mkdtemp(dir=self.dir), tempfile.mkdtemp(dir=self.dir)
        for d in (cache, scratch):
            os.chmod(d, 0o755)
        p = subprocess.run([EVAL, "--backend", BACKEND, "--language", "kernelbench",
                            "--option", "kernelbench_python=" + PY, "--seeds", "1",
                            "--sets", "1", "--reps", "3", "--task", self.task, "--cache", cache,
                            "--eval.scratch_dir", scratch]
                           + list(extra) + [self.candidate],
                           capture_output=True, text=True, timeout=600, cwd=ROOT)
        rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        self.assertTrue(rows, p.stderr[-800:])
        return rows[-1]

    # What the retry says, how a job that runs out of memory every time ends, and what the
    # first error says (the candidate's case below sets its own).
    RETRIED = TWICE
    ENDING = "InfraError"
    ERROR = "out of memory while computing the golden data"

    def test_out_of_memory_once_is_evaluated_again_alone(self):
        r = self.evaluate()
        self.assertEqual(r["status"], "Ok", r["diagnostics"])
        self.assertIn(self.RETRIED, r["diagnostics"])
        self.assertIn("CUDA out of memory", r["diagnostics"])

    def test_out_of_memory_alone_too_keeps_its_ending_after_one_retry(self):
        open(os.path.join(self.marker, "always"), "w").close()
        r = self.evaluate()
        self.assertEqual(r["status"], self.ENDING, r["diagnostics"])
        self.assertIn(self.RETRIED, r["diagnostics"])
        self.assertEqual(r["diagnostics"].count("evaluated twice"), 1, r["diagnostics"])

    def test_without_reservations_nothing_is_retried(self):
        r = self.evaluate("--eval.kernelbench_memory_share", "0")
        self.assertEqual(r["status"], self.ENDING, r["diagnostics"])
        self.assertIn(self.ERROR, r["diagnostics"])
        self.assertNotIn("evaluated twice", r["diagnostics"])


# The problem's plain ReLU, and a ModelNew whose forward raises what PyTorch raises when the
# device is out of memory: once (then it leaves a file in the KernelBench build cache, which the
# runners of both tries write; each try has a runner of its own) or, where the marker folder says
# "always", every time.
PLAIN_PROBLEM = PROBLEM.replace('os.path.basename(sys.argv[0]) == "kb_golden.py"', "False")
OOM_MODELNEW = '''import os

import torch
import torch.nn as nn

MARKER = %r
RAISED = %r


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if os.path.exists(os.path.join(MARKER, "always")) or not os.path.exists(RAISED):
            open(RAISED, "w").close()
            raise RuntimeError("CUDA out of memory. Tried to allocate 6.00 GiB (test)")
        return x.clamp_min(0)
'''
TWICE_RUNNER = "evaluated twice: the first try ran out of memory in the candidate's process"


class CandidateOutOfMemory(GoldenOutOfMemory):
    """The same for the candidate's process: on an H200 a problem's own Model as its ModelNew
    crashed with 6 GiB inputs that did not fit beside three other full-size jobs. A Crash for
    want of device memory is evaluated again alone; what runs out of memory alone too stays a
    Crash, and without reservations nothing is retried."""

    RETRIED = TWICE_RUNNER
    ENDING = "Crash"
    ERROR = "CUDA out of memory"

    def setUp(self):
        super().setUp()
        self.task = import_task(PY, HELPER, PLAIN_PROBLEM % (self.marker, "unused"), self.dir,
                                "kb_oom_plain", OPEN_POLICY)

    def evaluate(self, *extra):
        cache = tempfile.mkdtemp(dir=self.dir)
        builds = os.path.join(cache, "kernelbench-build")  # the evaluator's default under --cache
        os.makedirs(builds)
        os.chmod(builds, 0o777)
        with open(self.candidate, "w") as f:
            f.write(OOM_MODELNEW % (self.marker, os.path.join(builds, "oom-raised")))
        os.chmod(self.candidate, 0o644)
        return super().evaluate(*extra, cache=cache)


if __name__ == "__main__":
    unittest.main()
