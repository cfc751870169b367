"""Starts and stops a local htamd for the demonstration, the tests and the quality benchmark.

The daemon runs on its embedded defaults except for what is passed: the data folder, a private
endpoint (ipc:// inside the data folder, so parallel runs never clash) and the task suite.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from typing import Dict, List, Optional

from .daemon import Daemon, DaemonError, connect
from .shipped import find_executable


def find_htamd(build_dir: str = "") -> str:
    """HTAM_HTAMD, else the htamd of the build folder named (build_dir or HTAM_BUILD_DIR), else
    the one shipped beside this package (htam.paths: an install's bin/, a build tree's bin/), else
    htamd on PATH; '' when there is none."""
    candidates = []
    if os.environ.get("HTAM_HTAMD"):
        candidates.append(os.environ["HTAM_HTAMD"])
    dirs = [build_dir] if build_dir else []
    if os.environ.get("HTAM_BUILD_DIR"):
        dirs.append(os.environ["HTAM_BUILD_DIR"])
    for b in dirs:
        candidates += [os.path.join(b, "daemon", "htamd"), os.path.join(b, "bin", "htamd")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return os.path.abspath(c)
    return find_executable("htamd")


class HtamdProcess:
    """One htamd child process. Use as a context manager; stop() is clean (SIGTERM, then wait)."""

    def __init__(self, binary: str, data_dir: str, tasks_dir: str = "",
                 options: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
                 endpoint: str = "", log_path: str = ""):
        self.binary = binary
        self.data_dir = os.path.abspath(data_dir)
        # "": htamd's own (server.tasks_dir, else the suite it ships).
        self.tasks_dir = os.path.abspath(tasks_dir) if tasks_dir else ""
        self.options = dict(options or {})
        self.cwd = cwd
        self.endpoint = endpoint or f"ipc://{self.data_dir}/htamd.sock"
        self.log_path = log_path or os.path.join(self.data_dir, "htamd.log")
        self.proc: Optional[subprocess.Popen] = None
        self._log = None

    def command(self) -> List[str]:
        cmd = [self.binary, "--general.data_dir", self.data_dir, "--server.bind", self.endpoint]
        if self.tasks_dir:
            cmd += ["--server.tasks_dir", self.tasks_dir]
        for k, v in self.options.items():
            cmd += [f"--{k}", str(v)]
        return cmd

    def start(self, ready_timeout_s: float = 60.0) -> "HtamdProcess":
        os.makedirs(self.data_dir, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                     cwd=self.cwd, start_new_session=True)
        deadline = time.monotonic() + ready_timeout_s
        last = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DaemonError(f"htamd exited with {self.proc.returncode} at start:\n"
                                  + self.log_tail())
            try:
                d = connect(self.endpoint, timeout_s=2.0)
                try:
                    d.hello()
                    return self
                finally:
                    d.close_connection()
            except DaemonError as e:
                last = str(e)
            time.sleep(0.1)
        self.stop()
        raise DaemonError(f"htamd did not answer within {ready_timeout_s:.0f}s ({last}):\n"
                          + self.log_tail())

    def client(self, timeout_s: float = 600.0) -> Daemon:
        return connect(self.endpoint, timeout_s=timeout_s)

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait; SIGKILL only if it does not exit in time. Returns the exit code."""
        if self.proc is None:
            return 0
        code = self.proc.poll()
        if code is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait()
        if self._log:
            self._log.close()
            self._log = None
        self.proc = None
        return code

    def log_tail(self, n: int = 30) -> str:
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return ""

    def __enter__(self) -> "HtamdProcess":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()
