"""htam-agent against a real htamd (its own store in a temp dir, ipc:// endpoint, the fixture
task suite): lineage import (verified on the CPU backend, and recorded), the agent loop with the
replay proposer, and with the model proposer over a local fake chat-completions endpoint where
the daemon's real compiler errors are fed back to the model."""

import io
import os
import re
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

from htam_agent.agent import final_table, run_session
from htam_agent.htamd import HtamdProcess, find_htamd
from htam_agent.importer import import_task
from htam_agent.lineage import load_task
from htam_agent.llm import ChatClient, LLMConfig
from htam_agent.proposers import LLMProposer, ReplayProposer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from agent_llm_test import FakeEndpoint, reply  # noqa: E402  (same folder)

FIXTURES = os.path.join(HERE, "agent_fixtures", "tasks")


def quiet(_msg):
    pass


class DaemonTestBase(unittest.TestCase):
    def setUp(self):
        self.htamd = find_htamd(os.environ.get("HTAM_BUILD_DIR", ""))
        if not self.htamd:
            self.skipTest("htamd is not built (set HTAM_HTAMD or HTAM_BUILD_DIR)")
        self.tmp = tempfile.TemporaryDirectory(prefix="htam-agent-")
        self.addCleanup(self.tmp.cleanup)
        # Workers drop to an unprivileged user when htamd runs as root: the evaluation cache
        # inside the data folder must be reachable for them.
        os.chmod(self.tmp.name, 0o755)
        self.proc = HtamdProcess(self.htamd, os.path.join(self.tmp.name, "data"), FIXTURES)
        self.proc.start()
        self.addCleanup(self.stop)
        self.d = self.proc.client(timeout_s=300)
        self.addCleanup(self.d.close_connection)

    def stop(self):
        code = self.proc.stop()
        self.assertEqual(code, 0, "htamd did not stop cleanly:\n" + self.proc.log_tail())


class ImportTest(DaemonTestBase):
    def test_recorded_import_walks_the_lineage_in_parent_order(self):
        task = load_task(os.path.join(FIXTURES, "fx_relu"))
        report = import_task(self.d, task, recorded=True, out=quiet)
        self.assertEqual([s.variant for s in report.steps], ["v4", "v1", "v2", "v3"])
        self.assertTrue(all(s.transition_id > 0 for s in report.steps), report.steps)
        self.assertEqual(len(set(s.transition_id for s in report.steps)), 4)
        self.assertEqual(report.skipped, [])
        self.assertEqual(len(report.sessions), 1)

    def test_verified_import_on_cpu_matches_the_lineage(self):
        hello = self.d.hello()
        if "cpu" not in (hello.get("backends") or []):
            self.fail(f"htamd offers no cpu backend: {hello}")
        task = load_task(os.path.join(FIXTURES, "fx_square"))
        lines = []
        report = import_task(self.d, task, recorded=False, out=lines.append)
        statuses = {s.variant: s.status for s in report.steps}
        self.assertEqual(statuses, {"v4": "compile_error", "v1": "ok", "v2": "incorrect",
                                    "v3": "ok"}, "\n".join(lines))
        self.assertEqual(report.disagreements, [])


class AgentLoopTest(DaemonTestBase):
    def test_replay_agent_follows_the_memory_and_reports(self):
        import_task(self.d, load_task(os.path.join(FIXTURES, "fx_relu")), recorded=True,
                    out=quiet)
        import_task(self.d, load_task(os.path.join(FIXTURES, "fx_square")), recorded=True,
                    out=quiet)
        task = load_task(os.path.join(FIXTURES, "fx_scale"))
        lines = []
        report = run_session(self.d, "fx_scale", "cpu",
                             ReplayProposer(task, task.lineages["cpu"]), budget=6,
                             recorded=True, out=lines.append)
        text = "\n".join(lines)
        self.assertIn("direction", text)
        self.assertTrue(report.closed)
        # The replay walks the lineage: every variant at most once, and the best is reached.
        variants = [r.variant for r in report.rows if r.variant]
        self.assertEqual(len(variants), len(set(variants)))
        self.assertIn("v3", variants, text)
        self.assertAlmostEqual(report.best_speedup, 1.9, places=3)
        table = final_table(report)
        self.assertIn("task fx_scale on cpu: best speedup 1.90x", table)

    def test_llm_agent_gets_the_compiler_error_back_and_repairs(self):
        task = load_task(os.path.join(FIXTURES, "fx_scale"))
        broken = task.lineages["cpu"].by_id("v4").source()
        good = task.lineages["cpu"].by_id("v1").source()
        ep = FakeEndpoint([
            reply("SUMMARY: blocked loop\nSTRATEGIES: none\n```cpp\n" + broken + "```\n"),
            reply("SUMMARY: unrolled with restrict\nSTRATEGIES: none\n```cpp\n" + good + "```\n")])
        self.addCleanup(ep.close)
        client = ChatClient(LLMConfig(base_url=ep.url, model="fake", backoff_s=0.01, timeout_s=10))
        out = io.StringIO()
        with redirect_stdout(out):
            report = run_session(self.d, "fx_scale", "cpu", LLMProposer(client), budget=2,
                                 spec_text=task.spec_text(), out=print)
        self.assertEqual([r.status for r in report.rows], ["compile_error", "ok"],
                         out.getvalue())
        second = ep.prompt(1)
        self.assertIn("previous candidate failed (compile_error)", second)
        self.assertIn("@", second)               # the failed source went back
        self.assertRegex(second, r"error")       # with the real compiler's message
        self.assertGreater(report.rows[1].speedup, 0)
        self.assertGreater(report.rows[0].tokens_in, 0)


    def _run_cli_with_fake_model(self, *extra):
        """`htam_agent run` on fx_relu (budget 1) against a fake model that answers v3."""
        task = load_task(os.path.join(FIXTURES, "fx_relu"))
        good = task.lineages["cpu"].by_id("v3").source()
        ep = FakeEndpoint([reply("SUMMARY: 16 loads in flight\nSTRATEGIES: none\n```cpp\n"
                                 + good + "```\n")])
        self.addCleanup(ep.close)
        env = dict(os.environ, HTAM_LLM_BASE_URL=ep.url, HTAM_LLM_MODEL="fake-coder",
                   HTAM_LLM_API_KEY="sk-env")
        r = subprocess.run([sys.executable, "-m", "htam_agent", "run", "--endpoint",
                            self.proc.endpoint, "--tasks-dir", FIXTURES, "--task", "fx_relu",
                            "--backend", "cpu", "--budget", "1", *extra],
                           env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r, ep

    def test_cli_runs_the_model_agent_from_the_environment(self):
        r, ep = self._run_cli_with_fake_model()
        self.assertIn("outcome: ok", r.stdout)
        self.assertIn("task fx_relu on cpu: best speedup", r.stdout)
        self.assertEqual(ep.requests[0]["headers"].get("Authorization"), "Bearer sk-env")
        self.assertEqual(ep.requests[0]["body"]["model"], "fake-coder")
        self.assertIn("y = max(x, 0)", ep.prompt(0))      # the task's specification
        # The daemon's step reached the model: its direction and the strategies under it.
        chosen = re.search(r"-- step 1/1: direction (\S+)", r.stdout).group(1)
        self.assertIn(f"# Direction for step 1: {chosen}", ep.prompt(0))
        shown = re.search(r"strategies: (\S+) \(used", r.stdout)
        if shown:
            self.assertIn(shown.group(1), ep.prompt(0))
        self.assertNotIn("4099", ep.prompt(0))            # never its held-out shapes

    def test_cli_profile_flag_shows_the_profile_line(self):
        # htamd here has no usable Nsight Compute for the CPU backend (none on PATH, or a real
        # one that sees no CUDA kernel): the Ok outcome carries the "profile unavailable" note.
        r, _ = self._run_cli_with_fake_model("--profile")
        self.assertIn("outcome: ok", r.stdout)
        self.assertRegex(r.stdout, r"\n   profile: (ncu: |profile unavailable: )")

    def test_dead_model_endpoint_ends_the_session_early(self):
        ep = FakeEndpoint([])
        url = ep.url
        ep.close()  # nothing listens there any more: connection refused
        client = ChatClient(LLMConfig(base_url=url, model="m", backoff_s=0.01, max_retries=1,
                                      timeout_s=2))
        lines = []
        report = run_session(self.d, "fx_relu", "cpu", LLMProposer(client), budget=6,
                             out=lines.append)
        self.assertEqual([r.status for r in report.rows], ["skipped", "skipped"])
        self.assertIn("model unavailable", report.rows[0].note)
        self.assertTrue(report.closed)


if __name__ == "__main__":
    unittest.main()
