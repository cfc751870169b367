"""Upgrades: every committed store fixture (tests/packaging/fixtures/store-<version>.tar.xz,
written by that release's htamd through make_store_fixture.py) opens with this build's htamd —
migrated where its schema is older, with a backup — and keeps its sessions and steps; a session
of the old store resumes and takes new steps; `htam check` finds no problem afterwards.

Needs HTAM_HTAMD, HTAM_CLI and the SDK on PYTHONPATH; ctest sets them.
"""

import glob
import json
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import unittest

import htam

HTAMD = os.environ.get("HTAM_HTAMD", "build/daemon/htamd")
CLI = os.environ.get("HTAM_CLI", "build/tools/cli/htam")
FIXTURES = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         "fixtures", "store-*.tar.xz")))


def status_field(text, key):
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    return None


class UpgradeTest(unittest.TestCase):
    def test_fixtures_exist(self):
        self.assertTrue(FIXTURES, "no store fixture committed in tests/packaging/fixtures")

    def test_old_stores_open(self):
        for fixture in FIXTURES:
            with self.subTest(fixture=os.path.basename(fixture)):
                self.open_fixture(fixture)

    def open_fixture(self, fixture):
        with open(fixture[:-len(".tar.xz")] + ".json") as f:
            facts = json.load(f)
        tmp = tempfile.mkdtemp(prefix="htam-upgrade-")
        try:
            data = os.path.join(tmp, "data")
            with tarfile.open(fixture) as tar:
                tar.extractall(data)
            endpoint = f"ipc://{tmp}/htamd.sock"
            log_path = os.path.join(tmp, "htamd.log")

            def log():
                with open(log_path, errors="replace") as f:
                    return f.read()

            def start():
                with open(log_path, "ab") as out:
                    p = subprocess.Popen([os.path.abspath(HTAMD), "--general.data_dir", data,
                                          "--server.bind", endpoint, "--worker.local", "false"],
                                         cwd=tmp, stdout=out, stderr=subprocess.STDOUT)
                deadline = time.monotonic() + 60
                while True:
                    try:
                        htam.Client(endpoint, timeout_s=0.5, retries=0).close()
                        return p
                    except htam.HtamTimeout:
                        if p.poll() is not None or time.monotonic() > deadline:
                            raise AssertionError("htamd did not open the fixture:\n" + log())

            def stop(p):
                p.send_signal(signal.SIGTERM)
                self.assertEqual(p.wait(timeout=60), 0, log())

            proc = start()
            try:
                with htam.Client(endpoint, timeout_s=30) as c:
                    mem = c.status("memory")
                    current = int(status_field(mem, "schema_version"))
                    self.assertGreaterEqual(current, facts["schema_version"])
                    self.assertEqual(int(status_field(mem, "directions")), facts["directions"])
                    for s in facts["sessions"]:
                        steps = c.query("transitions", session_id=s["id"], limit=100)["transitions"]
                        self.assertEqual(len(steps), s["steps"], s)
                    # The open session of the old store resumes and takes a new step.
                    open_s = [s for s in facts["sessions"] if not s["closed"]][0]
                    info = c.open_session(session_id=open_s["id"])
                    self.assertEqual(info["session"]["id"], open_s["id"])
                    step = c.next_step(open_s["id"])
                    c.record(open_s["id"], direction_id=step["direction"]["id"],
                             summary="after the upgrade", status="Ok", speedup_after=2.0)
            finally:
                stop(proc)
            if current > facts["schema_version"]:
                backups = glob.glob(os.path.join(data, "store", "backup-v*"))
                self.assertTrue(backups, "migrated without a backup")
            r = subprocess.run([CLI, "--data-dir", data, "check"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            # Reopened once more (now in this version's format): the new step is there.
            proc = start()
            try:
                with htam.Client(endpoint, timeout_s=30) as c:
                    steps = c.query("transitions", session_id=open_s["id"], limit=100)["transitions"]
                    self.assertEqual(len(steps), open_s["steps"] + 1)
            finally:
                stop(proc)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
