"""`cmake --install` into a temporary prefix, then the installed htamd started from an unrelated
folder with only a data directory and an endpoint given: it must find its seed taxonomy, task
suite, evaluation worker, CPU plugin and kernel ABI headers under the prefix (the bug was
"cannot read seed taxonomy configs/seed_taxonomy.json"). A client — the installed Python SDK,
the installed htam CLI and the installed htam-agent launcher — then runs a session with one
evaluated candidate against it.

Usage (ctest): /usr/bin/python3 -m unittest tests/packaging/install_test.py; HTAM_BUILD_DIR names
the build folder to install from.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

BUILD = os.path.abspath(os.environ.get("HTAM_BUILD_DIR", "build"))
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class InstalledDaemonTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="htam-install-")
        os.chmod(cls.tmp, 0o755)  # sandboxed workers (another user) traverse the data folder
        cls.prefix = os.path.join(cls.tmp, "prefix")
        r = subprocess.run(["cmake", "--install", BUILD, "--prefix", cls.prefix],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("cmake --install failed:\n" + r.stdout + r.stderr)
        cls.elsewhere = os.path.join(cls.tmp, "elsewhere")  # the daemon's working folder
        os.makedirs(cls.elsewhere)
        cls.data = os.path.join(cls.tmp, "data")
        cls.endpoint = f"ipc://{cls.tmp}/htamd.sock"
        cls.log_path = os.path.join(cls.tmp, "htamd.log")
        env = {"PATH": "/usr/bin:/bin", "HOME": cls.tmp}  # nothing of the build's environment
        with open(cls.log_path, "wb") as log:
            cls.proc = subprocess.Popen(
                [os.path.join(cls.prefix, "bin", "htamd"),
                 "--config", os.path.join(cls.prefix, "etc", "htam", "htamd.conf"),
                 "--general.data_dir", cls.data, "--server.bind", cls.endpoint,
                 "--eval.backends", "cpu"],
                cwd=cls.elsewhere, env=env, stdout=log, stderr=subprocess.STDOUT)
        # The installed SDK only: the package as installed, not build/python or sdk/python.
        sys.path.insert(0, os.path.join(cls.prefix, "lib", "python3", "dist-packages"))
        import htam  # noqa: E402
        cls.htam = htam
        deadline = time.monotonic() + 90
        while True:
            if cls.proc.poll() is not None:
                raise RuntimeError("installed htamd exited:\n" + cls.log())
            try:
                htam.Client(cls.endpoint, timeout_s=0.5, retries=0).close()
                break
            except htam.HtamTimeout:
                if time.monotonic() > deadline:
                    raise RuntimeError("installed htamd never answered:\n" + cls.log())
                time.sleep(0.2)

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.send_signal(signal.SIGTERM)
            try:
                cls.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                cls.proc.kill()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def log(cls):
        with open(cls.log_path, errors="replace") as f:
            return f.read()

    def test_layout(self):
        for rel in ["bin/htamd", "bin/htam", "bin/htam-worker", "bin/htam-agent", "bin/htam-mcp",
                    "lib/htam/htam-eval-worker", "lib/htam/backends/libhtam_backend_cpu.so",
                    "share/htam/seed_taxonomy.json", "share/htam/tasks/cpu_relu/task.json",
                    "share/htam/include/htam/kernel_abi.h",
                    "share/htam/kernelbench/kb_helper.py", "share/htam/world/families",
                    "share/htam/world/split.json", "etc/htam/htamd.conf",
                    "lib/systemd/system/htamd.service",
                    "lib/python3/dist-packages/htam/client.py",
                    "lib/python3/dist-packages/htam_agent/__main__.py",
                    "lib/python3/dist-packages/htam_bench/__main__.py"]:
            self.assertTrue(os.path.exists(os.path.join(self.prefix, rel)), rel)
        with open(os.path.join(self.prefix, "lib/systemd/system/htamd.service")) as f:
            unit = f.read()
        self.assertIn(f"ExecStart={self.prefix}/bin/htamd --config {self.prefix}/etc/htam/htamd.conf",
                      unit)
        self.assertIn("\nDelegate=memory\n", unit)

    def test_installed_packages_find_what_htam_ships(self):
        # The installed Python packages alone, from an unrelated folder: the world bench's families,
        # the KernelBench helper and htamd come from the prefix, not the source or build tree.
        code = ("import htam_bench.world_families as wf, htam_agent.kernelbench as kb, "
                "htam_agent.htamd as h; print(wf.DEFAULT_FAMILIES); print(kb.default_helper()); "
                "print(h.find_htamd())")
        r = subprocess.run(["/usr/bin/python3", "-c", code], cwd=self.elsewhere,
                           env={"PATH": "/usr/bin:/bin", "HOME": self.tmp,
                                "PYTHONPATH": os.path.join(self.prefix, "lib", "python3",
                                                           "dist-packages")},
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        prefix = os.path.realpath(self.prefix)
        self.assertEqual(r.stdout.split(), [
            os.path.join(prefix, "share", "htam", "world", "families"),
            os.path.join(prefix, "share", "htam", "kernelbench", "kb_helper.py"),
            os.path.join(prefix, "bin", "htamd")])

    def test_installed_htam_bench_finds_its_python_harness(self):
        # htam-bench's Python subcommands run the harness installed beside the SDK and the agent
        # (htam_bench, package htam-tools), found above the installed binary, from anywhere.
        r = subprocess.run([os.path.join(self.prefix, "bin", "htam-bench"), "quality", "--help"],
                           cwd=self.elsewhere, env={"PATH": "/usr/bin:/bin", "HOME": self.tmp},
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("usage:", r.stdout)
        self.assertFalse(os.path.exists(os.path.join(
            self.prefix, "lib", "python3", "dist-packages", "htam_agent", "world_bench.py")))

    def test_systemd_units_verify(self):
        analyze = shutil.which("systemd-analyze", path="/usr/bin:/bin")
        if not analyze:
            self.skipTest("systemd-analyze is not installed (tools/setup.sh installs systemd)")
        units = os.path.join(self.prefix, "lib", "systemd", "system")
        names = sorted(os.listdir(units))
        self.assertEqual(names, ["htam-worker.service", "htam-worker@.service", "htamd.service"])
        check = os.path.join(self.tmp, "units")
        os.makedirs(check, exist_ok=True)
        paths = []
        for n in names:
            # A template is verified as an instance (GPU 0).
            dst = os.path.join(check, n.replace("@.", "@0."))
            shutil.copy(os.path.join(units, n), dst)
            paths.append(dst)
        r = subprocess.run([analyze, "verify"] + paths, capture_output=True, text=True,
                           timeout=120)
        # Any line is a finding (unknown keys are only warnings with exit status 0).
        self.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""))

    def test_shipped_configurations_parse(self):
        for binary, conf in (("htamd", "htamd.conf"), ("htam-worker", "worker.conf")):
            r = subprocess.run([os.path.join(self.prefix, "bin", binary), "--config",
                                os.path.join(self.prefix, "etc", "htam", conf), "--dump-config"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_session_with_evaluation(self):
        with self.htam.Client(self.endpoint, timeout_s=60) as c:
            hello = c.hello()
            self.assertIn("cpu", hello["backends"], self.log())
            m = re.search(r"^directions:\s*(\d+)", c.status("memory"), re.M)
            self.assertTrue(m and int(m.group(1)) > 0, "seed taxonomy not loaded\n" + self.log())
            info = c.open_session(task="cpu_relu", backend="cpu", budget=2)
            sid = info["session"]["id"]
            step = c.next_step(sid)
            self.assertTrue(step["direction"]["name"], step)
            with open(os.path.join(self.prefix, "share/htam/tasks/cpu_relu/reference.cpp")) as f:
                source = f.read()
            result = c.submit(sid, source, direction_id=step["direction"]["id"],
                              summary="reference as a candidate")
            self.assertEqual(result["status_name"], "Ok", str(result) + "\n" + self.log())
            c.close_session(sid)

    def test_installed_cli_and_agent(self):
        env = {"PATH": "/usr/bin:/bin", "HOME": self.tmp}
        r = subprocess.run([os.path.join(self.prefix, "bin", "htam"), "--connect", self.endpoint,
                            "status"], cwd=self.elsewhere, env=env, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("# memory", r.stdout)
        r = subprocess.run([os.path.join(self.prefix, "bin", "htam-agent"), "wait-ready",
                            "--endpoint", self.endpoint, "--within", "30"],
                           cwd=self.elsewhere, env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_installed_mcp_server(self):
        # The installed launcher, from elsewhere, with only htamd's endpoint: the shipped task
        # suite, reference sources and kernel ABI header are found under the prefix.
        env = {"PATH": "/usr/bin:/bin", "HOME": self.tmp}
        msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "install-test", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "describe_task", "arguments": {"task": "cpu_relu"}}}]
        r = subprocess.run([os.path.join(self.prefix, "bin", "htam-mcp"), "--endpoint",
                            self.endpoint], input="".join(json.dumps(m) + "\n" for m in msgs),
                           cwd=self.elsewhere, env=env, capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("warning", r.stderr)
        replies = {m["id"]: m for m in map(json.loads, r.stdout.splitlines())}
        out = replies[2]["result"]["structuredContent"]
        self.assertIn("htam_kernel", out["kernel_abi"])
        self.assertIn("htam_kernel", out["reference_source"])
        self.assertNotIn("note", out)  # nothing missing


if __name__ == "__main__":
    unittest.main()
