"""ModelNew candidates through htamd and the Python SDK: Submit with language "kernelbench" on a
KernelBench task is evaluated (sandboxed worker, runner, golden data) and recorded; on a lean-ABI
task the daemon refuses it with a clear error.

Needs HTAM_HTAMD and PYTHONPATH with the SDK (ctest sets both) and /usr/bin/python3 with torch.
"""
import json
import os
import shutil
import subprocess
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
        # A stage limit for a shared 2-core machine: under the whole suite the CPU timing stage
        # of a 4096-element ReLU (PyTorch's import and timing loop) once took over the default
        # 20 s of its own work; these tests are about verdicts and metrics, not stage limits.
        self.daemon = sdk_python_test.Daemon(os.path.join(self.dir, "data"), eval__backends="cpu",
                                             eval__repetitions="10", eval__seeds="3",
                                             eval__case_timeout_s="120").start()
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

    def test_htam_agent_scores_a_folder_of_modelnew_files(self):
        """htam-agent run --kernelbench --modelnew: each file submitted once, KernelBench's
        metrics of the level (one correct, one wrong)."""
        kbdir = os.path.join(self.dir, "kb", "level1")
        mndir = os.path.join(self.dir, "mn", "level1")
        os.makedirs(kbdir)
        os.makedirs(mndir)
        relu = os.path.join(ROOT, "tests/kernelbench/problems/relu.py")
        shutil.copy(relu, os.path.join(kbdir, "1_ReLU.py"))
        shutil.copy(relu, os.path.join(kbdir, "2_ReLU2.py"))
        from htam_agent.kernelbench import rename_model
        with open(relu) as f:
            right = rename_model(f.read())
        with open(os.path.join(mndir, "1_ReLU.py"), "w") as f:
            f.write(right)
        with open(os.path.join(mndir, "2_ReLU2.py"), "w") as f:
            f.write(right.replace("return torch.relu(x)", "return -torch.relu(x)"))
        os.system("chmod -R a+rX %s" % self.dir)
        out = os.path.join(self.dir, "report.json")
        env = dict(os.environ)  # PYTHONPATH: the build's python/ (the SDK and htam_agent)
        p = subprocess.run(
            ["/usr/bin/python3", "-m", "htam_agent", "run", "--kernelbench",
             os.path.join(self.dir, "kb"), "--modelnew", os.path.join(self.dir, "mn"),
             "--tasks-dir", sdk_python_test.TASKS, "--endpoint", self.daemon.endpoint,
             "--backend", "cpu", "--policy", '{"require_kernel": false}', "--json", out],
            capture_output=True, text=True, timeout=800, env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(out) as f:
            report = json.load(f)
        self.assertEqual(report["evaluated_by"], "htamd")
        rows = {r["problem"]: r for r in report["levels"]["1"]["problems"]}
        self.assertEqual(rows["1_ReLU.py"]["status"], "correct", rows["1_ReLU.py"])
        self.assertEqual(rows["2_ReLU2.py"]["outcome"], "incorrect", rows["2_ReLU2.py"])
        self.assertGreater(rows["1_ReLU.py"]["session_id"], 0)
        self.assertAlmostEqual(report["levels"]["1"]["metrics"]["correct"], 0.5)
        self.assertIn("level 1: 2 problems, correct 50.0%", p.stdout)


if __name__ == "__main__":
    unittest.main()
