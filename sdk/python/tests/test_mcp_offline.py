"""htam-mcp's pieces without a daemon or a socket: argument checks, the options table, and the
protocol layer's answers to handshakes, revisions and mistakes (the process-level tests with real
clients are in tests/mcp)."""

import unittest

from htam_mcp import config
from htam_mcp.htamd import Htamd
from htam_mcp.protocol import McpServer, Session
from htam_mcp.schema import validate

DEAD = ["--endpoint", "ipc:///nonexistent/htam-mcp-unit.sock", "--timeout-s", "0.2",
        "--retries", "0"]


class SchemaTest(unittest.TestCase):
    SCHEMA = {"type": "object", "additionalProperties": False, "required": ["id"],
              "properties": {"id": {"type": "integer", "minimum": 1},
                             "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                             "mode": {"enum": ["a", "b"]},
                             "src": {"type": "string", "maxLength": 4}}}

    def test_conforming_values_pass(self):
        self.assertEqual(validate({"id": 3, "tags": ["x"], "mode": "a", "src": "abcd"},
                                  self.SCHEMA), [])
        self.assertEqual(validate({"id": 3.0}, self.SCHEMA), [])  # JSON has one number type

    def test_each_problem_names_its_field(self):
        cases = [({}, "missing required 'id'"), ({"id": True}, "arguments.id: expected integer"),
                 ({"id": 0}, "arguments.id: must be >= 1"),
                 ({"id": 1, "tags": ["x", 2]}, "arguments.tags[1]: expected string"),
                 ({"id": 1, "tags": ["a", "b", "c"]}, "more than 2 items"),
                 ({"id": 1, "mode": "c"}, "must be one of"),
                 ({"id": 1, "src": "12345"}, "longer than 4"),
                 ({"id": 1, "extra": 1}, "unknown argument 'extra'"), ([], "expected object")]
        for value, needle in cases:
            with self.subTest(value=value):
                problems = validate(value, self.SCHEMA)
                self.assertTrue(any(needle in p for p in problems), problems)


class ConfigTest(unittest.TestCase):
    def test_defaults_environment_then_command_line(self):
        cfg, _ = config.load([], environ={})
        self.assertEqual(cfg.endpoint, "tcp://127.0.0.1:7878")
        self.assertEqual(cfg.http_host, "127.0.0.1")
        cfg, _ = config.load([], environ={"HTAM_MCP_TIMEOUT_S": "2.5"})
        self.assertEqual(cfg.timeout_s, 2.5)
        cfg, _ = config.load(["--timeout-s", "4"], environ={"HTAM_MCP_TIMEOUT_S": "2.5"})
        self.assertEqual(cfg.timeout_s, 4.0)

    def test_bad_values_are_refused(self):
        for argv, env in [(["--transport", "carrier-pigeon"], {}), (["--workers", "0"], {}),
                          (["--http-path", "mcp"], {}), ([], {"HTAM_MCP_HTTP_PORT": "eighty"})]:
            with self.subTest(argv=argv, env=env), self.assertRaises(ValueError):
                config.load(argv, environ=env)


class ProtocolTest(unittest.TestCase):
    def setUp(self):
        cfg, _ = config.load(DEAD, environ={})
        self.htamd = Htamd(cfg)
        self.server = McpServer(self.htamd)
        self.session = Session()

    def tearDown(self):
        self.htamd.close()

    def rpc(self, method, params=None, rid=1):
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        return self.server.handle(msg, self.session)

    def test_handshake_negotiates_the_clients_revision(self):
        for asked, got in [("2025-03-26", "2025-03-26"), ("2025-06-18", "2025-06-18"),
                           ("2025-11-25", "2025-11-25"), ("2024-01-01", "2025-11-25")]:
            self.session = Session()
            reply, status = self.rpc("initialize", {"protocolVersion": asked, "capabilities": {}})
            self.assertEqual((reply["result"]["protocolVersion"], status), (got, 200))
        reply, _ = self.rpc("tools/list")
        self.assertEqual(len(reply["result"]["tools"]), 10)
        # A handshake client that also names its revision in _meta is served in it.
        reply, _ = self.rpc("tools/list", {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2025-11-25"}})
        self.assertNotIn("resultType", reply["result"])

    def test_stateless_revision(self):
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}
        reply, status = self.rpc("prompts/list", {"_meta": meta})
        self.assertEqual(status, 200)
        self.assertEqual(reply["result"]["resultType"], "complete")
        self.assertEqual(reply["result"]["cacheScope"], "private")
        reply, status = self.rpc("ping", {"_meta": meta})
        self.assertEqual((reply["error"]["code"], status), (-32601, 404))
        bad = dict(meta, **{"io.modelcontextprotocol/protocolVersion": "9999-01-01"})
        reply, status = self.rpc("tools/list", {"_meta": bad})
        self.assertEqual((reply["error"]["code"], status), (-32022, 400))
        self.assertEqual(reply["error"]["data"]["requested"], "9999-01-01")

    def test_mistakes_are_answered(self):
        self.rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
        reply, _ = self.server.handle("nonsense", self.session)
        self.assertEqual(reply["error"]["code"], -32600)
        reply, _ = self.rpc("tools/call", {"name": "nope"})
        self.assertEqual(reply["error"]["code"], -32602)
        reply, _ = self.rpc("tools/call", {"name": "next_step", "arguments": {"session_id": "x"}})
        self.assertTrue(reply["result"]["isError"])
        reply, _ = self.rpc("tools/call", {"name": "memory_status", "arguments": {}})
        self.assertTrue(reply["result"]["isError"])
        self.assertIn("not reachable", reply["result"]["content"][0]["text"])
        self.assertIsNone(self.server.handle({"jsonrpc": "2.0", "method": "notifications/x"},
                                             self.session)[0])


if __name__ == "__main__":
    unittest.main()
