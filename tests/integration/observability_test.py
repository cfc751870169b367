"""htamd as an operator watches it: readiness and Prometheus metrics over HTTP
(server.metrics_endpoint), scraped with a real HTTP client before and after requests, and JSON
log lines (general.log_format = json) that carry the request, session and job ids. The daemon
runs from a temporary folder on the build tree's shipped files (no --server.tasks_dir).

Needs HTAM_HTAMD and the SDK on PYTHONPATH; ctest sets both.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import htam

HTAMD = os.environ.get("HTAM_HTAMD", "build/daemon/htamd")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def scrape(url):
    """{(name, labels): value} of a text exposition page."""
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200, r.status
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


class ObservabilityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="htam-observe-")
        os.chmod(cls.tmp, 0o755)
        cls.endpoint = f"ipc://{cls.tmp}/htamd.sock"
        cls.log_path = os.path.join(cls.tmp, "htamd.log")
        with open(cls.log_path, "wb") as log:
            cls.proc = subprocess.Popen(
                [os.path.abspath(HTAMD), "--general.data_dir", os.path.join(cls.tmp, "data"),
                 "--server.bind", cls.endpoint, "--eval.backends", "cpu",
                 "--general.log_format", "json", "--server.metrics_endpoint", "127.0.0.1:0"],
                cwd=cls.tmp, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        cls.base = ""
        while time.monotonic() < deadline and cls.proc.poll() is None:
            if not cls.base:
                m = re.search(r"metrics on (http://[0-9.:]+)/metrics", cls.log())
                cls.base = m.group(1) if m else ""
            try:
                htam.Client(cls.endpoint, timeout_s=0.5, retries=0).close()
                if cls.base:
                    return
            except htam.HtamTimeout:
                pass
            time.sleep(0.2)
        raise RuntimeError("htamd did not come up:\n" + cls.log())

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.send_signal(signal.SIGTERM)
            cls.proc.wait(timeout=60)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def log(cls):
        with open(cls.log_path, errors="replace") as f:
            return f.read()

    def test_health_metrics_and_logs(self):
        with urllib.request.urlopen(self.base + "/ready", timeout=10) as r:
            self.assertEqual(r.status, 200)
        with urllib.request.urlopen(self.base + "/healthz", timeout=10) as r:
            self.assertEqual(r.status, 200)
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(self.base + "/nope", timeout=10)
        self.assertEqual(e.exception.code, 404)

        before = scrape(self.base + "/metrics")
        self.assertEqual(before[("htam_up", "")], 1)
        self.assertEqual(before[("htam_ready", "")], 1)
        self.assertGreater(before[("htam_memory_directions", "")], 0)  # the shipped seed
        self.assertIn(("htam_memory_last_snapshot_age_seconds", ""), before)
        nextstep = ("htam_requests_total", '{type="NextStep"}')
        self.assertNotIn(nextstep, before)

        with htam.Client(self.endpoint, timeout_s=60) as c:
            sid = c.open_session(task="cpu_relu", backend="cpu", budget=3)["session"]["id"]
            step = c.next_step(sid)
            c.next_step(sid)
            c.record(sid, direction_id=step["direction"]["id"], summary="reported elsewhere",
                     status="CompileError")
            with open("configs/tasks/cpu_relu/reference.cpp") as f:
                result = c.submit(sid, f.read(), direction_id=step["direction"]["id"],
                                  summary="the reference")
            self.assertEqual(result["status_name"], "Ok", result)
            job_id = result["job_id"]
            with self.assertRaises(htam.HtamError):
                c.next_step(987654321)  # no such session: an error reply
        time.sleep(0.3)  # the queue-depth gauge follows the loop's tick
        after = scrape(self.base + "/metrics")
        self.assertEqual(after[nextstep], 3)
        self.assertEqual(after[("htam_request_errors_total", '{type="NextStep"}')], 1)
        self.assertEqual(after[("htam_requests_total", '{type="Submit"}')], 1)
        self.assertEqual(after[("htam_request_duration_seconds_count", '{type="Submit"}')], 1)
        self.assertGreater(after[("htam_request_duration_seconds_sum", '{type="Submit"}')], 0)
        self.assertEqual(after[("htam_request_duration_seconds_bucket", '{type="NextStep",le="+Inf"}')], 3)
        self.assertEqual(after[("htam_outcomes_total", '{status="Ok",verified="true"}')], 1)
        self.assertEqual(after[("htam_outcomes_total", '{status="CompileError",verified="false"}')], 1)
        self.assertEqual(after[("htam_evaluation_queue_depth", "")], 0)
        self.assertEqual(after[("htam_memory_transitions", "")],
                         before[("htam_memory_transitions", "")] + 2)
        self.assertGreater(after[("htam_memory_store_file_bytes", "")], 0)

        # Logs: every line one JSON object; the session's and the job's lines carry their ids.
        lines = [json.loads(l) for l in self.log().splitlines() if l.strip()]
        for rec in lines:
            self.assertTrue({"ts", "level", "component", "msg"} <= rec.keys(), rec)
        opened = [r for r in lines if "opened on task" in r["msg"]]
        self.assertTrue(opened and opened[0].get("session_id") == sid, opened)
        self.assertIn("request_id", opened[0])
        job = [r for r in lines if r.get("job_id") == job_id and r["msg"].startswith(f"job {job_id}")]
        self.assertTrue(job and job[0].get("session_id") == sid, job)
        submits = [r for r in lines if r.get("job_id") == job_id and "request_id" in r]
        self.assertTrue(submits and all(r["request_id"] > 0 for r in submits), job)
        self.assertIn("request_id", job[-1])  # the result's line, as docs/operations.md shows

    def test_metrics_pass_promtool(self):
        promtool = shutil.which("promtool")
        if not promtool:
            self.fail("promtool missing: tools/setup.sh installs it (Debian package prometheus)")
        with htam.Client(self.endpoint, timeout_s=60) as c:
            c.next_step(c.open_session(task="cpu_relu", backend="cpu")["session"]["id"])
        with urllib.request.urlopen(self.base + "/metrics", timeout=10) as r:
            text = r.read()
        p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                           timeout=60)
        self.assertEqual((p.returncode, p.stdout.decode() + p.stderr.decode()), (0, ""),
                         text.decode())
        # Numbers as a person writes them: 300, not 3e+02.
        self.assertNotRegex(text.decode(), r"[0-9]e\+[0-9]")


if __name__ == "__main__":
    unittest.main()
