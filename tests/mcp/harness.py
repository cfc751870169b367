"""Shared by the htam-mcp tests: a real htamd (the CPU backend, a temp data folder, a private
ipc:// endpoint; htam_agent's HtamdProcess), htam-mcp as a process over stdio or HTTP, and raw
JSON-RPC over both.

Environment (ctest sets it): HTAM_HTAMD (the daemon), HTAM_MCP (the htam-mcp launcher),
HTAM_MCP_NODE_DIR (tests/mcp, where tools/setup.sh installed the npm clients).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from htam_agent.htamd import HtamdProcess, find_htamd

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TASKS = os.path.join(ROOT, "configs", "tasks")
NODE_DIR = os.environ.get("HTAM_MCP_NODE_DIR", os.path.join(ROOT, "tests", "mcp"))


def mcp_command() -> List[str]:
    """The htam-mcp launcher of the build, or the package through Debian's python3."""
    launcher = os.environ.get("HTAM_MCP", "")
    if launcher and os.access(launcher, os.X_OK):
        return [launcher]
    return ["/usr/bin/python3", "-m", "htam_mcp",
            "--tasks-dir", TASKS,
            "--abi-header", os.path.join(ROOT, "sdk", "include", "htam", "kernel_abi.h")]


def start_htamd(tmp: str) -> HtamdProcess:
    binary = find_htamd()
    if not binary:
        raise RuntimeError("htamd not built (set HTAM_HTAMD)")
    os.chmod(tmp, 0o755)  # sandboxed eval workers (another uid) reach the eval cache
    return HtamdProcess(binary, os.path.join(tmp, "data"), tasks_dir=TASKS, cwd=ROOT).start()


class StdioMcp:
    """htam-mcp over stdio, spoken to line by line."""

    def __init__(self, *args: str, env: Optional[Dict[str, str]] = None):
        self.proc = subprocess.Popen(mcp_command() + list(args), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={**os.environ, **(env or {})})
        self.next_id = 1

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read(self, timeout_s: float = 60.0) -> Any:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            raise TimeoutError("htam-mcp did not answer")
        line = self.proc.stdout.readline()
        if not line:
            raise EOFError("htam-mcp closed stdout: " + self.proc.stderr.read().decode())
        return json.loads(line)

    def request(self, method: str, params: Optional[Dict[str, Any]] = None,
                timeout_s: float = 60.0) -> Dict[str, Any]:
        rid = self.next_id
        self.next_id += 1
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send_raw(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self.read(timeout_s)
            if isinstance(reply, dict) and reply.get("id") == rid:
                return reply

    def notify(self, method: str, params: Optional[Dict[str, Any]] = None) -> None:
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def initialize(self, version: str = "2025-11-25") -> Dict[str, Any]:
        r = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "htam-test", "version": "1"}})
        self.notify("notifications/initialized")
        return r

    def call(self, tool: str, args: Any, timeout_s: float = 60.0) -> Dict[str, Any]:
        return self.request("tools/call", {"name": tool, "arguments": args}, timeout_s)

    def close(self) -> int:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code


class HttpMcp:
    """htam-mcp --transport http on a free loopback port."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen(mcp_command() + ["--transport", "http", "--http-port", "0"]
                                     + list(args), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        self.url = ""
        buf = b""
        while time.monotonic() < deadline and not self.url:
            ready, _, _ = select.select([self.proc.stderr], [], [], 1.0)
            if ready:
                chunk = os.read(self.proc.stderr.fileno(), 4096)
                if not chunk:
                    break
                buf += chunk
                m = re.search(rb"at (http://\S+) for htamd", buf)
                if m:
                    self.url = m.group(1).decode()
        if not self.url:
            self.proc.kill()
            raise RuntimeError("htam-mcp (http) did not start: " + buf.decode(errors="replace"))
        m = re.match(r"http://([^/]+):(\d+)(/.*)", self.url)
        self.host, self.port, self.path = m.group(1), int(m.group(2)), m.group(3)

    def post(self, body: Any, headers: Optional[Dict[str, str]] = None, raw: bool = False,
             method: str = "POST") -> Tuple[int, Dict[str, str], Any]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        data = body if raw else json.dumps(body).encode()
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        h.update(headers or {})
        conn.request(method, self.path, body=data, headers=h)
        r = conn.getresponse()
        text = r.read().decode()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        conn.close()
        if hdrs.get("content-type", "").startswith("application/json") and text:
            return r.status, hdrs, json.loads(text)
        return r.status, hdrs, text

    def stop(self) -> int:
        self.proc.terminate()
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc.stderr.close()
        return code


def meta(version: str = "2026-07-28") -> Dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "htam-test", "version": "1"}}


def node_bin() -> str:
    return shutil.which("node") or ""


def node_module(path: str) -> str:
    return os.path.join(NODE_DIR, "node_modules", path)


def tmpdir(prefix: str) -> str:
    return tempfile.mkdtemp(prefix=prefix)


def run_node(args: List[str], timeout_s: float = 900, env: Optional[Dict[str, str]] = None
             ) -> subprocess.CompletedProcess:
    return subprocess.run([node_bin()] + args, cwd=NODE_DIR, capture_output=True, text=True,
                          timeout=timeout_s, env={**os.environ, **(env or {})})


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
