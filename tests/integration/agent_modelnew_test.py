"""htam-agent run --language kernelbench against a real htamd on the CPU backend: the model (a
local fake chat-completions endpoint) is shown the problem's PyTorch code as a ModelNew file and
answers ModelNew files, which the agent submits with language kernelbench; the daemon verifies
them (sandboxed runner, golden data from PyTorch) and records Ok and Incorrect steps."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from htam_agent.htamd import HtamdProcess, find_htamd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from agent_llm_test import FakeEndpoint, reply  # noqa: E402  (same folder)

ROOT = os.path.dirname(os.path.dirname(HERE))
KB = os.path.join(ROOT, "tests", "kernelbench")
HELPER = os.path.join(ROOT, "tools", "kernelbench", "kb_helper.py")
HAVE_TORCH = subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                            capture_output=True).returncode == 0


def modelnew(name):
    with open(os.path.join(KB, "modelnew", name), encoding="utf-8") as f:
        return f.read()


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not importable by /usr/bin/python3")
class ModelNewAgentTest(unittest.TestCase):
    def setUp(self):
        self.htamd = find_htamd(os.environ.get("HTAM_BUILD_DIR", ""))
        if not self.htamd:
            self.skipTest("htamd is not built (set HTAM_HTAMD or HTAM_BUILD_DIR)")
        self.tmp = tempfile.TemporaryDirectory(prefix="htam-agent-modelnew-")
        self.addCleanup(self.tmp.cleanup)
        self.tasks = os.path.join(self.tmp.name, "tasks")
        # A KernelBench task whose policy lets ModelNew keep PyTorch operators (no compiler
        # needed), and a lean-ABI task.
        shutil.copytree(os.path.join(KB, "tasks", "kb_linear_relu_open"),
                        os.path.join(self.tasks, "kb_linear_relu_open"))
        shutil.copytree(os.path.join(HERE, "agent_fixtures", "tasks", "fx_relu"),
                        os.path.join(self.tasks, "fx_relu"))
        subprocess.run(["chmod", "-R", "a+rX", self.tmp.name], check=True)  # workers' user
        self.proc = HtamdProcess(self.htamd, os.path.join(self.tmp.name, "data"), self.tasks,
                                 options={"eval.backends": "cpu", "eval.seeds": "3",
                                          "eval.repetitions": "10",
                                          "eval.kernelbench_helper": HELPER})
        self.proc.start()
        self.addCleanup(self.proc.stop)

    def agent(self, ep, task, *extra):
        env = dict(os.environ, HTAM_LLM_BASE_URL=ep.url, HTAM_LLM_MODEL="fake-coder")
        return subprocess.run([sys.executable, "-m", "htam_agent", "run", "--endpoint",
                               self.proc.endpoint, "--tasks-dir", self.tasks, "--task", task,
                               "--backend", "cpu", *extra],
                              env=env, capture_output=True, text=True, timeout=600)

    def test_modelnew_session_records_ok_and_incorrect(self):
        ep = FakeEndpoint([
            reply("SUMMARY: addmm with the bias, clamp\nSTRATEGIES: none\n```python\n"
                  + modelnew("honest_torch.py") + "```\n"),
            reply("SUMMARY: drop the bias\nSTRATEGIES: none\n```python\n"
                  + modelnew("wrong_no_bias.py") + "```\n")])
        self.addCleanup(ep.close)
        r = self.agent(ep, "kb_linear_relu_open", "--language", "kernelbench", "--budget", "2",
                       "--max-repairs", "0")
        log = r.stdout[-4000:] + r.stderr[-3000:]
        self.assertEqual(r.returncode, 0, log)
        self.assertIn("ModelNew candidates (language kernelbench)", r.stdout)
        outcomes = [l.split("outcome: ")[1].split(",")[0] for l in r.stdout.splitlines()
                    if "outcome: " in l]
        self.assertEqual(outcomes, ["ok", "incorrect"], log)
        self.assertIn("task kb_linear_relu_open on cpu: best speedup", r.stdout)
        # The model started from the problem's PyTorch code, Model renamed ModelNew, and was
        # asked for a ModelNew file in a python fence.
        first = ep.prompt(0)
        self.assertIn("# Current best ModelNew file", first)
        self.assertIn("class ModelNew(nn.Module):\n    def __init__(self, in_features, "
                      "out_features)", first)
        self.assertIn("return torch.relu(self.linear(x))", first)
        self.assertIn("fenced block containing class ModelNew", first)
        self.assertNotIn("class Model(", first.split("# Current best ModelNew file")[1]
                         .split("# Direction")[0])
        # The policy of this task: operators and layers allowed, no kernel required.
        self.assertIn("a custom kernel is not required", first)
        # The second prompt saw the first outcome.
        self.assertIn("addmm with the bias, clamp -> ok", ep.prompt(1))

    def test_auto_picks_kernelbench_only_on_a_kernelbench_task(self):
        ep = FakeEndpoint([reply("SUMMARY: addmm\nSTRATEGIES: none\n```python\n"
                                 + modelnew("honest_torch.py") + "```\n")])
        self.addCleanup(ep.close)
        r = self.agent(ep, "kb_linear_relu_open", "--language", "auto", "--budget", "1")
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        self.assertIn("outcome: ok", r.stdout)
        # On a lean-ABI task, auto stays lean and kernelbench is refused before any session.
        r = self.agent(ep, "fx_relu", "--language", "kernelbench", "--budget", "1")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("fx_relu is not a KernelBench task", r.stderr)
        self.assertEqual(len(ep.requests), 1)


if __name__ == "__main__":
    unittest.main()
