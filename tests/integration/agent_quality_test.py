"""htam-bench quality as a CI smoke: leave-one-task-out over the fixture suite on recorded
outcomes, one seed, budget 6, every policy; real htamd processes for the memory-backed ones."""

import io
import json
import os
import tempfile
import unittest
from contextlib import redirect_stdout

from htam_agent.htamd import find_htamd
from htam_agent.quality import ALL_POLICIES, main

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_fixtures", "tasks")


class QualitySmokeTest(unittest.TestCase):
    def test_every_policy_runs_and_is_summarized(self):
        build = os.environ.get("HTAM_BUILD_DIR", "")
        if not find_htamd(build):
            self.skipTest("htamd is not built (set HTAM_BUILD_DIR)")
        with tempfile.TemporaryDirectory(prefix="htam-quality-") as tmp:
            os.chmod(tmp, 0o755)  # workers run unprivileged: the data folder must be reachable
            out = io.StringIO()
            js = os.path.join(tmp, "runs.json")
            with redirect_stdout(out):
                rc = main(["--tasks-dir", FIXTURES, "--seeds", "1", "--budgets", "6",
                           "--tasks", "fx_relu,fx_scale", "--work", os.path.join(tmp, "w"),
                           "--build-dir", build, "--json", js])
            text = out.getvalue()
            self.assertEqual(rc, 0, text)
            for p in ALL_POLICIES:
                self.assertIn(f"| 6 | {p} | 2 |", text)
            self.assertIn("held-out lineages (fx_relu/cpu, fx_scale/cpu)", text)
            runs = json.load(open(js))["runs"]
            self.assertEqual(len(runs), 2 * len(ALL_POLICIES))
            for r in runs:
                self.assertEqual(r["error"], "")
                self.assertEqual(len(r["directions"]), 6)
            # The client-side bandit never repeats a direction within 6 steps.
            for r in runs:
                if r["policy"] == "ucb":
                    self.assertEqual(len(set(r["directions"])), 6)


if __name__ == "__main__":
    unittest.main()
