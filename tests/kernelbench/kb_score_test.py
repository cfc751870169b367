"""KernelBench's metrics of a folder of ModelNew files (`htam-bench kernelbench`, i.e.
`python3 -m htam_bench kernelbench`): the definitions (correct, fast_p = correct and speedup > p
over every problem of the level, geomean over the correct ones), the pairing of files with
problems, and a real scoring run on the CPU through htam-eval: a level of three problems, one
ModelNew correct, one wrong, one missing."""
import json
import os
import shutil
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))
from htam_agent import kernelbench as kb  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests", "kernelbench"))
from kb_testlib import has_torch, score_levels, scoring_tree  # noqa: E402

HTAM_EVAL = os.environ.get("HTAM_EVAL", os.path.join(ROOT, "build", "tools", "eval",
                                                     "htam-eval"))
PROBLEMS = os.path.join(ROOT, "tests", "kernelbench", "problems")


class MetricsTest(unittest.TestCase):
    def test_kernelbench_definitions(self):
        rs = [kb.ProblemResult("a", status="correct", speedup=0.5),
              kb.ProblemResult("b", status="correct", speedup=1.5),
              kb.ProblemResult("c", status="correct", speedup=3.0),
              kb.ProblemResult("d", status="incorrect"),
              kb.ProblemResult("e", status="no_candidate")]
        m = kb.metrics(rs)
        self.assertEqual(m["problems"], 5)
        self.assertAlmostEqual(m["correct"], 3 / 5)
        self.assertAlmostEqual(m["fast_0"], 3 / 5)
        self.assertAlmostEqual(m["fast_1"], 2 / 5)
        self.assertAlmostEqual(m["fast_2"], 1 / 5)
        self.assertAlmostEqual(m["geomean_speedup"], (0.5 * 1.5 * 3.0) ** (1 / 3))

    def test_outcomes_count_as_kernelbench_counts_them(self):
        r = kb.ProblemResult("a")
        kb.score_outcome(r, "Ok", 1.7, "")
        self.assertEqual((r.status, r.speedup, r.outcome), ("correct", 1.7, "Ok"))
        for status in ("Incorrect", "CompileError", "Timeout", "Crash", "InfraError"):
            r = kb.ProblemResult("a")
            kb.score_outcome(r, status, 0.0, "why it failed\nmore")
            self.assertEqual(r.status, "incorrect")
            self.assertEqual(r.note, status + ": why it failed")
            self.assertEqual(r.diagnostics, "why it failed\nmore")  # the whole verdict is kept
        r = kb.ProblemResult("a")
        kb.score_outcome(r, "InfraError", 0.0, "x" * 5000 + "; evaluated twice")
        self.assertTrue(r.diagnostics.endswith("; evaluated twice"))
        self.assertEqual(len(r.diagnostics), 4000)


class PairingTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)

    def touch(self, *parts):
        path = os.path.join(self.tmp, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("# x\n")
        return path

    def test_files_named_as_kernelbench_runs_or_problems_name_them(self):
        for n in (1, 2, 3):
            self.touch("kb", "level2", f"{n}_P{n}.py")
        a = self.touch("mn", "level_2", "level_2_problem_1_sample_0_kernel.py")
        self.touch("mn", "level_2", "level_2_problem_1_sample_1_kernel.py")
        b = self.touch("mn", "level_2", "3_P3.py")
        self.touch("mn", "level_2", "notes.txt")
        plan = kb.plan_scoring(os.path.join(self.tmp, "kb"), os.path.join(self.tmp, "mn"),
                               None, None)
        self.assertEqual(list(plan.levels), [2])
        got = [(r.problem, r.modelnew, r.status) for r in plan.levels[2]]
        self.assertEqual(got, [("1_P1.py", a, "not_run"), ("2_P2.py", "", "no_candidate"),
                               ("3_P3.py", b, "not_run")])

    def test_bad_folders_are_named(self):
        self.touch("kb", "level1", "1_P.py")
        os.makedirs(os.path.join(self.tmp, "empty"))
        for mn, says in ((os.path.join(self.tmp, "empty"), "no level<N> folder"),
                         (os.path.join(self.tmp, "nope"), "cannot read")):
            with self.assertRaises(kb.KernelBenchError) as c:
                kb.plan_scoring(os.path.join(self.tmp, "kb"), mn, None, None)
            self.assertIn(says, str(c.exception))
        with self.assertRaises(kb.KernelBenchError):
            kb.parse_policy("[1]")


@unittest.skipUnless(os.path.isfile(HTAM_EVAL), "htam-eval is not built (%s)" % HTAM_EVAL)
@unittest.skipUnless(has_torch(), "/usr/bin/python3 has no torch")
class ScoreOnCpuTest(unittest.TestCase):
    """Three problems of level 1: the reference renamed ModelNew (correct, with the task's
    require-a-kernel check off), a ModelNew that doubles the output (Incorrect), and none."""

    def test_a_level_scored_through_htam_eval(self):
        tmp, kbdir, mndir = scoring_tree(self, 1)
        shutil.copy(os.path.join(PROBLEMS, "relu.py"), os.path.join(kbdir, "1_ReLU.py"))
        shutil.copy(os.path.join(PROBLEMS, "relu.py"), os.path.join(kbdir, "2_ReLU2.py"))
        shutil.copy(os.path.join(PROBLEMS, "relu.py"), os.path.join(kbdir, "3_ReLU3.py"))
        with open(os.path.join(PROBLEMS, "relu.py")) as f:
            right = kb.rename_model(f.read())
        with open(os.path.join(mndir, "level_1_problem_1_sample_0_kernel.py"), "w") as f:
            f.write(right)
        with open(os.path.join(mndir, "2_ReLU2.py"), "w") as f:
            f.write(right.replace("return torch.relu(x)", "return torch.relu(x) * 2"))
        out = os.path.join(tmp, "report.json")
        p = score_levels(ROOT, HTAM_EVAL, [
            "--kernelbench", os.path.join(tmp, "kb"), "--modelnew", os.path.join(tmp, "mn"),
            "--jobs", "2", "--eval-arg=--reps", "--eval-arg=5", "--json", out])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(out) as f:
            report = json.load(f)
        rows = {r["problem"]: r for r in report["levels"]["1"]["problems"]}
        self.assertEqual(rows["1_ReLU.py"]["status"], "correct", rows["1_ReLU.py"]["note"])
        self.assertEqual(rows["1_ReLU.py"]["outcome"], "Ok")
        self.assertEqual(rows["2_ReLU2.py"]["outcome"], "Incorrect", rows["2_ReLU2.py"])
        self.assertEqual(rows["3_ReLU3.py"]["status"], "no_candidate")
        m = report["levels"]["1"]["metrics"]
        speedup = rows["1_ReLU.py"]["speedup"]
        self.assertGreater(speedup, 0)
        self.assertAlmostEqual(m["correct"], 1 / 3)
        self.assertAlmostEqual(m["fast_0"], 1 / 3)
        self.assertAlmostEqual(m["fast_1"], (1 / 3) if speedup > 1 else 0.0)
        self.assertAlmostEqual(m["geomean_speedup"], speedup, places=6)
        self.assertIn("level 1: 3 problems, correct 33.3%", p.stdout)
        self.assertRegex(p.stdout, r"all levels: 3 problems, correct 33\.3%")


KB_DIR = os.environ.get("HTAM_KERNELBENCH_DIR", "")
KB_PROBLEMS = next((d for d in (os.path.join(KB_DIR, "KernelBench"), KB_DIR)
                    if KB_DIR and os.path.isdir(os.path.join(d, "level3"))), "")


@unittest.skipUnless(os.path.isfile(HTAM_EVAL), "htam-eval is not built (%s)" % HTAM_EVAL)
@unittest.skipUnless(has_torch(), "/usr/bin/python3 has no torch")
@unittest.skipUnless(KB_PROBLEMS, "HTAM_KERNELBENCH_DIR names no KernelBench checkout")
class SharedProblemsOnCpuTest(unittest.TestCase):
    """A sample of KernelBench's own problems at full size, each its own Model renamed ModelNew,
    on the CPU: Ok with a speedup near 1 (LeNet-5 at batch 4096 takes over a second a call here:
    its stages' limits scale with the reference's time)."""

    def test_reference_as_modelnew(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        os.chmod(tmp, 0o755)
        out = os.path.join(tmp, "report.json")
        p = score_levels(ROOT, HTAM_EVAL, [
            "--kernelbench", KB_PROBLEMS, "--reference-as-modelnew", "--level", "3",
            "--problems", "4,34", "--tasks-dir", os.path.join(tmp, "tasks"),
            "--eval-arg=--reps", "--eval-arg=5", "--eval-arg=--seeds", "--eval-arg=1",
            "--eval-arg=--sets", "--eval-arg=1", "--json", out])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(out) as f:
            rows = json.load(f)["levels"]["3"]["problems"]
        self.assertEqual(len(rows), 2)
        for r in rows:
            with self.subTest(problem=r["problem"]):
                self.assertEqual(r["outcome"], "Ok", r["note"])
                # The same model both sides: near 1, within the CPU timing's noise on a busy host.
                self.assertTrue(0.1 < r["speedup"] < 10.0, r)


if __name__ == "__main__":
    unittest.main()
