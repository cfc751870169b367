"""kb_static.py: every ModelNew hack in tests/hacks/kernelbench is rejected by the check its
`# expect:` line names, every honest control there passes, under the `# policy:` line's task
policy (KernelBench's default without one)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "kernelbench"))
import kb_static  # noqa: E402

HACKS = os.path.join(ROOT, "tests", "hacks", "kernelbench")
PROBLEM = os.path.join(ROOT, "tests", "kernelbench", "problems", "relu.py")
TOOL = os.path.join(ROOT, "tools", "kernelbench", "kb_static.py")


def header(src, key):
    for line in src.splitlines():
        if line.startswith("# %s: " % key):
            return line.split(": ", 1)[1].strip()
    return None


def catalogue():
    for name in sorted(os.listdir(HACKS)):
        if name.endswith(".py"):
            with open(os.path.join(HACKS, name)) as f:
                src = f.read()
            pol = header(src, "policy")
            yield name, src, header(src, "expect"), json.loads(pol) if pol else {}


class CatalogueTest(unittest.TestCase):
    def test_catalogue_is_complete(self):
        files = list(catalogue())
        self.assertGreaterEqual(len(files), 20)
        expected = {e for _, _, e, _ in files}
        for check in ("ok", "fallback", "inheritance", "caching", "streams", "threads",
                      "patching", "dynamic", "functional", "layers", "torch_ops",
                      "require_kernel"):
            self.assertIn(check, expected)

    def test_hacks_are_rejected_and_honest_files_pass(self):
        with open(PROBLEM) as f:
            problem = f.read()
        for name, src, expect, policy in catalogue():
            with self.subTest(file=name):
                self.assertIsNotNone(expect, "%s has no '# expect:' line" % name)
                r = kb_static.check(src, problem, kb_static.policy_from_task(
                    {"kernelbench_policy": policy}))
                if expect == "ok":
                    self.assertTrue(r.ok, [e.text() for e in r.errors])
                else:
                    self.assertFalse(r.ok, "%s was accepted" % name)
                    self.assertIn(expect, [e.check for e in r.errors],
                                  [e.text() for e in r.errors])
                    for e in r.errors:
                        self.assertGreater(len(e.message), 10)


class PolicyTest(unittest.TestCase):
    def src(self, name):
        with open(os.path.join(HACKS, name)) as f:
            return f.read()

    def test_default_policy_is_kernelbench(self):
        self.assertEqual(kb_static.policy_from_task({}), {"functional": "warn",
                                                          "layers": "warn",
                                                          "torch_ops": "warn",
                                                          "streams": "warn",
                                                          "precision": "warn",
                                                          "require_kernel": True})

    def test_functional_and_streams_warn_by_default_and_forbid_on_request(self):
        for name, key in (("functional_wrap.py", "functional"),
                          ("python_side_stream.py", "streams"),
                          ("cuda_side_stream.py", "streams")):
            with self.subTest(file=name):
                src = self.src(name)
                r = kb_static.check(src)
                self.assertTrue(r.ok, [e.text() for e in r.errors])
                self.assertIn(key, [w.check for w in r.warnings])
                r = kb_static.check(src, policy={key: "forbid"})
                self.assertIn(key, [e.check for e in r.errors])
                r = kb_static.check(src, policy={key: "allow"})
                self.assertNotIn(key, [w.check for w in r.warnings])

    def test_torch_ops_warn_by_default_and_forbid_on_request(self):
        src = self.src("torch_ops_forbidden.py")
        r = kb_static.check(src)
        self.assertTrue(r.ok, [e.text() for e in r.errors])
        self.assertIn("torch.matmul", " ".join(w.message for w in r.warnings))
        r = kb_static.check(src, policy={"torch_ops": "forbid"})
        self.assertFalse(r.ok)
        r = kb_static.check(src, policy={"torch_ops": "allow"})
        self.assertEqual((r.ok, r.warnings), (True, []))

    def test_pytorch_layers_warned_by_default_forbidden_on_request(self):
        src = self.src("honest_conv_epilogue.py")
        r = kb_static.check(src)
        self.assertTrue(r.ok, [e.text() for e in r.errors])
        self.assertEqual([w.check for w in r.warnings], ["layers"])
        self.assertIn("torch.nn.Conv2d", r.warnings[0].message)
        r = kb_static.check(src, policy={"layers": "forbid"})
        self.assertEqual([e.check for e in r.errors], ["layers"])
        self.assertEqual(kb_static.check(src, policy={"layers": "allow"}).warnings, [])

    def test_plain_pytorch_passes_only_where_no_kernel_is_required(self):
        src = self.src("no_kernel.py")
        self.assertFalse(kb_static.check(src).ok)
        self.assertTrue(kb_static.check(src, policy={"require_kernel": False}).ok)

    def test_bad_policies_are_named(self):
        for pol, says in (({"torch_ops": "maybe"}, "torch_ops: 'maybe'"),
                          ({"threads": "allow"}, "threads: unknown"),
                          ({"require_kernel": "yes"}, "require_kernel: must be")):
            with self.assertRaises(ValueError) as c:
                kb_static.policy_from_task({"kernelbench_policy": pol})
            self.assertIn(says, str(c.exception))

    def test_a_main_guard_harness_is_not_the_candidate(self):
        src = self.src("honest_relu_cuda.py") + (
            "\n\nif __name__ == '__main__':\n    ref = Model()\n"
            "    print((ref(*get_inputs()) - ModelNew()(*get_inputs())).abs().max())\n")
        self.assertTrue(kb_static.check(src).ok)
        src = self.src("honest_relu_cuda.py") + "\n\nREF = Model()\n"
        self.assertIn("inheritance", [e.check for e in kb_static.check(src).errors])

    def test_syntax_and_missing_modelnew(self):
        r = kb_static.check("class ModelNew(:\n")
        self.assertEqual([e.check for e in r.errors], ["syntax"])
        r = kb_static.check("import torch\nclass Model(torch.nn.Module):\n    pass\n")
        self.assertIn("defines no class ModelNew", r.errors[0].message)


class CliTest(unittest.TestCase):
    def run_tool(self, *args):
        return subprocess.run([sys.executable, TOOL] + list(args), capture_output=True,
                              text=True)

    def test_exit_status_and_messages(self):
        r = self.run_tool(os.path.join(HACKS, "try_except_fallback.py"), "--problem", PROBLEM)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stdout, r"kb_static: line \d+: \[fallback\] an except branch")
        r = self.run_tool(os.path.join(HACKS, "honest_relu_cuda.py"), "--json")
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertEqual(json.loads(r.stdout)["ok"], True)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"kernelbench_policy": {"torch_ops": "forbid"}}, f)
        try:
            r = self.run_tool(os.path.join(HACKS, "torch_ops_forbidden.py"), "--task", f.name)
            self.assertEqual(r.returncode, 1)
            self.assertIn("[torch_ops] calls torch.matmul", r.stdout)
        finally:
            os.unlink(f.name)
        r = self.run_tool("/nonexistent/model_new.py")
        self.assertEqual(r.returncode, 2)
        self.assertIn("kb_static: ", r.stderr)


if __name__ == "__main__":
    unittest.main()
