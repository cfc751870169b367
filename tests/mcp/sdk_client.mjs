// A whole htam session through the official MCP TypeScript SDK client (@modelcontextprotocol/sdk),
// a client we did not write: connect, list the tools, describe a CPU task, open a session,
// next_step, submit a correct and a wrong candidate (with progress), record an outcome, read the
// best source as a resource, the prompt, and two mistakes the server must answer cleanly.
// Prints one JSON object (the transcript) on stdout; tests/mcp/mcp_clients_test.py checks it.
//
//   node sdk_client.mjs stdio <command> [args...]
//   node sdk_client.mjs http <url> [bearer-token]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { readFileSync } from "node:fs";

const [mode, target, ...rest] = process.argv.slice(2);
const TASK = process.env.HTAM_MCP_TEST_TASK || "cpu_relu";
const CORRECT = readFileSync(new URL("./candidates/relu_select.cpp", import.meta.url), "utf8");
const WRONG = readFileSync(new URL("./candidates/relu_identity.cpp", import.meta.url), "utf8");
const EVAL_TIMEOUT_MS = 900000;

const transcript = { mode, calls: [] };
function note(call, args, result) {
  transcript.calls.push({ call, args, result });
  return result;
}

let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: target, args: rest, stderr: "inherit",
                                         env: { ...process.env } });
} else if (mode === "http") {
  const headers = rest[0] ? { Authorization: `Bearer ${rest[0]}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
} else {
  console.error("usage: sdk_client.mjs stdio CMD [ARGS...] | http URL [TOKEN]");
  process.exit(2);
}

const client = new Client({ name: "htam-mcp-test (official TS SDK)", version: "1.0.0" });
await client.connect(transport);
transcript.server = client.getServerVersion();
transcript.protocolVersion = transport.protocolVersion ?? null;
transcript.sessionId = transport.sessionId ?? null;
transcript.capabilities = client.getServerCapabilities();
transcript.instructions = client.getInstructions();

async function tool(name, args, options = {}) {
  const r = await client.callTool({ name, arguments: args }, undefined, options);
  return note(`tools/call ${name}`, args, r);
}

const tools = await client.listTools();
transcript.tools = tools.tools.map((t) => t.name);
transcript.toolSchemas = Object.fromEntries(tools.tools.map((t) => [t.name, t.inputSchema]));

await tool("list_tasks", { backend: "cpu" });
const desc = await tool("describe_task", { task: TASK, backend: "cpu" });
const open = await tool("open_session", { task: TASK, backend: "cpu", budget: 4,
                                          model: "official-ts-sdk-test" });
const sid = open.structuredContent.session_id;
const step = await tool("next_step", { session_id: sid });
const dir = step.structuredContent.direction.id;
const strategies = step.structuredContent.strategies.slice(0, 2).map((s) => s.id);

const progress = [];
const good = await tool("submit_candidate",
  { session_id: sid, source: CORRECT, direction_id: dir, strategy_ids: strategies,
    summary: "branch-free select instead of an if/else per element" },
  { onprogress: (p) => progress.push(p), timeout: EVAL_TIMEOUT_MS,
    resetTimeoutOnProgress: true });
transcript.progress = progress;
const bad = await tool("submit_candidate",
  { session_id: sid, source: WRONG, direction_id: dir, summary: "copy x to y (forgets the max)" },
  { timeout: EVAL_TIMEOUT_MS });
transcript.correctStatus = good.structuredContent?.status;
transcript.wrongStatus = bad.structuredContent?.status;

// Best source: a verified candidate when it measured faster than the baseline (on a CPU the
// reference loop is often vectorized by the compiler, so it may not); then one reported by
// record_outcome as measured elsewhere, which htamd keeps as the best, marked unverified.
const bestBefore = await tool("best_candidate", { session_id: sid });
const reported = CORRECT + "// reported by the test as measured elsewhere\n";
await tool("record_outcome", { session_id: sid, status: "Ok", speedup_after: 50, median_us: 10,
                               direction_id: dir, summary: "measured on another machine",
                               source: reported });
const resources = await client.listResources();
transcript.resources = resources.resources.map((r) => r.uri);
const best = await client.readResource({ uri: `htam://sessions/${sid}/best` });
note("resources/read", { uri: `htam://sessions/${sid}/best` }, best);
transcript.bestSourceIsReported = best.contents[0].text === reported;
transcript.bestBeforeRecord = bestBefore.structuredContent;
transcript.correctSource = CORRECT;
const abi = await client.readResource({ uri: "htam://abi/kernel_abi.h" });
transcript.abiHasEntry = abi.contents[0].text.includes("htam_kernel");
const spec = await client.readResource({ uri: `htam://tasks/${TASK}/spec` });
transcript.specName = JSON.parse(spec.contents[0].text).name;
transcript.specShowsHeldOut = "held_out" in JSON.parse(spec.contents[0].text).shapes;

await tool("explain_step", { session_id: sid, step: 0 });
await tool("search_strategies", { query: "vectorized loads", limit: 3 });
await tool("memory_status", {});

const prompts = await client.listPrompts();
transcript.prompts = prompts.prompts.map((p) => p.name);
const prompt = await client.getPrompt({ name: "optimize_task", arguments: { task: TASK } });
transcript.promptMentionsTask = prompt.messages[0].content.text.includes(TASK);

// Mistakes: an unknown tool is a protocol error; a wrong argument type is a tool error.
try {
  await client.callTool({ name: "no_such_tool", arguments: {} });
  transcript.unknownTool = "no error";
} catch (e) {
  transcript.unknownTool = { code: e.code, message: e.message };
}
const wrongType = await client.callTool({ name: "next_step", arguments: { session_id: "one" } });
transcript.wrongType = wrongType;
transcript.ping = await client.ping();
transcript.describe = { shapes: desc.structuredContent.shapes,
                        hasAbi: desc.structuredContent.kernel_abi.includes("htam_kernel") };

await client.close();
process.stdout.write(JSON.stringify(transcript, null, 1) + "\n");
