"""htam-mcp under bad input, over real pipes and sockets: malformed JSON-RPC, unknown methods and
tools, wrong argument types, huge sources and messages, unsupported protocol versions, HTTP
guards (Origin, bearer token, sessions), and a dead or restarted htamd. After each mistake the
server must still serve the next request.

Run by ctest (mcp_bad_input_test) with /usr/bin/python3; needs the build's SDK (PYTHONPATH) and,
for the restart case, htamd (HTAM_HTAMD).
"""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import htam
from harness import (ROOT, TASKS, HttpMcp, StdioMcp, find_htamd, mcp_command, meta, start_htamd,
                     tmpdir)

DEAD = "ipc:///nonexistent/htam-mcp-test/htamd.sock"
FAST_FAIL = ["--endpoint", DEAD, "--timeout-s", "0.5", "--retries", "0"]


class ShippedFilesTest(unittest.TestCase):
    """htam-mcp run as a module finds the task suite and the kernel ABI header where the build
    (or an install) keeps them, with no option given; where there are none it says so."""

    def describe(self, command, env):
        p = subprocess.Popen(command + ["--endpoint", DEAD, "--timeout-s", "0.5"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env={**os.environ, **env})
        msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "t", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "describe_task", "arguments": {"task": "cpu_relu"}}}]
        out, err = p.communicate("".join(json.dumps(m) + "\n" for m in msgs).encode(),
                                 timeout=60)
        replies = {r["id"]: r for r in map(json.loads, out.decode().splitlines())}
        return replies[2]["result"], err.decode()

    def test_module_finds_what_the_build_ships(self):
        build_python = [d for d in os.environ.get("PYTHONPATH", "").split(":")
                        if os.path.isdir(os.path.join(d, "htam_mcp"))]
        self.assertTrue(build_python, "PYTHONPATH names no folder with htam_mcp")
        result, err = self.describe(["/usr/bin/python3", "-m", "htam_mcp"], {})
        self.assertNotIn("warning", err)
        self.assertFalse(result["isError"], result)
        out = result["structuredContent"]
        self.assertIn("htam_kernel", out["kernel_abi"])
        self.assertIn("htam_kernel", out["reference_source"])

    def test_module_without_shipped_files_says_what_is_missing(self):
        tmp = tmpdir("htam-mcp-bare-")
        try:
            # The package alone, in a folder with no share/htam above it.
            pkg = os.path.join(tmp, "a", "b", "c", "d")
            os.makedirs(pkg)
            shutil.copytree(os.path.join(ROOT, "sdk", "python", "htam_mcp"),
                            os.path.join(pkg, "htam_mcp"))
            env = {"PYTHONPATH": pkg + ":" + os.environ.get("PYTHONPATH", "")}
            result, err = self.describe(["/usr/bin/python3", "-m", "htam_mcp"], env)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.assertIn("warning: no task suite at", err)
        self.assertIn("(set --tasks-dir)", err)
        self.assertIn("warning: no kernel ABI header at", err)
        # Without a suite and without htamd, the task is unknown, and the error says where it
        # looked.
        self.assertTrue(result["isError"], result)
        self.assertIn("not reachable", result["content"][0]["text"])


class StdioBadInputTest(unittest.TestCase):
    def setUp(self):
        self.mcp = StdioMcp(*FAST_FAIL, "--max-source-bytes", "1000",
                            "--max-message-bytes", "20000")

    def tearDown(self):
        self.assertEqual(self.mcp.close(), 0)

    def assert_serving(self):
        self.assertEqual(self.mcp.request("ping"), {"jsonrpc": "2.0", "id": self.mcp.next_id - 1,
                                                     "result": {}})

    def test_malformed_messages_get_jsonrpc_errors(self):
        self.mcp.initialize()
        cases = [(b"{not json\n", -32700), (b"42\n", -32600), (b"[]\n", -32600),
                 (b'{"jsonrpc":"2.0","id":1}\n', -32600),
                 (b'{"jsonrpc":"1.0","id":2,"method":"ping"}\n', -32600),
                 (b'{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}\n', -32600),
                 (b'{"jsonrpc":"2.0","id":3,"method":"tools/list","params":[1]}\n', -32602)]
        for raw, code in cases:
            with self.subTest(raw=raw):
                self.mcp.send_raw(raw)
                reply = self.mcp.read()
                self.assertEqual(reply["error"]["code"], code, reply)
                self.assertTrue(reply["error"]["message"])
                self.assert_serving()

    def test_unknown_method_and_unknown_tool(self):
        self.mcp.initialize()
        r = self.mcp.request("tools/frobnicate")
        self.assertEqual(r["error"]["code"], -32601)
        r = self.mcp.call("no_such_tool", {})
        self.assertEqual(r["error"]["code"], -32602)
        self.assertIn("no_such_tool", r["error"]["message"])
        self.assertIn("submit_candidate", r["error"]["message"])  # says which tools exist
        self.assert_serving()

    def test_wrong_argument_types_are_tool_errors_naming_the_field(self):
        self.mcp.initialize()
        cases = [("next_step", {"session_id": "one"}, "session_id"),
                 ("next_step", {}, "missing required 'session_id'"),
                 ("next_step", {"session_id": -4}, "session_id"),
                 ("next_step", {"session_id": 3, "full": "yes"}, "full"),
                 ("open_session", {"task": "cpu_relu", "budget": 2.5}, "budget"),
                 ("submit_candidate", {"session_id": 1, "source": 7}, "source"),
                 ("submit_candidate", {"session_id": 1, "source": "x", "strategy_ids": ["a"]},
                  "strategy_ids[0]"),
                 ("record_outcome", {"session_id": 1, "status": "Great"}, "status"),
                 ("list_tasks", {"colour": "blue"}, "unknown argument 'colour'"),
                 ("describe_task", [1, 2], "arguments must be an object"),
                 ("describe_task", {"task": "../../etc"}, "bad task name")]
        for tool, args, needle in cases:
            with self.subTest(tool=tool, args=args):
                r = self.mcp.call(tool, args)
                self.assertTrue(r["result"]["isError"], r)
                self.assertIn(needle, r["result"]["content"][0]["text"])
        self.assert_serving()

    def test_huge_source_and_huge_message(self):
        self.mcp.initialize()
        r = self.mcp.call("submit_candidate", {"session_id": 1, "source": "x" * 1001})
        self.assertTrue(r["result"]["isError"])
        self.assertIn("1000", r["result"]["content"][0]["text"])
        # A line over max_message_bytes is refused without being parsed, and skipped whole;
        # the error carries the request's id (a client waits for that id), wherever the id
        # stands in the message: first, or last as the TypeScript SDK writes it.
        big = json.dumps("y\\\"{[" * 10000)
        for raw, rid in [('{"jsonrpc":"2.0","id":9,"method":"ping","x":' + big + '}', 9),
                         ('{"method":"tools/call","params":{"name":"submit_candidate",'
                          '"arguments":{"id":5,"source":' + big + '}},"jsonrpc":"2.0",'
                          '"id":"req-10"}', "req-10"),
                         ('{"method":"ping","params":{"source":' + big + ',"id":4}}', None)]:
            with self.subTest(id=rid):
                self.mcp.send_raw(raw.encode() + b"\n")
                reply = self.mcp.read()
                self.assertEqual(reply["error"]["code"], -32600)
                self.assertIn("max_message_bytes", reply["error"]["message"])
                self.assertIs(type(reply["id"]), type(rid))
                self.assertEqual(reply["id"], rid)
                self.assert_serving()

    def test_dead_htamd_is_a_tool_error_and_the_server_goes_on(self):
        self.mcp.initialize()
        for tool, args in [("memory_status", {}), ("open_session", {"task": "cpu_relu"}),
                           ("next_step", {"session_id": 3})]:
            r = self.mcp.call(tool, args)
            self.assertTrue(r["result"]["isError"])
            self.assertIn("htamd is not reachable at " + DEAD, r["result"]["content"][0]["text"])
        # What needs no htamd still works: the suite's tasks and the ABI.
        r = self.mcp.call("list_tasks", {"backend": "cpu"})
        self.assertFalse(r["result"]["isError"], r)
        out = r["result"]["structuredContent"]
        self.assertIn("cpu_relu", [t["name"] for t in out["tasks"]])
        self.assertIn("not reachable", out["note"])
        r = self.mcp.call("describe_task", {"task": "cpu_relu"})
        self.assertFalse(r["result"]["isError"], r)
        self.assertIn("htam_kernel", r["result"]["structuredContent"]["reference_source"])
        r = self.mcp.call("describe_task", {"task": "no_such_task"})
        self.assertTrue(r["result"]["isError"])
        r = self.mcp.request("resources/read", {"uri": "htam://abi/kernel_abi.h"})
        self.assertIn("htam_kernel", r["result"]["contents"][0]["text"])
        r = self.mcp.request("resources/read", {"uri": "htam://tasks/cpu_relu/spec"})
        spec = json.loads(r["result"]["contents"][0]["text"])
        self.assertEqual(spec["name"], "cpu_relu")
        self.assertNotIn("held_out", spec["shapes"])  # the gate's hidden shapes stay hidden
        r = self.mcp.request("resources/read", {"uri": "htam://nothing/here"})
        self.assertEqual(r["error"]["code"], -32002)
        # A task not in the suite may be in htamd's memory: unknown while htamd is down.
        r = self.mcp.request("resources/read", {"uri": "htam://tasks/no_such_task/spec"})
        self.assertEqual(r["error"]["code"], -32603)
        self.assertIn("not reachable", r["error"]["message"])
        self.assert_serving()

    def test_dead_htamd_fails_at_once_and_a_silent_one_after_the_stated_time(self):
        self.mcp.initialize()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # closed again: connection refused
        mcp = StdioMcp("--endpoint", f"tcp://127.0.0.1:{port}")  # the default 15 s timeout
        try:
            mcp.initialize()
            for tool, args in [("memory_status", {}), ("next_step", {"session_id": 3})]:
                start = time.monotonic()
                r = mcp.call(tool, args)
                self.assertLess(time.monotonic() - start, 3.0)
                self.assertTrue(r["result"]["isError"])
                self.assertIn(f"tcp://127.0.0.1:{port}: connection refused",
                              r["result"]["content"][0]["text"])
        finally:
            self.assertEqual(mcp.close(), 0)
        # Something listens but never answers (a socket that accepts and stays silent): the
        # tool fails after the time its message states, which counts every attempt.
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(8)
            mcp = StdioMcp("--endpoint", f"tcp://127.0.0.1:{silent.getsockname()[1]}",
                           "--timeout-s", "1", "--retries", "1")
            try:
                mcp.initialize()
                start = time.monotonic()
                r = mcp.call("memory_status", {})
                waited = time.monotonic() - start
            finally:
                self.assertEqual(mcp.close(), 0)
        text = r["result"]["content"][0]["text"]
        self.assertTrue(r["result"]["isError"])
        m = re.search(r"within ([0-9.]+) s \(2 attempts of 1.0 s\)", text)
        self.assertTrue(m, text)
        self.assertAlmostEqual(waited, float(m.group(1)), delta=1.0)

    def test_version_negotiation(self):
        for asked, got in [("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"),
                           ("2025-03-26", "2025-03-26"), ("1999-01-01", "2025-11-25")]:
            with self.subTest(asked=asked):
                mcp = StdioMcp(*FAST_FAIL)
                try:
                    r = mcp.initialize(asked)
                    self.assertEqual(r["result"]["protocolVersion"], got)
                    self.assertIn("tools", r["result"]["capabilities"])
                    self.assertEqual(r["result"]["serverInfo"]["name"], "htam-mcp")
                finally:
                    self.assertEqual(mcp.close(), 0)

    def test_stateless_revision_without_handshake(self):
        r = self.mcp.request("server/discover", {"_meta": meta()})
        self.assertIn("2026-07-28", r["result"]["supportedVersions"])
        self.assertIn("2025-11-25", r["result"]["supportedVersions"])
        self.assertEqual(r["result"]["resultType"], "complete")
        r = self.mcp.request("tools/list", {"_meta": meta()})
        self.assertEqual(len(r["result"]["tools"]), 10)
        r = self.mcp.request("tools/list", {"_meta": meta("2030-01-01")})
        self.assertEqual(r["error"]["code"], -32022)
        self.assertEqual(r["error"]["data"], {"supported": ["2026-07-28"],
                                              "requested": "2030-01-01"})
        # Neither a handshake nor _meta: the server says what it needs.
        r = self.mcp.request("tools/list")
        self.assertEqual(r["error"]["code"], -32602)
        self.assertIn("initialize", r["error"]["message"])
        m = meta()
        del m["io.modelcontextprotocol/clientCapabilities"]
        r = self.mcp.request("tools/list", {"_meta": m})
        self.assertEqual(r["error"]["code"], -32602)
        # logging/setLevel is not part of 2026-07-28.
        r = self.mcp.request("logging/setLevel", {"level": "info", "_meta": meta()})
        self.assertEqual(r["error"]["code"], -32601)
        self.assert_serving()

    def test_batch_and_prompt_mistakes(self):
        self.mcp.initialize("2025-03-26")
        self.mcp.send_raw(json.dumps([{"jsonrpc": "2.0", "id": "a", "method": "ping"},
                                      {"jsonrpc": "2.0", "id": "b", "method": "nope"}]).encode()
                          + b"\n")
        replies = self.mcp.read()
        self.assertEqual([r["id"] for r in replies], ["a", "b"])
        self.assertEqual(replies[1]["error"]["code"], -32601)
        r = self.mcp.request("prompts/get", {"name": "optimize_task", "arguments": {}})
        self.assertEqual(r["error"]["code"], -32602)
        r = self.mcp.request("prompts/get", {"name": "nope"})
        self.assertEqual(r["error"]["code"], -32602)
        r = self.mcp.request("logging/setLevel", {"level": "loud"})
        self.assertEqual(r["error"]["code"], -32602)
        self.assert_serving()


class HttpBadInputTest(unittest.TestCase):
    TOKEN = "s3cret-token-for-tests"

    @classmethod
    def setUpClass(cls):
        cls.mcp = HttpMcp(*FAST_FAIL, "--token", cls.TOKEN, "--max-message-bytes", "20000",
                          "--allowed-origins", "https://agents.example.org")

    @classmethod
    def tearDownClass(cls):
        cls.mcp.stop()

    def post(self, body, headers=None, **kw):
        h = {"Authorization": f"Bearer {self.TOKEN}"}
        h.update(headers or {})
        return self.mcp.post(body, h, **kw)

    def session(self, version="2025-11-25"):
        status, hdrs, body = self.post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                        "params": {"protocolVersion": version, "capabilities": {},
                                                   "clientInfo": {"name": "t", "version": "1"}}})
        self.assertEqual(status, 200, body)
        sid = hdrs["mcp-session-id"]
        status, _, _ = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"},
                                 {"Mcp-Session-Id": sid})
        self.assertEqual(status, 202)
        return sid

    def test_bearer_token_and_origin(self):
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        self.assertEqual(self.mcp.post(ping)[0], 401)
        status, hdrs, _ = self.mcp.post(ping, {"Authorization": "Bearer wrong"})
        self.assertEqual(status, 401)
        self.assertIn("Bearer", hdrs["www-authenticate"])
        self.assertEqual(self.post(ping, {"Origin": "https://evil.example.com"})[0], 403)
        self.assertEqual(self.post(ping, {"Origin": "http://localhost:6274"})[0], 200)
        self.assertEqual(self.post(ping, {"Origin": "https://agents.example.org"})[0], 200)
        self.assertEqual(self.post(ping)[0], 200)

    def test_sessions(self):
        sid = self.session()
        status, _, body = self.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                    {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
        self.assertEqual(status, 200)
        self.assertEqual(len(body["result"]["tools"]), 10)
        # A JSON-RPC mistake inside a session comes back as a JSON-RPC error.
        status, _, body = self.post({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                     "params": {"name": "nope"}}, {"Mcp-Session-Id": sid})
        self.assertEqual((status, body["error"]["code"]), (200, -32602))
        status, _, body = self.post({"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
                                    {"Mcp-Session-Id": "forged"})
        self.assertEqual(status, 404)
        self.assertEqual(self.post(b"", {"Mcp-Session-Id": sid}, raw=True, method="DELETE")[0], 200)
        self.assertEqual(self.post({"jsonrpc": "2.0", "id": 5, "method": "ping"},
                                   {"Mcp-Session-Id": sid})[0], 404)
        self.assertEqual(self.post(b"", raw=True, method="GET")[0], 405)

    def test_malformed_and_oversized_bodies(self):
        status, _, body = self.post(b"{nope", raw=True)
        self.assertEqual((status, body["error"]["code"]), (400, -32700))
        status, _, body = self.post(b"x" * 30000, raw=True)
        self.assertEqual(status, 413)
        status, _, body = self.post({"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                    {"MCP-Protocol-Version": "1999-01-01"})
        self.assertEqual(status, 400)
        status, _, body = self.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        self.assertEqual((status, body["error"]["code"]), (400, -32602))
        self.assertEqual(self.post({"jsonrpc": "2.0", "id": 1, "method": "ping"})[0], 200)

    def test_stateless_requests_and_routing_headers(self):
        req = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "memory_status", "arguments": {}, "_meta": meta()}}
        good = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                "Mcp-Name": "memory_status"}
        status, hdrs, body = self.post(req, good)
        self.assertEqual(status, 200)
        self.assertNotIn("mcp-session-id", hdrs)
        # htamd is dead here: a tool error, still a complete result.
        self.assertTrue(body["result"]["isError"])
        self.assertEqual(body["result"]["resultType"], "complete")
        # Whitespace around a header value is not part of it (RFC 9110).
        self.assertEqual(self.post(req, {**good, "Mcp-Name": "  memory_status "})[0], 200)
        for k, v in [("Mcp-Method", "tools/list"), ("Mcp-Name", "list_tasks"),
                     ("MCP-Protocol-Version", "2025-11-25"), ("Mcp-Method", None),
                     ("Mcp-Name", None)]:
            headers = {**good, k: v}
            if v is None:
                del headers[k]  # required in 2026-07-28
            status, _, body = self.post(req, headers)
            self.assertEqual((status, body["error"]["code"], body["id"]), (400, -32020, 7),
                             (k, body))
        status, _, body = self.post({**req, "params": {**req["params"],
                                                       "_meta": meta("2031-01-01")}})
        self.assertEqual((status, body["error"]["code"]), (400, -32022))
        status, _, body = self.post({"jsonrpc": "2.0", "id": 8, "method": "what/ever",
                                     "params": {"_meta": meta()}}, {"Mcp-Method": "what/ever"})
        self.assertEqual((status, body["error"]["code"]), (404, -32601))

    def test_non_loopback_needs_a_token(self):
        p = subprocess.run(mcp_command() + ["--transport", "http", "--http-host", "0.0.0.0",
                                            "--http-port", "0"] + FAST_FAIL,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("token", p.stderr)


class HtamdRestartTest(unittest.TestCase):
    """htamd goes away and comes back while htam-mcp keeps running."""

    def setUp(self):
        self.dir = tmpdir("htam-mcp-restart-")
        self.htamd = start_htamd(self.dir)
        self.mcp = StdioMcp("--endpoint", self.htamd.endpoint, "--timeout-s", "2", "--retries",
                            "0")

    def tearDown(self):
        self.mcp.close()
        self.htamd.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_tool_error_while_down_then_served_again(self):
        self.mcp.initialize()
        r = self.mcp.call("open_session", {"task": "cpu_relu", "backend": "cpu"})
        self.assertFalse(r["result"]["isError"], r)
        sid = r["result"]["structuredContent"]["session_id"]
        self.htamd.stop()
        start = time.monotonic()
        r = self.mcp.call("next_step", {"session_id": sid})
        self.assertLess(time.monotonic() - start, 2.0)  # at once, not after --timeout-s
        self.assertTrue(r["result"]["isError"])
        self.assertRegex(r["result"]["content"][0]["text"],
                         "htamd is not reachable at .*(connection refused|no socket file)")
        self.htamd.start()
        r = self.mcp.call("next_step", {"session_id": sid})
        self.assertFalse(r["result"]["isError"], r)
        self.assertTrue(r["result"]["structuredContent"]["direction"]["name"])
        r = self.mcp.call("submit_candidate", {"session_id": 999999, "source": "int x;"})
        self.assertTrue(r["result"]["isError"])
        self.assertIn("NotFound", r["result"]["content"][0]["text"])

    def test_next_step_is_compact_by_default_and_full_on_request(self):
        self.mcp.initialize()
        r = self.mcp.call("open_session", {"task": "cpu_relu", "backend": "cpu"})
        sid = r["result"]["structuredContent"]["session_id"]
        compact = self.mcp.call("next_step", {"session_id": sid})["result"]
        full = self.mcp.call("next_step", {"session_id": sid, "full": True})["result"]
        self.assertFalse(compact["isError"], compact)
        self.assertFalse(full["isError"], full)
        c, f = compact["structuredContent"], full["structuredContent"]
        self.assertLess(len(c["strategies"]), len(f["strategies"]))
        self.assertEqual([s["id"] for s in c["strategies"]],
                         [s["id"] for s in f["strategies"][:len(c["strategies"])]])
        self.assertTrue(all(s["description"] for s in f["strategies"]))
        # The compact prompt names the detailed head and leaves the text to the list.
        for s in c["strategies"]:
            if s["description"]:
                self.assertIn(s["name"], c["prompt_context"])
                self.assertNotIn(s["description"], c["prompt_context"])
        self.assertIn(f["strategies"][0]["description"], f["prompt_context"])
        self.assertLess(len(compact["content"][0]["text"]), len(full["content"][0]["text"]))


class HtamdCurveTest(unittest.TestCase):
    """htamd with CURVE: htam-mcp reaches it with an authorized key pair, and a refused key is a
    tool error, not a hang."""

    def setUp(self):
        keygen = os.environ.get("HTAM_KEYGEN", "")
        if not keygen or not os.access(keygen, os.X_OK):
            self.fail("htam-keygen not built (ctest sets HTAM_KEYGEN)")
        self.dir = tmpdir("htam-mcp-curve-")
        os.chmod(self.dir, 0o755)
        self.keys = os.path.join(self.dir, "keys")
        subprocess.run([keygen, self.keys, "server", "alice", "mallory"], check=True,
                       stdout=subprocess.DEVNULL)
        alice = htam.read_key_file(os.path.join(self.keys, "alice.pub"))["public"]
        with open(os.path.join(self.keys, "authorized_keys"), "w") as f:
            f.write(f"{alice} alice\n")
        data = os.path.join(self.dir, "data")
        os.makedirs(data)
        self.endpoint = f"ipc://{data}/htamd.sock"
        self.log = open(os.path.join(self.dir, "htamd.log"), "wb")
        self.htamd = subprocess.Popen(
            [find_htamd(), "--general.data_dir", data, "--server.bind", self.endpoint,
             "--server.tasks_dir", TASKS, "--server.curve", "true",
             "--server.curve_secret_key_file", os.path.join(self.keys, "server.key"),
             "--server.curve_authorized_keys", os.path.join(self.keys, "authorized_keys")],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            try:
                htam.Client(self.endpoint, timeout_s=0.5, retries=0,
                            server_public_key_file=os.path.join(self.keys, "server.pub"),
                            client_key_file=os.path.join(self.keys, "alice.key")).close()
                break
            except htam.HtamTimeout:
                self.assertIsNone(self.htamd.poll(), "htamd exited")
        else:
            self.fail("htamd with CURVE did not answer")

    def tearDown(self):
        self.htamd.terminate()
        self.htamd.wait(timeout=60)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def mcp(self, key):
        return StdioMcp("--endpoint", self.endpoint, "--timeout-s", "1", "--retries", "0",
                        "--server-key", os.path.join(self.keys, "server.pub"),
                        "--client-key", os.path.join(self.keys, key))

    def test_authorized_key_is_served_and_a_refused_one_is_a_tool_error(self):
        good = self.mcp("alice.key")
        try:
            good.initialize()
            r = good.call("memory_status", {})
            self.assertFalse(r["result"]["isError"], r)
            self.assertEqual(r["result"]["structuredContent"]["sections"]["server"]["curve"], "on")
        finally:
            self.assertEqual(good.close(), 0)
        bad = self.mcp("mallory.key")
        try:
            bad.initialize()
            r = bad.call("memory_status", {})
            self.assertTrue(r["result"]["isError"])
            self.assertIn("CURVE key", r["result"]["content"][0]["text"])
            self.assertEqual(bad.request("ping")["result"], {})
        finally:
            self.assertEqual(bad.close(), 0)


if __name__ == "__main__":
    unittest.main()
