"""htam-agent run --kernelbench: a level's problems chosen by number, imported as tasks, one
session per problem (the replay proposer, verified by a real htamd on the CPU backend), and
KernelBench's metrics (correct, fast_0/1/2, geomean speedup)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from types import SimpleNamespace

from htam_agent.htamd import HtamdProcess, find_htamd
from htam_agent.kernelbench import (KernelBenchError, ProblemResult, level_problems, metrics,
                                    parse_ranges, score_session)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROBLEMS = os.path.join(ROOT, "tests", "kernelbench", "problems")
LINEAGES = os.path.join(HERE, "agent_fixtures", "kernelbench")
HELPER = os.path.join(ROOT, "tools", "kernelbench", "kb_helper.py")
HAVE_TORCH = subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                            capture_output=True).returncode == 0


def make_level(root):
    """A KernelBench-shaped tree: level1/1_relu.py, 2_scalar_mul.py, 3_syntax_error.py,
    4_relu_again.py (not selected by the tests' --problems 1-3)."""
    lv = os.path.join(root, "KernelBench", "level1")
    os.makedirs(lv)
    for n, f in ((1, "relu.py"), (2, "scalar_mul.py"), (3, "syntax_error.py"), (4, "relu.py")):
        stem = {1: "relu", 2: "scalar_mul", 3: "syntax_error", 4: "relu_again"}[n]
        shutil.copyfile(os.path.join(PROBLEMS, f), os.path.join(lv, "%d_%s.py" % (n, stem)))
    return lv


class MetricsTest(unittest.TestCase):
    def test_ranges(self):
        self.assertIsNone(parse_ranges(""))
        self.assertEqual(parse_ranges("1-3,7"), {1, 2, 3, 7})
        for bad in ("1-", "a", "5-2"):
            with self.assertRaises(KernelBenchError):
                parse_ranges(bad)

    def test_problems_of_a_level_by_number(self):
        with tempfile.TemporaryDirectory() as d:
            lv = make_level(d)
            names = [os.path.basename(p) for p in level_problems(d, 1, parse_ranges("1-3"))]
            self.assertEqual(names, ["1_relu.py", "2_scalar_mul.py", "3_syntax_error.py"])
            self.assertEqual(len(level_problems(lv, 1, None)), 4)
            with self.assertRaises(KernelBenchError):
                level_problems(d, 2, None)

    def test_the_prompt_sees_the_pytorch_problem(self):
        from htam_agent.kernelbench import spec_text
        from htam_agent.lineage import Task
        with tempfile.TemporaryDirectory() as d:
            shutil.copyfile(os.path.join(PROBLEMS, "scalar_mul.py"), os.path.join(d, "problem.py"))
            t = Task(name="kb_x", dir=d, spec={"name": "kb_x", "kernelbench": "problem.py"},
                     lineages={})
            text = spec_text(t)
            self.assertIn("return A * s", text)
            self.assertIn("one-element f64", text)
            plain = Task(name="x", dir=d, spec={"name": "x"}, lineages={})
            self.assertEqual(spec_text(plain), plain.spec_text())

    def test_modelnew_start_renames_model_only(self):
        from htam_agent.kernelbench import modelnew_start, rename_model, session_language
        from htam_agent.lineage import Task
        src = ("import torch.nn as nn\n# class Model: the reference\n"
               "class Model(nn.Module):\n    def __init__(self):\n"
               "        super(Model, self).__init__()\n        self.name = 'Model'\n"
               "        self.sub = MyModel()\n")
        self.assertEqual(rename_model(src), src.replace("class Model(", "class ModelNew(")
                         .replace("super(Model,", "super(ModelNew,"))
        with tempfile.TemporaryDirectory() as d:
            shutil.copyfile(os.path.join(PROBLEMS, "relu.py"), os.path.join(d, "problem.py"))
            kb = Task(name="kb_x", dir=d, spec={"name": "kb_x", "kernelbench": "problem.py"},
                      lineages={})
            start = modelnew_start(kb)
            self.assertIn("class ModelNew(", start)
            self.assertNotIn("class Model(", start)
            compile(start, "start.py", "exec")
            lean = Task(name="x", dir=d, spec={"name": "x"}, lineages={})
            with self.assertRaises(KernelBenchError):
                modelnew_start(lean)
            self.assertEqual(session_language("auto", kb), "kernelbench")
            self.assertEqual(session_language("auto", lean), "")
            self.assertEqual(session_language("lean", kb), "")

    def test_kernelbench_metrics(self):
        def row(status, speedup):
            return SimpleNamespace(status=status, speedup=speedup)
        rs = [ProblemResult("a"), ProblemResult("b"), ProblemResult("c"), ProblemResult("d"),
              ProblemResult("e", status="import_failed")]
        score_session(rs[0], [row("incorrect", 0), row("ok", 0.5), row("ok", 0.8)])
        score_session(rs[1], [row("ok", 4.0)])
        score_session(rs[2], [row("compile_error", 0), row("incorrect", 0)])
        score_session(rs[3], [row("ok", 1.5), row("unverified", 9.0)])
        self.assertEqual([r.status for r in rs],
                         ["correct", "correct", "incorrect", "correct", "import_failed"])
        self.assertEqual(rs[0].speedup, 0.8)
        self.assertEqual(rs[3].speedup, 1.5)  # a recorded outcome is not a verified one
        m = metrics(rs)
        self.assertEqual(m["problems"], 5)
        self.assertAlmostEqual(m["correct"], 0.6)
        self.assertAlmostEqual(m["fast_0"], 0.6)
        self.assertAlmostEqual(m["fast_1"], 0.4)
        self.assertAlmostEqual(m["fast_2"], 0.2)
        self.assertAlmostEqual(m["geomean_speedup"], (0.8 * 4.0 * 1.5) ** (1 / 3))
        self.assertEqual(metrics([])["correct"], 0.0)


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not importable by /usr/bin/python3")
class LevelRunTest(unittest.TestCase):
    def setUp(self):
        self.htamd = find_htamd(os.environ.get("HTAM_BUILD_DIR", ""))
        if not self.htamd:
            self.skipTest("htamd is not built (set HTAM_HTAMD or HTAM_BUILD_DIR)")
        self.tmp = tempfile.TemporaryDirectory(prefix="htam-kb-agent-")
        self.addCleanup(self.tmp.cleanup)
        os.chmod(self.tmp.name, 0o755)  # workers may run as another user
        self.tasks = os.path.join(self.tmp.name, "tasks")
        os.makedirs(self.tasks)
        os.chmod(self.tasks, 0o755)
        self.proc = HtamdProcess(self.htamd, os.path.join(self.tmp.name, "data"), self.tasks,
                                 options={"eval.kernelbench_helper": HELPER})
        self.proc.start()
        self.addCleanup(self.proc.stop)

    def test_level_with_replay_proposer_prints_kernelbench_metrics(self):
        make_level(self.tmp.name)
        out_json = os.path.join(self.tmp.name, "level1.json")
        r = subprocess.run(
            [sys.executable, "-m", "htam_agent", "run", "--endpoint", self.proc.endpoint,
             "--kernelbench", os.path.join(self.tmp.name, "KernelBench"), "--level", "1",
             "--problems", "1-3", "--tasks-dir", self.tasks, "--lineages", LINEAGES,
             "--proposer", "replay", "--backend", "cpu", "--budget", "2", "--json", out_json],
            capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        self.assertRegex(r.stdout, r"level 1: 3 problems, correct 33\.3%, fast_0 33\.3%, "
                                   r"fast_1 \d+\.\d%, fast_2 \d+\.\d%, geomean speedup")
        with open(out_json) as f:
            rep = json.load(f)
        by = {p["problem"]: p for p in rep["problems"]}
        self.assertEqual(sorted(by), ["1_relu.py", "2_scalar_mul.py", "3_syntax_error.py"])
        self.assertEqual(by["1_relu.py"]["status"], "correct", r.stdout[-3000:])
        self.assertGreater(by["1_relu.py"]["speedup"], 0)
        self.assertEqual(by["1_relu.py"]["task"], "kb_level1_1_relu")
        self.assertEqual(by["2_scalar_mul.py"]["status"], "incorrect", r.stdout[-3000:])
        self.assertEqual(by["3_syntax_error.py"]["status"], "import_failed")
        self.assertIn("syntax error", by["3_syntax_error.py"]["note"])
        m = rep["metrics"]
        self.assertAlmostEqual(m["correct"], 1 / 3)
        self.assertAlmostEqual(m["geomean_speedup"], by["1_relu.py"]["speedup"])
        self.assertEqual(rep["backends"], ["cpu"])


if __name__ == "__main__":
    unittest.main()
