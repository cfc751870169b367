"""Writes the store fixture of this release for upgrade_test.py: a small store as htamd of this
version leaves it (seed taxonomy, one task, one closed session with recorded steps, one open
session), packed as tests/packaging/fixtures/store-<version>.tar.xz with a JSON file of what it
holds. Run once per release, from the source root, and commit both files; later releases must
keep opening every committed fixture (upgrade_test.py).

  PYTHONPATH=build/python /usr/bin/python3 tests/packaging/make_store_fixture.py build/daemon/htamd
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

import htam

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def main():
    htamd = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/daemon/htamd")
    version = subprocess.run([htamd, "--version"], capture_output=True, text=True,
                             check=True).stdout.split()[-1]
    tmp = tempfile.mkdtemp(prefix="htam-fixture-")
    endpoint = f"ipc://{tmp}/htamd.sock"
    data = os.path.join(tmp, "data")
    proc = subprocess.Popen([htamd, "--general.data_dir", data, "--server.bind", endpoint,
                             "--worker.local", "false", "--general.log_level", "warn"])
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                htam.Client(endpoint, timeout_s=0.5, retries=0).close()
                break
            except htam.HtamTimeout:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("htamd did not come up")
        facts = {"htam_version": version, "sessions": []}
        with htam.Client(endpoint, timeout_s=30) as c:
            for task, steps, close in (("cpu_relu", 3, True), ("cpu_rowsum", 2, False)):
                sid = c.open_session(task=task, backend="cpu", budget=8)["session"]["id"]
                best = 1.0
                for i in range(steps):
                    step = c.next_step(sid)
                    speedup = 1.0 + 0.25 * i
                    best = max(best, speedup)
                    c.record(sid, direction_id=step["direction"]["id"],
                             summary=f"fixture step {i} of {task}", status="Ok",
                             speedup_after=speedup, median_us=100.0 / speedup)
                if close:
                    c.close_session(sid)
                facts["sessions"].append({"id": sid, "task": task, "steps": steps,
                                          "closed": close, "best_speedup": best})
            status = c.status("memory")
        facts["schema_version"] = int(
            [l for l in status.splitlines() if l.startswith("schema_version:")][0].split(":")[1])
        facts["directions"] = int(
            [l for l in status.splitlines() if l.startswith("directions:")][0].split(":")[1])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    os.makedirs(FIXTURES, exist_ok=True)
    name = f"store-{version}"
    # The LMDB file only: index snapshots are rebuilt from the records when missing.
    with tarfile.open(os.path.join(FIXTURES, name + ".tar.xz"), "w:xz") as tar:
        tar.add(os.path.join(data, "store", "data.mdb"), arcname="store/data.mdb")
    with open(os.path.join(FIXTURES, name + ".json"), "w") as f:
        json.dump(facts, f, indent=1)
        f.write("\n")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {FIXTURES}/{name}.tar.xz and {name}.json: {facts}")


if __name__ == "__main__":
    main()
