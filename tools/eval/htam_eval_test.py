"""htam-eval on the CPU backend, through the real pipeline (Evaluator, sandboxed htam-eval-worker,
runner, gate): an honest candidate, a wrong one, one that does not compile, the reference, a
lineage (checked and written), a queue of several files, and bad command lines.

  HTAM_EVAL   the htam-eval binary (default build/tools/eval/htam-eval)
Run from the repository root (ctest does).
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVAL = os.environ.get("HTAM_EVAL") or os.path.join(ROOT, "build/tools/eval/htam-eval")
SMALL = os.path.join(ROOT, "tests/hacks/cpu/small_relu")
CPU_RELU = os.path.join(ROOT, "configs/tasks/cpu_relu")
QUICK = ["--seeds", "1", "--reps", "3", "--sets", "2"]

HONEST = r"""#include <htam/kernel_abi.h>
HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  for (long i = 0; i < htam_numel(&in[0]); ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return 0;
}
"""
# Copies x: every negative element is wrong.
WRONG = HONEST.replace("x[i] > 0.0f ? x[i] : 0.0f", "x[i]")
BROKEN = HONEST.replace("return 0;", "return undeclared_name;")


def run(*args, timeout=400):
    p = subprocess.run([EVAL] + list(args), capture_output=True, text=True, timeout=timeout,
                       cwd=ROOT)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    return p.returncode, lines, p.stderr


@unittest.skipUnless(os.access(EVAL, os.X_OK), "htam-eval not built at %s" % EVAL)
class HtamEvalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="htam-eval-test-")
        os.chmod(cls.tmp, 0o755)  # the workers' sandbox user reads the copied task
        cls.files = {}
        for name, text in (("honest", HONEST), ("wrong", WRONG), ("broken", BROKEN)):
            path = os.path.join(cls.tmp, name + ".cpp")
            with open(path, "w") as f:
                f.write(text)
            cls.files[name] = path

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_honest_wrong_and_broken_candidates_one_after_another(self):
        f = self.files
        rc, out, err = run("--task", SMALL, f["honest"], "--source", f["wrong"], f["broken"],
                           *QUICK)
        self.assertEqual(rc, 0, err)
        self.assertEqual([r["source"] for r in out], [f["honest"], f["wrong"], f["broken"]], err)
        honest, wrong, broken = out
        self.assertEqual(honest["status"], "Ok", honest["diagnostics"])
        self.assertGreater(honest["speedup"], 0)
        self.assertGreater(honest["median_us"], 0)
        self.assertGreater(honest["baseline_us"], 0)
        self.assertEqual(honest["repetitions"], 3)
        self.assertEqual(honest["task"], "hack_small_relu")
        self.assertEqual(honest["backend"], "cpu")
        self.assertGreater(honest["cases"], 0)
        self.assertGreater(honest["bytes"], 0)
        for key in ("device", "file", "stage_ms", "op_ms", "candidate_hash", "compile_ms",
                    "compile_cached", "sol_fraction", "floor_us", "faster_than_sol",
                    "sm_clock_mhz", "registers", "golden_computed", "baseline_note", "wall_ms",
                    "roofline"):
            self.assertIn(key, honest)
        self.assertEqual(wrong["status"], "Incorrect")
        self.assertRegex(wrong["diagnostics"], "mismatch|differ|wrong|expected|tolerance",
                         wrong["diagnostics"])
        self.assertEqual(wrong["speedup"], 0)
        self.assertEqual(broken["status"], "CompileError")
        self.assertIn("undeclared_name", broken["diagnostics"])

    def test_reference(self):
        rc, out, err = run("--task", SMALL, "--reference", "--backend", "cpu", *QUICK)
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(out), 1, err)
        self.assertEqual(out[0]["source"], "reference")
        self.assertEqual(out[0]["status"], "Ok", out[0]["diagnostics"])
        self.assertGreater(out[0]["speedup"], 0)

    def test_lineage_checked_and_written(self):
        task = os.path.join(self.tmp, "cpu_relu")
        shutil.copytree(CPU_RELU, task)
        with open(os.path.join(task, "lineage.json")) as f:
            before = json.load(f)
        for v in before["variants"]:
            v.pop("measured", None)
        with open(os.path.join(task, "lineage.json"), "w") as f:
            json.dump(before, f)
        rc, out, err = run("--task", task, "--lineage", "--write", *QUICK)
        by_file = {r["file"]: r for r in out}
        self.assertEqual(set(by_file), {v["file"] for v in before["variants"]}, err)
        no_tail = by_file["variants/cpu/v4_no_tail.cpp"]
        self.assertEqual(no_tail["status"], "Incorrect", no_tail["diagnostics"])
        self.assertTrue(no_tail["as_expected"])
        self.assertEqual(by_file["variants/cpu/v1_avx2_max.cpp"]["status"], "Ok")
        self.assertEqual(rc, 0 if all(r["as_expected"] for r in out) else 1, out)
        with open(os.path.join(task, "lineage.json")) as f:
            after = json.load(f)
        for v in after["variants"]:
            self.assertEqual(v["measured"]["status"], by_file[v["file"]]["status"])

    def test_queue_of_several_files(self):
        f = self.files
        rc, out, err = run("--task", SMALL, "--queue", "--reference", f["honest"], f["wrong"],
                           f["honest"], *QUICK)
        self.assertEqual(rc, 0, err)
        self.assertEqual([r["status"] for r in out], ["Ok", "Ok", "Incorrect", "Ok"], out)
        self.assertEqual(out[1]["candidate_hash"], out[3]["candidate_hash"])

    def test_profile_without_a_profiler_says_so_and_stays_ok(self):
        rc, out, err = run("--task", SMALL, "--profile", self.files["honest"], *QUICK)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out[0]["status"], "Ok", out[0]["diagnostics"])
        self.assertIn("profile unavailable", out[0]["profile_note"])
        self.assertEqual(out[0]["bottleneck"], "Unknown")

    def test_in_process_mode_judges_as_the_pipeline_does(self):
        f = self.files
        rc, out, err = run("--in-process", "--backend", "cpu", "--task", SMALL, "--reference",
                           f["honest"], f["wrong"], f["broken"], "--profile", *QUICK)
        self.assertEqual(rc, 0, err)
        self.assertEqual([r["status"] for r in out], ["Ok", "Ok", "Incorrect", "CompileError"],
                         err)
        self.assertGreater(out[1]["speedup"], 0)
        self.assertIn("profile unavailable", out[1]["profile_note"])
        rc, out, err = run("--in-process", "--single-call", "--backend", "cpu", "--task", SMALL,
                           f["honest"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out[0]["status"], "Ok")
        self.assertEqual(out[0]["repetitions"], 0)  # one call, not timed
        rc, _, err = run("--single-call", "--task", SMALL, f["honest"])
        self.assertEqual(rc, 2)
        self.assertIn("--in-process", err)

    def test_config_file_then_command_line(self):
        conf = os.path.join(self.tmp, "eval.conf")
        with open(conf, "w") as f:
            f.write("[eval]\nrepetitions = 4\nseeds = 1\n")
        rc, out, err = run("--task", SMALL, "--config", conf, self.files["honest"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out[0]["repetitions"], 4, err)
        rc, out, err = run("--task", SMALL, "--config", conf, "--eval.repetitions", "5",
                           self.files["honest"])
        self.assertEqual(out[0]["repetitions"], 5, err)
        rc, out, err = run("--task", SMALL, "--config", conf, "--option", "repetitions=6",
                           "--reps", "7", self.files["honest"])
        self.assertEqual(out[0]["repetitions"], 7, err)
        rc, out, err = run("--task", SMALL, "--config", os.path.join(self.tmp, "none.conf"),
                           self.files["honest"])
        self.assertEqual(rc, 2)
        self.assertIn("none.conf", err)

    def test_bad_option_value(self):
        for args, words in ((["--seeds", "zero"], "--seeds"),
                            (["--eval.repetitions", "many"], "eval.repetitions"),
                            (["--option", "eval.seeds=x"], "eval.seeds"),
                            (["--option", "no_such_option=1"], "no_such_option"),
                            (["--no-such-flag"], "no-such-flag")):
            rc, out, err = run("--task", SMALL, self.files["honest"], *args)
            self.assertEqual(rc, 2, (args, err))
            self.assertIn(words, err)
            self.assertEqual(out, [])

    def test_missing_task_dir(self):
        missing = os.path.join(self.tmp, "no_such_task")
        rc, out, err = run("--task", missing, self.files["honest"])
        self.assertEqual(rc, 2)
        self.assertIn(missing, err)
        self.assertIn("task.json", err)
        rc, _, err = run(self.files["honest"])
        self.assertEqual(rc, 2)
        self.assertIn("--task", err)

    def test_backend_that_cannot_run_here(self):
        rc, out, err = run("--task", SMALL, "--backend", "no_such_backend", self.files["honest"])
        self.assertEqual(rc, 4, err)
        self.assertIn("no_such_backend", err)


if __name__ == "__main__":
    unittest.main()
