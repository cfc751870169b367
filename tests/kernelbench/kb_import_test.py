"""kb_helper.py import and import-many: problems at KernelBench's full sizes import in well under a
second each without running them, Python scalars become marked one-element inputs, broken or
hanging problems are reported without stopping the others."""
import fcntl
import json
import os
import struct
import subprocess
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELPER = os.path.join(ROOT, "tools", "kernelbench", "kb_helper.py")
PROBLEMS = os.path.join(ROOT, "tests", "kernelbench", "problems")
PY = "/usr/bin/python3"
HAVE_TORCH = subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0


def helper(*args, timeout=300):
    return subprocess.run([PY, HELPER] + list(args), capture_output=True, text=True,
                          timeout=timeout)


def read_golden(path):
    """{name: (role, dtype, dims, raw bytes)} of a golden file (format: kb_helper.py)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"HTAMGLD1"
    pos, out = 12, {}
    (count,) = struct.unpack_from("<I", data, 8)
    for _ in range(count):
        role, n = struct.unpack_from("<II", data, pos)
        pos += 8
        name = data[pos:pos + n].decode()
        pos += n
        (n,) = struct.unpack_from("<I", data, pos)
        dtype = data[pos + 4:pos + 4 + n].decode()
        pos += 4 + n
        (nd,) = struct.unpack_from("<I", data, pos)
        dims = list(struct.unpack_from("<%dq" % nd, data, pos + 4))
        pos += 4 + 8 * nd
        (nb,) = struct.unpack_from("<Q", data, pos)
        out[name] = (role, dtype, dims, data[pos + 8:pos + 8 + nb])
        pos += 8 + nb
    return out


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not importable by /usr/bin/python3")
class ImportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def task(self, name):
        with open(os.path.join(self.out, name, "task.json")) as f:
            return json.load(f)

    def test_full_size_levels_import_without_running(self):
        dirs = [os.path.join(PROBLEMS, "level%d" % i) for i in (1, 2, 3)]
        t0 = time.monotonic()
        r = helper("import-many", self.out, *dirs, "--jobs", "2")
        wall = time.monotonic() - t0
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        summary, results = lines[-1], lines[:-1]
        self.assertEqual(summary["failed"], 0)
        self.assertEqual(summary["imported"], len(results))
        self.assertGreaterEqual(len(results), 15)
        # Each of these takes minutes and 12+ GiB when run at full size on a CPU.
        for r in results:
            self.assertEqual(r["probe"], "meta", r)
            self.assertLess(r["seconds"], 10, r)
        self.assertLess(wall, 300)  # PyTorch import included; a loaded 2-core machine
        relu = self.task("kb_level1_19_ReLU")
        self.assertEqual(relu["inputs"], [{"name": "x", "dtype": "f32", "shape": [4096, 393216]}])
        self.assertEqual(relu["outputs"][0]["shape"], [4096, 393216])
        self.assertEqual(self.task("kb_level1_39_L2Norm_")["outputs"][0]["shape"], [32768, 65535])
        conv = self.task("kb_level2_1_Conv2D_ReLU_BiasAdd")
        self.assertEqual([i["name"] for i in conv["inputs"]],
                         ["x", "bias", "conv.weight", "conv.bias"])
        self.assertEqual(conv["outputs"][0]["shape"], [128, 128, 126, 126])
        ce = self.task("kb_level1_95_CrossEntropyLoss")
        self.assertEqual([i["dtype"] for i in ce["inputs"]], ["f32", "i64"])
        mul = self.task("kb_level1_5_Matrix_scalar_multiplication")
        self.assertEqual(mul["inputs"][1], {"name": "s", "dtype": "f64", "shape": [1],
                                            "python": "float"})
        lenet = self.task("kb_level3_4_LeNet5")
        self.assertEqual(lenet["outputs"][0]["shape"], [4096, 20])
        self.assertTrue(os.path.isfile(os.path.join(self.out, "kb_level3_1_MLP", "problem.py")))

    def test_python_scalar_is_in_the_golden_data_and_baseline_is_separate(self):
        small = os.path.join(self.out, "small")
        r = helper("import", os.path.join(PROBLEMS, "scalar_mul.py"), small)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = helper("golden", "--problem", os.path.join(small, "problem.py"), "--out",
                   os.path.join(self.out, "g"), "--seeds", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        g = read_golden(os.path.join(self.out, "g", "seed_0.bin"))
        role, dtype, dims, raw = g["s"]
        self.assertEqual((role, dtype, dims), (0, "f64", [1]))
        self.assertEqual(struct.unpack("<d", raw)[0], 3.14)
        a = struct.unpack("<2048f", g["A"][3])
        out = struct.unpack("<2048f", g["out"][3])
        self.assertAlmostEqual(out[5], a[5] * 3.14, places=5)
        self.assertFalse(os.path.exists(os.path.join(self.out, "g", "baseline.json")))
        # The baseline alone, apart from the golden data (no golden file written).
        r = helper("baseline", "--problem", os.path.join(small, "problem.py"), "--out",
                   os.path.join(self.out, "b"), "--time-seeds", "1000,1001", "--reps", "3",
                   "--no-compile")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(os.path.join(self.out, "b")), ["baseline.json"])
        with open(os.path.join(self.out, "b", "baseline.json")) as f:
            base = json.load(f)
        self.assertGreater(base["eager_us"], 0)
        self.assertIn("--no-compile", base["compile_note"])

    def test_deferred_compile_is_pending_then_compile_only_keeps_the_eager_figure(self):
        small = os.path.join(self.out, "small")
        self.assertEqual(helper("import", os.path.join(PROBLEMS, "scalar_mul.py"),
                                small).returncode, 0)
        problem, out = os.path.join(small, "problem.py"), os.path.join(self.out, "d")
        path = os.path.join(out, "baseline.json")

        def load():
            with open(path) as f:
                return json.load(f)
        r = helper("golden", "--problem", problem, "--out", out, "--seeds", "0",
                   "--time-seeds", "1000", "--reps", "3", "--defer-compile")
        self.assertEqual(r.returncode, 0, r.stderr)
        first = load()
        self.assertTrue(first["compile_pending"])
        self.assertEqual(first["compile_note"], "torch.compile: being measured in the background")
        self.assertGreater(first["eager_us"], 0)
        # A note ends a pending measurement (what the daemon writes when one is killed).
        r = helper("baseline-note", "--out", out, "--note", "torch.compile: killed")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual((load()["compile_pending"], load()["compile_note"]),
                         (False, "torch.compile: killed"))
        # --compile-only: the eager figure stays, torch.compile is measured (or said unavailable).
        r = helper("baseline", "--problem", problem, "--out", out, "--time-seeds", "1000",
                   "--reps", "3", "--compile-only")
        self.assertEqual(r.returncode, 0, r.stderr)
        done = load()
        self.assertFalse(done["compile_pending"])
        self.assertEqual(done["eager_us"], first["eager_us"])
        self.assertTrue(done.get("compile_us", 0) > 0 or "torch.compile" in done["compile_note"])
        # A deferred golden run never overwrites a finished baseline.json.
        r = helper("golden", "--problem", problem, "--out", out, "--seeds", "1",
                   "--time-seeds", "1000", "--reps", "3", "--defer-compile")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(load(), done)

    def test_background_timing_waits_for_the_timing_lock_held_shared(self):
        # The background measurement (--compile-only --timing-lock) times only while no verifier
        # times: here the test is the verifier, holding timing.lock shared. Its out directory has
        # no eager figure yet, so it times eager (torch 1.13 has no torch.compile to time).
        small = os.path.join(self.out, "small")
        self.assertEqual(helper("import", os.path.join(PROBLEMS, "scalar_mul.py"),
                                small).returncode, 0)
        out, lock = os.path.join(self.out, "c"), os.path.join(self.out, "timing.lock")
        os.makedirs(out)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_SH)
        p = subprocess.Popen([PY, HELPER, "baseline", "--problem",
                              os.path.join(small, "problem.py"), "--out", out, "--time-seeds",
                              "1000", "--reps", "3", "--compile-only", "--timing-lock", lock],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # The kernel lists a process waiting for a flock with "->" in /proc/locks.
            deadline, waiting = time.time() + 120, False
            while not waiting and p.poll() is None and time.time() < deadline:
                with open("/proc/locks") as f:
                    waiting = any(line.split()[1:3] == ["->", "FLOCK"] and
                                  line.split()[5] == str(p.pid) for line in f)
                time.sleep(0.05)
            self.assertTrue(waiting, "the helper never waited for timing.lock")
            time.sleep(0.5)
            self.assertIsNone(p.poll(), "the helper timed while a verifier held timing.lock")
            self.assertFalse(os.path.exists(os.path.join(out, "baseline.json")))
        finally:
            os.close(fd)  # releases the shared lock
        _, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err)
        with open(os.path.join(out, "baseline.json")) as f:
            base = json.load(f)
        self.assertGreater(base["eager_us"], 0)
        self.assertFalse(base["compile_pending"])
        # A lock file that cannot be opened: timed without the lock, not an error.
        os.remove(os.path.join(out, "baseline.json"))
        r = helper("baseline", "--problem", os.path.join(small, "problem.py"), "--out", out,
                   "--time-seeds", "1000", "--reps", "3", "--compile-only", "--timing-lock",
                   os.path.join(self.out, "missing", "timing.lock"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(os.path.join(out, "baseline.json")))

    def test_data_dependent_forward_falls_back_to_a_scaled_run(self):
        r = helper("import", os.path.join(PROBLEMS, "data_dependent.py"),
                   os.path.join(self.out, "dd"), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["probe"], "scaled")
        with open(os.path.join(self.out, "dd", "task.json")) as f:
            t = json.load(f)
        self.assertEqual(t["outputs"][0]["shape"], [4096, 196608])

    def test_broken_and_hanging_problems_fail_alone(self):
        files = [os.path.join(PROBLEMS, f) for f in
                 ("relu.py", "syntax_error.py", "inputs_raise.py", "hangs.py", "scalar_mul.py")]
        r = helper("import-many", self.out, *files, "--timeout", "3", timeout=120)
        self.assertEqual(r.returncode, 3, r.stderr)
        by = {os.path.basename(x["problem"]): x
              for x in map(json.loads, r.stdout.splitlines()[:-1])}
        self.assertIn("syntax error at line 2", by["syntax_error.py"]["error"])
        self.assertIn("get_inputs() raised RuntimeError: no inputs today",
                      by["inputs_raise.py"]["error"])
        self.assertIn("ran past 3 s", by["hangs.py"]["error"])
        self.assertEqual(by["relu.py"]["task_dir"], os.path.join(self.out, "kb_relu"))
        self.assertEqual(json.loads(r.stdout.splitlines()[-1])["imported"], 2)

    def test_a_pretrained_model_problem_is_refused_with_the_reason(self):
        # KernelBench's level 4: a Hugging Face model built at import.
        problem = os.path.join(PROBLEMS, "pretrained.py")
        have_hf = subprocess.run([PY, "-c", "import transformers"],
                                 capture_output=True).returncode == 0
        if not have_hf:
            started = time.monotonic()
            r = helper("import", problem, self.out)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn("needs the Hugging Face transformers package", r.stderr)
            self.assertIn("refused", r.stderr)
            self.assertLess(time.monotonic() - started, 60)
        # With transformers but without the model's files: never a download, a clear refusal.
        # The stand-in package fails as transformers does offline for a model it has not cached,
        # and reaches out (an error naming the network) otherwise.
        with tempfile.TemporaryDirectory() as fake:
            os.makedirs(os.path.join(fake, "transformers"))
            with open(os.path.join(fake, "transformers", "__init__.py"), "w") as f:
                f.write("import os\n"
                        "class _Auto:\n"
                        "    @staticmethod\n"
                        "    def from_pretrained(name, **kw):\n"
                        "        if os.environ.get('HF_HUB_OFFLINE') == '1':\n"
                        "            raise OSError(name + ' is not in the cache (offline mode)')\n"
                        "        raise RuntimeError('downloading ' + name + ' from the network')\n"
                        "AutoConfig = AutoModelForCausalLM = _Auto\n")
            env = dict(os.environ, PYTHONPATH=fake)
            env.pop("HF_HUB_OFFLINE", None)
            r = subprocess.run([PY, HELPER, "import", problem, self.out], capture_output=True,
                               text=True, timeout=120, env=env)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("not in the local Hugging Face cache", r.stderr)
        self.assertNotIn("network", r.stderr)

    def test_check_runs_the_static_checks(self):
        hacks = os.path.join(ROOT, "tests", "hacks", "kernelbench")
        r = helper("check", os.path.join(hacks, "inherit_pass.py"), "--problem",
                   os.path.join(PROBLEMS, "relu.py"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("inheritance", [e["check"] for e in json.loads(r.stdout)["errors"]])

    def test_unsupported_input_is_a_clear_error(self):
        bad = os.path.join(self.out, "bad.py")
        with open(bad, "w") as f:
            f.write("import torch\nclass Model(torch.nn.Module):\n"
                    "    def forward(self, x, s):\n        return x\n"
                    "def get_inputs():\n    return [torch.ones(2), 'text']\n"
                    "def get_init_inputs():\n    return []\n")
        r = helper("import", bad, os.path.join(self.out, "bad"))
        self.assertEqual(r.returncode, 3)
        self.assertIn("get_inputs() returned a str", r.stderr)


if __name__ == "__main__":
    unittest.main()
