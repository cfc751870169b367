"""The model proposer against a local OpenAI-compatible endpoint (http.server on 127.0.0.1).

The fake endpoint speaks the chat-completions protocol and records every request, so the tests
check what a model server would see (the prompt) and what the agent makes of the replies.
"""

import json
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from htam_agent.llm import ChatClient, LLMConfig, LLMError, estimate_tokens
from htam_agent.model import (DirectionScoreView, OutcomeView, SessionView, StepView,
                              StrategyView)
from htam_agent.prompt import HistoryItem, extract_code
from htam_agent.proposers import AgentContext, LLMProposer

BEST = "#include <htam/kernel_abi.h>\n// current best: scalar relu\nHTAM_KERNEL_ENTRY int htam_kernel(){return 0;}\n"
FULL = ("#include <htam/kernel_abi.h>\n__global__ void k(const float4* x, float4* y) {}\n"
        "HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out,"
        " int nout, htam_stream s) { return 0; }")


def reply(text, usage=True):
    body = {"id": "x", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}]}
    if usage:
        body["usage"] = {"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290}
    return (200, json.dumps(body).encode(), {})


GOOD = ("SUMMARY: float4 loads and stores with a scalar tail\n"
        "STRATEGIES: vectorized-16-byte-access\n"
        "A fragment first:\n```cuda\nfloat4 v = x4[i];\n```\nThe full file:\n```cuda\n" + FULL
        + "\n```\n")


class FakeEndpoint:
    """Chat-completions server with a script of answers; 'reset' closes the connection."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n).decode())
                outer.requests.append({"path": self.path, "headers": dict(self.headers),
                                       "body": body})
                action = outer.script.pop(0) if outer.script else reply(GOOD)
                if action == "reset":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                code, payload, headers = action
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def prompt(self, i=-1):
        return "\n".join(m["content"] for m in self.requests[i]["body"]["messages"])


def make_step():
    strategies = [
        StrategyView(id=11, name="vectorized-16-byte-access", title="16-byte vector loads",
                     description="load and store float4 instead of float",
                     preconditions=["a contiguous axis", "16-byte alignment provable"],
                     failure_modes=["tails forgotten when N % 4 != 0"],
                     success_rate=0.8, mean_gain=0.35, uses=5,
                     example_source="// example: float4 body + scalar tail"),
        StrategyView(id=12, name="read-only-cache-loads", title="__ldg loads", uses=2)]
    scores = [DirectionScoreView(id=1, name="global-memory-access", score=0.9),
              DirectionScoreView(id=7, name="latency-hiding", score=0.4)]
    return StepView(session_id=5, step=0, direction_id=1, direction="global-memory-access",
                    direction_title="Global-memory access",
                    direction_description="coalesced, vectorized global loads and stores",
                    strategies=strategies, scores=scores,
                    why="memory-bound state; 9 similar transitions gained +0.31 on average",
                    prompt_context="relu-like tasks gained most from vector access")


def make_ctx(history=None):
    session = SessionView(session_id=5, task="relu", backend="cuda", arch="sm_90",
                          description="y = max(x, 0) over a float32 vector")
    return AgentContext(session=session, best_source=BEST, best_speedup=1.25,
                        history=history or [], spec_text='{"name": "relu"}', budget_left=6)


class AgentLLMTest(unittest.TestCase):
    def setUp(self):
        self.sleeps = []

    def client(self, ep, **kw):
        cfg = LLMConfig(base_url=ep.url, model="fake-coder", api_key="sk-test", backoff_s=0.01,
                        max_retries=kw.pop("max_retries", 4), timeout_s=5, **kw)
        return ChatClient(cfg, sleep=self.sleeps.append)

    def test_prompt_carries_step_and_code_is_extracted(self):
        ep = FakeEndpoint([reply(GOOD)])
        self.addCleanup(ep.close)
        p = LLMProposer(self.client(ep)).propose(make_ctx(), make_step())
        self.assertEqual(len(ep.requests), 1)
        req = ep.requests[0]
        self.assertEqual(req["path"], "/v1/chat/completions")
        self.assertEqual(req["headers"].get("Authorization"), "Bearer sk-test")
        self.assertEqual(req["body"]["model"], "fake-coder")
        prompt = ep.prompt()
        for needle in ("global-memory-access", "vectorized-16-byte-access",
                       "read-only-cache-loads", "16-byte alignment provable",
                       "tails forgotten when N % 4 != 0", "success rate 80%",
                       "memory-bound state; 9 similar transitions", "current best: scalar relu",
                       "y = max(x, 0)", "relu-like tasks gained most", "1.25x"):
            self.assertIn(needle, prompt)
        # The full file, not the fragment without the entry point.
        self.assertEqual(p.source.strip(), FULL.strip())
        self.assertEqual(p.summary, "float4 loads and stores with a scalar tail")
        self.assertEqual(p.strategy_ids, [11])
        self.assertEqual(p.direction, "global-memory-access")
        self.assertEqual((p.tokens_in, p.tokens_out), (1234, 56))

    def test_compile_error_is_fed_back_and_repaired_under_its_direction(self):
        ep = FakeEndpoint([reply(GOOD), reply(GOOD)])
        self.addCleanup(ep.close)
        failed = HistoryItem(step=0, direction="latency-hiding", summary="double buffering",
                             outcome=OutcomeView(
                                 status="compile_error",
                                 diagnostics="kernel.cu(12): error: identifier \"flaot4\" is undefined"),
                             source="// the failed candidate with flaot4\n")
        proposer = LLMProposer(self.client(ep), max_repairs=1)
        p = proposer.propose(make_ctx([failed]), make_step())
        prompt = ep.prompt(0)
        self.assertIn("identifier \"flaot4\" is undefined", prompt)
        self.assertIn("the failed candidate with flaot4", prompt)
        self.assertIn("previous candidate failed (compile_error)", prompt)
        self.assertEqual(p.direction, "latency-hiding")  # the repair keeps the failed direction
        # A second failure in a row is not repaired again (max_repairs=1): a fresh attempt.
        p2 = proposer.propose(make_ctx([failed]), make_step())
        self.assertNotIn("previous candidate failed", ep.prompt(1))
        self.assertEqual(p2.direction, "global-memory-access")

    def test_wrong_result_is_fed_back(self):
        ep = FakeEndpoint([reply(GOOD)])
        self.addCleanup(ep.close)
        failed = HistoryItem(step=2, direction="global-memory-access", summary="no tail",
                             outcome=OutcomeView(status="incorrect",
                                                 diagnostics="shape N=999983: 3 elements outside "
                                                             "tolerance (max abs err 1.7)"),
                             source="// float4 body only\n")
        LLMProposer(self.client(ep)).propose(make_ctx([failed]), make_step())
        self.assertIn("3 elements outside tolerance", ep.prompt())
        self.assertIn("-> incorrect", ep.prompt())

    def test_transient_errors_are_retried_with_backoff(self):
        ep = FakeEndpoint([(429, b'{"error": "rate"}', {"Retry-After": "0.02"}),
                           (503, b'{"error": "overloaded"}', {}),
                           "reset",
                           (502, b"bad gateway", {}),
                           reply(GOOD)])
        self.addCleanup(ep.close)
        client = self.client(ep)
        p = LLMProposer(client).propose(make_ctx(), make_step())
        self.assertEqual(len(ep.requests), 5)
        self.assertIsNotNone(p.source)
        self.assertEqual(len(self.sleeps), 4)
        self.assertAlmostEqual(self.sleeps[0], 0.02)       # Retry-After honoured
        self.assertLess(self.sleeps[1], self.sleeps[3])    # exponential backoff
        self.assertEqual(client.requests, 1)

    def test_gives_up_after_retries_and_on_permanent_errors(self):
        ep = FakeEndpoint([(500, b"boom", {})] * 3)
        self.addCleanup(ep.close)
        with self.assertRaises(LLMError):
            self.client(ep, max_retries=2).complete([{"role": "user", "content": "x"}])
        self.assertEqual(len(ep.requests), 3)
        ep2 = FakeEndpoint([(401, b'{"error": "bad key"}', {})])
        self.addCleanup(ep2.close)
        p = LLMProposer(self.client(ep2)).propose(make_ctx(), make_step())
        self.assertIsNone(p.source)
        self.assertIn("401", p.note)
        self.assertEqual(len(ep2.requests), 1)  # no retry of a permanent error

    def test_reply_without_code_is_asked_again_and_tokens_estimated(self):
        ep = FakeEndpoint([reply("I would use float4 loads.", usage=False),
                           reply(GOOD, usage=False)])
        self.addCleanup(ep.close)
        p = LLMProposer(self.client(ep)).propose(make_ctx(), make_step())
        self.assertEqual(len(ep.requests), 2)
        self.assertIn("no fenced code block", ep.prompt(1))
        self.assertIsNotNone(p.source)
        self.assertGreater(p.tokens_in, 100)   # estimated from the prompt text
        self.assertEqual(p.tokens_out, estimate_tokens("I would use float4 loads.")
                         + estimate_tokens(GOOD))

    def test_extract_code_variants(self):
        self.assertIsNone(extract_code("no code here"))
        self.assertIsNone(extract_code("```cpp\nint main() {}\n```"))
        cut = "SUMMARY: x\n```cuda\n" + FULL + "\n// reply cut off here"
        self.assertIn("htam_kernel", extract_code(cut))
        two = "```cpp\nint htam_kernel_old;\n```\n```c++\nHTAM_KERNEL_ENTRY int htam_kernel();\n```"
        self.assertEqual(extract_code(two).strip(), "HTAM_KERNEL_ENTRY int htam_kernel();")


MODELNEW = ("import torch\nimport torch.nn as nn\nimport htam\n\n\nclass ModelNew(nn.Module):\n"
            "    def __init__(self, in_features, out_features):\n        super().__init__()\n"
            "        self.linear = nn.Linear(in_features, out_features)\n\n"
            "    def forward(self, x):\n        return torch.relu(self.linear(x))\n")
START = MODELNEW.replace("import htam\n", "# the problem, Model renamed\n")


def make_modelnew_ctx(policy=None):
    session = SessionView(session_id=6, task="kb_linear_relu", backend="cuda", arch="sm_90",
                          description="KernelBench problem: relu(linear(x))")
    return AgentContext(session=session, best_source=START, best_speedup=1.0, history=[],
                        spec_text='{"name": "kb_linear_relu"}', budget_left=3,
                        language="kernelbench", policy=policy)


class ModelNewPromptTest(unittest.TestCase):
    """--language kernelbench: the prompt asks for a ModelNew file, the reply's Python block is
    the candidate."""

    def client(self, ep):
        return ChatClient(LLMConfig(base_url=ep.url, model="fake", backoff_s=0.01, timeout_s=5))

    def test_prompt_asks_for_a_modelnew_file(self):
        ep = FakeEndpoint([reply("SUMMARY: fused relu\nSTRATEGIES: none\n```python\n"
                                 + MODELNEW + "```\n")])
        self.addCleanup(ep.close)
        p = LLMProposer(self.client(ep)).propose(
            make_modelnew_ctx({"torch_ops": "forbid", "require_kernel": True}), make_step())
        prompt = ep.prompt()
        for needle in ("class ModelNew(nn.Module)", "same arguments as the problem's "
                       "`Model.__init__`", "htam.load_cuda(NAME, CUDA_SOURCE, FUNCTIONS)",
                       "cudaStream_t", "is NOT passed", "load_inline", "Triton",
                       "no try/except that falls back", "no side streams",
                       "no caching of results", "# the problem, Model renamed",
                       "fenced block containing class ModelNew", "```python\n"):
            self.assertIn(needle, prompt)
        self.assertRegex(prompt, r"PyTorch compute operators in forward .*: forbidden")
        self.assertIn("must define at least one custom kernel", prompt)
        self.assertNotIn("htam_kernel", prompt)
        self.assertNotIn("kernel_abi.h", prompt)
        self.assertEqual(p.source, MODELNEW)
        self.assertEqual(p.summary, "fused relu")

    def test_default_policy_and_lean_prompt_unchanged(self):
        from htam_agent.prompt import build_messages
        msgs = build_messages(make_modelnew_ctx().session, make_step(), START, 1.0, [],
                              language="kernelbench")
        text = msgs[1]["content"]
        self.assertRegex(text, r"torch.nn.functional calls: allowed \(reported")
        self.assertRegex(text, r"PyTorch compute operators in forward .*: allowed \(reported")
        # The memory's examples are lean-ABI kernels: they keep their own fence.
        self.assertIn("verified example:\n```cuda\n// example: float4 body", text)
        self.assertNotIn("no CUDA device", text)
        cpu = make_modelnew_ctx().session
        cpu.backend = "cpu"
        on_cpu = build_messages(cpu, make_step(), START, 1.0, [], language="kernelbench")
        self.assertIn("On the cpu backend there is no CUDA device", on_cpu[1]["content"])
        lean = build_messages(make_ctx().session, make_step(), BEST, 1.0, [])[1]["content"]
        self.assertIn("htam_kernel", lean)
        self.assertNotIn("ModelNew", lean)

    def test_compact_tail_is_one_line_each(self):
        """Past the daemon's memory.detailed_strategies an entry has a name, a title and
        statistics: the prompt lists it on one line under its own heading, after the detailed
        head, and never with an evidence line or an example."""
        from htam_agent.prompt import build_messages
        step = make_step()
        step.strategies.append(StrategyView(id=13, name="shared-memory-tiling",
                                            title="Tile through shared memory", uses=9,
                                            success_rate=0.6, score=0.4))
        text = build_messages(make_ctx().session, step, BEST, 1.0, [])[1]["content"]
        head = "# Other strategies that worked in similar states (name: title)\n"
        self.assertIn(head + "- read-only-cache-loads: __ldg loads\n"
                      "- shared-memory-tiling: Tile through shared memory\n", text)
        self.assertEqual(text.count("shared-memory-tiling"), 1)
        self.assertEqual(text.count("evidence: used"), 1)  # the detailed one alone
        self.assertLess(text.index("1. vectorized-16-byte-access"), text.index(head))
        self.assertIn("verified example:", text)

    def test_extract_code_for_modelnew(self):
        self.assertIsNone(extract_code("```python\nx = 1\n```", "kernelbench"))
        # A lean-ABI block is not a ModelNew file, and a ModelNew block is not a lean kernel.
        self.assertIsNone(extract_code("```cuda\n" + FULL + "\n```", "kernelbench"))
        self.assertIsNone(extract_code("```python\n" + MODELNEW + "```"))
        frag = "```python\ny = ModelNew(3, 4)(x)\n```\n```py\n" + MODELNEW + "```\n"
        self.assertEqual(extract_code(frag, "kernelbench"), MODELNEW)
        cut = "SUMMARY: x\n```python\n" + MODELNEW + "    # reply cut off"
        self.assertIn("class ModelNew", extract_code(cut, "kernelbench"))

    def test_reply_without_a_modelnew_is_asked_again(self):
        ep = FakeEndpoint([reply("```python\nprint(1)\n```"),
                           reply("```python\n" + MODELNEW + "```")])
        self.addCleanup(ep.close)
        p = LLMProposer(self.client(ep)).propose(make_modelnew_ctx(), make_step())
        self.assertIn("no fenced code block defining class ModelNew", ep.prompt(1))
        self.assertEqual(p.source, MODELNEW)


if __name__ == "__main__":
    unittest.main()
