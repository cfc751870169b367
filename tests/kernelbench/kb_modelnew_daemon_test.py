"""ModelNew candidates through htamd and the Python SDK: Submit with language "kernelbench" on a
KernelBench task is evaluated (sandboxed worker, runner, golden data) and recorded; on a lean-ABI
task the daemon refuses it with a clear error.

Needs HTAM_HTAMD and PYTHONPATH with the SDK (ctest sets both) and /usr/bin/python3 with torch.
"""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import htam  # noqa: E402
import sdk_python_test  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def have_torch():
    return os.system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0


@unittest.skipUnless(have_torch(), "PyTorch is not importable by /usr/bin/python3")
class KbModelNewDaemon(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="htam-kb-daemon-")
        os.chmod(self.dir, 0o755)
        tasks = os.path.join(self.dir, "tasks")
        shutil.copytree(os.path.join(ROOT, "tests/kernelbench/tasks/kb_linear_relu_open"),
                        os.path.join(tasks, "kb_linear_relu_open"))
        shutil.copytree(os.path.join(ROOT, "configs/tasks/cpu_relu"),
                        os.path.join(tasks, "cpu_relu"))
        os.system("chmod -R a+rX %s" % self.dir)
        sdk_python_test.TASKS = tasks  # the suite htamd serves (and hides from runners)
        self.daemon = sdk_python_test.Daemon(os.path.join(self.dir, "data"), eval__backends="cpu",
                                             eval__repetitions="10", eval__seeds="3").start()
        self.client = htam.Client(self.daemon.endpoint, timeout_s=600)

    def tearDown(self):
        self.client.close()
        self.daemon.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_submit_modelnew(self):
        with open(os.path.join(ROOT, "tests/kernelbench/modelnew/honest_torch.py")) as f:
            src = f.read()
        s = self.client.open_session(task="kb_linear_relu_open", backend="cpu")
        sid = s["session"]["id"]
        d = self.client.next_step(sid)["direction"]["id"]
        r = self.client.submit(sid, src, language="kernelbench", direction_id=d,
                               summary="ModelNew, addmm")
        self.assertEqual(r.get("status_name"), "Ok", r)
        self.assertGreater(r["speedup"], 0, r)

        lean = self.client.open_session(task="cpu_relu", backend="cpu")["session"]["id"]
        with self.assertRaises(htam.HtamError) as e:
            self.client.submit(lean, src, language="kernelbench", direction_id=d)
        self.assertIn("is for KernelBench tasks", str(e.exception))


if __name__ == "__main__":
    unittest.main()
