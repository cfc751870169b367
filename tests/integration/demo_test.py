"""tools/demo.sh end to end on the CPU backend, in a temp dir: a daemon is started on a fresh
store, the other fixture tasks' lineages are imported (verified on the CPU), the replay agent
runs on the held-back task, the daemon stops cleanly and the inspection commands are printed."""

import os
import subprocess
import tempfile
import unittest

from htam_agent.htamd import find_htamd

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "integration", "agent_fixtures", "tasks")


class DemoTest(unittest.TestCase):
    def test_demo_runs_end_to_end_on_cpu(self):
        build = os.environ.get("HTAM_BUILD_DIR", os.path.join(ROOT, "build"))
        if not find_htamd(build):
            self.skipTest("htamd is not built (set HTAM_BUILD_DIR)")
        with tempfile.TemporaryDirectory(prefix="htam-demo-") as tmp:
            os.chmod(tmp, 0o755)  # workers run unprivileged: the data folder must be reachable
            data = os.path.join(tmp, "htam-data")
            env = dict(os.environ, HTAM_DEMO_SKIP_SETUP="1", HTAM_DEMO_SKIP_BUILD="1",
                       HTAM_BUILD_DIR=build, HTAM_DEMO_DATA=data, HTAM_DEMO_TASKS=FIXTURES,
                       HTAM_DEMO_BACKEND="cpu", HTAM_DEMO_TASK="fx_scale",
                       HTAM_ENDPOINT=f"ipc://{tmp}/htamd.sock")
            r = subprocess.run([os.path.join(ROOT, "tools", "demo.sh")], cwd=tmp, env=env,
                               capture_output=True, text=True, timeout=600)
            out = r.stdout + r.stderr
            self.assertEqual(r.returncode, 0, out)
            for needle in ("3/5 import the lineages of the other tasks (2 tasks; fx_scale is held back)",
                           "fx_relu [cpu]: importing 4 variants (verified)",
                           "4/5 the agent on the held-back task fx_scale",
                           "-- step 1/6: direction",
                           "step  memory chose", "task fx_scale on cpu: best speedup",
                           "htamd stopped cleanly", " directions ", " trajectory "):
                self.assertIn(needle, out)
            self.assertNotIn("differs from the lineage", out)
            self.assertTrue(os.listdir(data))   # the memory persists in the data folder
            # A second run keeps the memory: no second import, the agent runs again.
            r2 = subprocess.run([os.path.join(ROOT, "tools", "demo.sh")], cwd=tmp, env=env,
                                capture_output=True, text=True, timeout=600)
            out2 = r2.stdout + r2.stderr
            self.assertEqual(r2.returncode, 0, out2)
            self.assertIn("already imported into", out2)
            self.assertNotIn("importing 4 variants", out2)
            self.assertIn("task fx_scale on cpu: best speedup", out2)


if __name__ == "__main__":
    unittest.main()
