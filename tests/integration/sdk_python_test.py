"""The Python SDK (package htam) against a real htamd in a temp dir: the whole loop with the CPU
backend, errors, kill -9 and resume, and CURVE accept/refuse.

Needs HTAM_HTAMD (the daemon binary) and HTAM_KEYGEN (htam-keygen); ctest sets both.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import htam
from htam.fb.Bottleneck import Bottleneck

HTAMD = os.environ.get("HTAM_HTAMD", "build/daemon/htamd")
KEYGEN = os.environ.get("HTAM_KEYGEN", "build/daemon/server/htam-keygen")
NCU_TEST_PLUGIN_DIR = os.path.abspath(os.environ.get(
    "HTAM_NCU_TEST_PLUGIN_DIR", "build/tests/integration/cpu-plugin-with-ncu"))
TASKS = os.path.abspath("configs/tasks")


class Daemon:
    """One htamd child process on a private ipc:// endpoint."""

    def __init__(self, data_dir: str, **options: str):
        self.data_dir = data_dir
        self.endpoint = options.pop("bind", f"ipc://{data_dir}/htamd.sock")
        self.options = options
        self.proc = None

    def start(self, wait: bool = True) -> "Daemon":
        cmd = [HTAMD, "--general.data_dir", self.data_dir, "--server.bind", self.endpoint,
               "--server.tasks_dir", TASKS]
        for k, v in self.options.items():
            cmd += [f"--{k.replace('__', '.')}", str(v)]
        os.makedirs(self.data_dir, exist_ok=True)
        log = open(os.path.join(self.data_dir, "htamd.log"), "ab")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        if wait:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError("htamd exited:\n" + self.log())
                try:
                    htam.Client(self.endpoint, timeout_s=0.5, retries=0).close()
                    return self
                except htam.HtamTimeout:
                    time.sleep(0.1)
            raise RuntimeError("htamd never answered:\n" + self.log())
        return self

    def log(self) -> str:
        with open(os.path.join(self.data_dir, "htamd.log"), errors="replace") as f:
            return f.read()

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(timeout=60)
        return self.proc.returncode if self.proc else 0


class SdkPythonTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="htam-sdk-py-")
        os.chmod(self.dir, 0o755)  # sandboxed eval workers (another uid) reach the eval cache
        self.daemons = []

    def tearDown(self):
        for d in self.daemons:
            d.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def daemon(self, **options) -> Daemon:
        d = Daemon(os.path.join(self.dir, "data"), **options)
        self.daemons.append(d)
        return d

    def test_optimization_loop_with_the_cpu_backend(self):
        d = self.daemon().start()
        progress = []
        with htam.Client(d.endpoint, timeout_s=30, on_progress=progress.append) as c:
            self.assertEqual(c.server["protocol_version"], 1)
            self.assertIn("cpu", c.server["backends"])
            info = c.open_session("cpu_relu", backend="cpu", budget=5, model="unit-test")
            sid = info["session"]["id"]
            self.assertEqual(info["task"]["name"], "cpu_relu")
            self.assertIn("htam_kernel", info["baseline_source"])
            step = c.next_step(sid)
            self.assertTrue(step["direction"]["name"])
            self.assertTrue(step["why"])
            self.assertIsInstance(step["strategies"], list)
            ack = c.submit(sid, info["baseline_source"], direction_id=step["direction"]["id"],
                           strategy_ids=[h["strategy"]["id"] for h in step["strategies"]][:2],
                           summary="reference resubmitted", wait=False, progress=True)
            self.assertGreater(ack["job_id"], 0)
            result = c.poll(ack["job_id"], wait_ms=300000)
            self.assertTrue(result["done"])
            self.assertEqual(result["status_name"], "Ok", result["diagnostics"])
            self.assertGreater(result["speedup"], 0)
            stages = [p["stage"] for p in progress if p["job_id"] == ack["job_id"]]
            self.assertEqual(stages[0], "queued", stages)
            self.assertEqual(stages[1], "running", stages)
            self.assertIn("compile candidate", stages)
            self.assertIn("time candidate", stages)
            self.assertEqual(stages[-1], "done", stages)
            tid = c.record(sid, step["direction"]["id"], [], "measured on my own box", "Ok", 1.25,
                           80.0)
            self.assertGreater(tid, 0)
            tr = c.query("transitions", session_id=sid)["transitions"]
            self.assertEqual(len(tr), 2)
            self.assertEqual(sorted(t["verified"] for t in tr), [False, True])
            # The resubmitted reference is about as fast as the baseline: it becomes the session's
            # best candidate only when it measured faster.
            best = c.query("best_candidates", session_id=sid)
            if c.open_session(session_id=sid)["session"]["best_candidate"]:
                self.assertEqual(len(best["candidates"]), 1)
                self.assertIn("htam_kernel", best["candidates"][0]["source"])
            else:
                self.assertEqual(best["candidates"], [])
            closed = c.close_session(sid)
            self.assertEqual(closed["steps"], 2)
            status = htam.parse_status(c.status())
            self.assertEqual(status["server"]["curve"], "off")
            self.assertIn("evaluation", status)
        self.assertEqual(d.stop(), 0)

    def test_profile_on_request_with_a_stand_in_ncu(self):
        # A stand-in for Nsight Compute (configured as eval.ncu): runs the program it is given
        # (the worker's one-call mode), then prints ncu's CSV of one memory-bound kernel.
        marker = os.path.join(self.dir, "data", "eval-cache", "fake-ncu-ran")
        ncu = os.path.join(self.dir, "ncu")
        row = ('"0","7","htam-eval-worker","127.0.0.1","relu(const float *, float *, long)",'
               '"1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics",')
        with open(ncu, "w") as f:
            f.write("#!/bin/sh\n"
                    f"touch '{marker}'\n"
                    'while [ $# -gt 0 ] && [ "$1" != all ]; do shift; done\n'
                    'shift\n'
                    '"$@" || exit 4\n'
                    "cat <<'CSV'\n"
                    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
                    '"Block Size","Grid Size","Device","CC","Section Name","Metric Name",'
                    '"Metric Unit","Metric Value"\n'
                    + row + '"dram__throughput.avg.pct_of_peak_sustained_elapsed","%","85.00"\n'
                    + row + '"gpu__time_duration.sum","usecond","24.06"\n'
                    + row + '"sm__throughput.avg.pct_of_peak_sustained_elapsed","%","20.00"\n'
                    + row + '"sm__warps_active.avg.pct_of_peak_sustained_active","%","70.00"\n'
                    "CSV\n")
        os.chmod(ncu, 0o755)
        # The CPU plugin offers no profiler; this build of it carries the CUDA plugin's (Nsight
        # Compute) entry points (tests/integration/cpu_plugin_with_ncu.cc).
        d = self.daemon(eval__ncu=ncu, eval__plugin_dir=NCU_TEST_PLUGIN_DIR).start()
        me = os.urandom(16)  # both client objects below are one client: the session's owner
        with htam.Client(d.endpoint, timeout_s=30, identity_secret=me) as c:
            info = c.open_session("cpu_relu", backend="cpu", budget=5)
            sid = info["session"]["id"]
            step = c.next_step(sid)
            r = c.submit(sid, info["baseline_source"], direction_id=step["direction"]["id"],
                         summary="profiled", profile=True)
            self.assertEqual(r["status_name"], "Ok", r["diagnostics"])
            self.assertAlmostEqual(r["profile"]["dram_throughput"], 0.85, places=4)
            self.assertAlmostEqual(r["profile"]["sm_throughput"], 0.20, places=4)
            self.assertAlmostEqual(r["profile"]["occupancy"], 0.70, places=4)
            self.assertIn("ncu: Memory-bound", r["diagnostics"])
            self.assertTrue(os.path.exists(marker))
            os.remove(marker)
            step = c.next_step(sid)
            plain = c.submit(sid, info["baseline_source"], direction_id=step["direction"]["id"],
                             summary="not profiled")
            self.assertEqual(plain["status_name"], "Ok", plain["diagnostics"])
            self.assertEqual(plain["profile"]["dram_throughput"], -1)
            self.assertFalse(os.path.exists(marker), "ncu ran without profile=True")
            # The step after the profiled one is recorded in the measured state.
            tr = sorted(c.query("transitions", session_id=sid)["transitions"],
                        key=lambda t: t["step"])
            self.assertEqual([t["state"]["bottleneck"] for t in tr],
                             [Bottleneck.Unknown, Bottleneck.Memory])
        # The measured class is the session's, not the daemon process's: after a restart the
        # session's next step is still recorded in it.
        self.assertEqual(d.stop(), 0)
        d.start()
        with htam.Client(d.endpoint, timeout_s=30, identity_secret=me) as c:
            step = c.next_step(sid)
            after = c.submit(sid, info["baseline_source"], direction_id=step["direction"]["id"],
                             summary="after a restart")
            self.assertEqual(after["status_name"], "Ok", after["diagnostics"])
            tr = sorted(c.query("transitions", session_id=sid)["transitions"],
                        key=lambda t: t["step"])
            self.assertEqual([t["state"]["bottleneck"] for t in tr],
                             [Bottleneck.Unknown, Bottleneck.Memory, Bottleneck.Memory])

    def test_next_step_with_a_client_measured_bottleneck(self):
        d = self.daemon(memory__bottleneck_mask="hard").start()
        with htam.Client(d.endpoint, timeout_s=30) as c:
            sid = c.open_session("cpu_relu", backend="cpu", budget=5)["session"]["id"]
            plain = c.next_step(sid)
            self.assertFalse(any("bound" in (s["mask_reason"] or "") for s in plain["scores"]))
            c.record(sid, plain["direction"]["id"], [], "first", "Ok", 1.1, 50.0)
            step = c.next_step(sid, bottleneck="Memory")
            masked = {s["name"]: s["mask_reason"] or "" for s in step["scores"] if s["masked"]}
            # The seed taxonomy's compute-only direction does not fit a memory-bound kernel.
            self.assertIn("compute-throughput-precision", masked)
            self.assertIn("state is Memory-bound", masked["compute-throughput-precision"])
            self.assertNotIn(step["direction"]["name"], masked)
            c.record(sid, step["direction"]["id"], [], "second", "Ok", 1.2, 45.0)
            # The recorded step keeps the state its NextStep was asked in.
            tr = sorted(c.query("transitions", session_id=sid)["transitions"],
                        key=lambda t: t["step"])
            self.assertEqual([t["state"]["bottleneck"] for t in tr],
                             [Bottleneck.Unknown, Bottleneck.Memory])
            with self.assertRaises(ValueError):
                c.next_step(sid, bottleneck="io-bound")
            # A value htamd does not know (a newer client's) is read as Unknown: nothing masked.
            from htam.fb import Body
            from htam.fb.NextStep import NextStepT
            m = NextStepT()
            m.sessionId = sid
            m.bottleneck = 9
            raw = htam.to_dict(c._call(m, Body.Body.NextStep))
            self.assertFalse(any("bound" in (s["mask_reason"] or "") for s in raw["scores"]))

    def test_soft_bottleneck_mask_penalizes_instead_of_masking(self):
        d = self.daemon(memory__bottleneck_mask="soft", memory__bottleneck_penalty="0.25").start()
        with htam.Client(d.endpoint, timeout_s=30) as c:
            plain_sid = c.open_session("cpu_relu", backend="cpu", budget=5)["session"]["id"]
            sid = c.open_session("cpu_relu", backend="cpu", budget=5)["session"]["id"]
            plain = {s["name"]: s for s in c.next_step(plain_sid)["scores"]}
            step = c.next_step(sid, bottleneck="Memory")
            scores = {s["name"]: s for s in step["scores"]}
            # The compute-only direction stays on offer for a memory-bound kernel, 0.25 lower.
            cp = scores["compute-throughput-precision"]
            self.assertFalse(cp["masked"])
            self.assertFalse(cp["mask_reason"])
            self.assertAlmostEqual(cp["score"],
                                   plain["compute-throughput-precision"]["score"] - 0.25, places=6)
            self.assertAlmostEqual(scores["global-memory-access"]["score"],
                                   plain["global-memory-access"]["score"], places=6)
            self.assertIn("Bottleneck penalty -0.250", step["why"])
        self.assertEqual(d.stop(), 0)
        # A mode htamd does not know is refused at start with the accepted ones.
        bad = self.daemon(memory__bottleneck_mask="sometimes")
        with self.assertRaises(RuntimeError) as e:
            bad.start()
        self.assertIn("expected hard, soft or off", str(e.exception))

    def test_errors_are_exceptions_with_codes(self):
        d = self.daemon().start()
        with htam.Client(d.endpoint, timeout_s=10) as c:
            with self.assertRaises(htam.HtamError) as e:
                c.next_step(123456789)
            self.assertEqual(e.exception.code, "NotFound")
            with self.assertRaises(htam.HtamError) as e:
                c.open_session("../secrets")
            self.assertEqual(e.exception.code, "InvalidArgument")
            with self.assertRaises(htam.HtamError) as e:
                c.poll(42)
            self.assertEqual(e.exception.code, "NotFound")
            self.assertGreaterEqual(len(c.query("directions")["directions"]), 13)

    def test_kill_nine_and_resume(self):
        d = self.daemon().start()
        c = htam.Client(d.endpoint, timeout_s=3, retries=5)
        sid = c.open_session("cpu_relu", budget=9)["session"]["id"]
        acked = []
        for i in range(3):
            step = c.next_step(sid)
            acked.append(c.record(sid, step["direction"]["id"], [], f"step {i}", "Ok", 1 + i / 10))
        d.kill()
        d2 = self.daemon().start()
        self.assertEqual(d2.endpoint, d.endpoint)
        info = c.open_session(session_id=sid)  # the same client object reconnects
        self.assertEqual(info["session"]["steps"], 3)
        ids = sorted(t["id"] for t in c.query("transitions", session_id=sid)["transitions"])
        self.assertEqual(ids, sorted(acked))
        c.close()

    def test_without_curve_a_session_belongs_to_the_client_that_opened_it(self):
        d = self.daemon().start()  # no CURVE, default configuration
        alice = htam.Client(d.endpoint, timeout_s=10, retries=0, client_name="alice")
        mallory = htam.Client(d.endpoint, timeout_s=10, retries=0, client_name="mallory")
        sid = alice.open_session("cpu_relu", budget=9)["session"]["id"]
        step = alice.next_step(sid)
        alice.record(sid, step["direction"]["id"], [], "alice's step", "Ok", 1.1)
        for attempt in (lambda: mallory.record(sid, step["direction"]["id"], [], "not mine",
                                               "Ok", 9.0),
                        lambda: mallory.close_session(sid),
                        lambda: mallory.next_step(sid),
                        lambda: mallory.open_session(session_id=sid)):
            with self.assertRaises(htam.HtamError) as e:
                attempt()
            self.assertEqual(e.exception.code, "Unauthorized", str(e.exception))
        # A raw connection that sends no identity is its own owner, too.
        raw = htam.Client(d.endpoint, timeout_s=10, retries=0, hello=False)
        raw._open_socket(announce=False)
        raw._unknown_socket = lambda env: False  # never introduce itself
        with self.assertRaises(htam.HtamError) as e:
            raw.close_session(sid)
        self.assertEqual(e.exception.code, "Unauthorized")
        raw.close()
        # Reading stays allowed (server.others_read = records).
        self.assertEqual(len(mallory.query("transitions", session_id=sid)["transitions"]), 1)
        # Alice on a fresh socket (the SDK's reconnect after a timeout) is still alice.
        alice._open_socket()
        self.assertEqual(alice.open_session(session_id=sid)["session"]["steps"], 1)
        alice.record(sid, step["direction"]["id"], [], "after reconnecting", "Ok", 1.2)
        # So is another client object given alice's identity (one tool's pool).
        pooled = htam.Client(d.endpoint, timeout_s=10, retries=0,
                             identity_secret=alice._identity_secret)
        self.assertEqual(pooled.close_session(sid)["steps"], 2)
        self.assertNotIn(alice._identity_secret.hex(), d.log())
        for c in (alice, mallory, pooled):
            c.close()

    def test_curve_accepts_known_keys_only(self):
        keys = os.path.join(self.dir, "keys")
        subprocess.run([KEYGEN, keys, "server", "alice", "mallory"], check=True,
                       stdout=subprocess.DEVNULL)
        alice = htam.read_key_file(os.path.join(keys, "alice.pub"))["public"]
        with open(os.path.join(keys, "authorized_keys"), "w") as f:
            f.write(f"{alice} alice\n")
        d = self.daemon(server__curve="true",
                        server__curve_secret_key_file=os.path.join(keys, "server.key"),
                        server__curve_authorized_keys=os.path.join(keys, "authorized_keys"))
        d.start(wait=False)
        server_pub = os.path.join(keys, "server.pub")
        c = None
        for _ in range(100):
            try:
                c = htam.Client(d.endpoint, timeout_s=1, retries=0, server_public_key_file=server_pub,
                                client_key_file=os.path.join(keys, "alice.key"))
                break
            except htam.HtamTimeout:
                time.sleep(0.2)
        self.assertIsNotNone(c, d.log())
        self.assertIn("curve", c.server["capabilities"])
        with self.assertRaises(htam.HtamTimeout):
            htam.Client(d.endpoint, timeout_s=1, retries=0, server_public_key_file=server_pub,
                        client_key_file=os.path.join(keys, "mallory.key"))
        with self.assertRaises(htam.HtamTimeout):
            htam.Client(d.endpoint, timeout_s=1, retries=0)
        self.assertGreaterEqual(int(htam.parse_status(c.status("server"))["server"]["auth_refused"]), 1)
        # A refused client whose connection is already gone when it sends: a timeout, not a hang
        # (a DEALER drops a connection whose CURVE handshake was refused; a blocking send waited
        # forever on it).
        refused = int(htam.parse_status(c.status("server"))["server"]["auth_refused"])
        m = htam.Client(d.endpoint, timeout_s=1, retries=0, server_public_key_file=server_pub,
                        client_key_file=os.path.join(keys, "mallory.key"), hello=False)
        for _ in range(100):
            if int(htam.parse_status(c.status("server"))["server"]["auth_refused"]) > refused:
                break
            time.sleep(0.05)
        time.sleep(0.2)
        outcome = []

        def ask():
            try:
                m.status("server")
                outcome.append("answered")
            except htam.HtamTimeout:
                outcome.append("timeout")
        t = threading.Thread(target=ask, daemon=True)
        start = time.monotonic()
        t.start()
        t.join(timeout=10)
        self.assertEqual(outcome, ["timeout"], "a refused client's request hung")
        self.assertLess(time.monotonic() - start, 5)
        m.close()
        c.close()


if __name__ == "__main__":
    unittest.main()
