// What the official MCP TypeScript SDK client (@modelcontextprotocol/sdk) sees when a request
// cannot be served: a source larger than htam-mcp's max_message_bytes over stdio, and tools
// called while htamd is down. Each call is timed; the client's own timeout is long
// (CLIENT_TIMEOUT_MS), so a server that leaves a request unanswered shows as a long wait.
// Prints one JSON object on stdout; tests/mcp/mcp_clients_test.py checks it.
//
//   node sdk_failures.mjs <source-bytes> <command> [args...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bytes, command, ...args] = process.argv.slice(2);
const CLIENT_TIMEOUT_MS = 60000;

const transport = new StdioClientTransport({ command, args, stderr: "pipe",
                                             env: { ...process.env } });
const client = new Client({ name: "htam-mcp-failures (official TS SDK)", version: "1.0.0" });
await client.connect(transport);

async function timed(name, toolArgs) {
  const start = Date.now();
  const out = { tool: name };
  try {
    const r = await client.callTool({ name, arguments: toolArgs }, undefined,
                                    { timeout: CLIENT_TIMEOUT_MS });
    out.isError = r.isError ?? false;
    out.text = r.content?.[0]?.text ?? "";
  } catch (e) {
    out.rpcError = { code: e.code ?? null, message: String(e.message ?? e) };
  }
  out.ms = Date.now() - start;
  return out;
}

const results = [];
results.push(await timed("submit_candidate",
  { session_id: 1, source: "x".repeat(Number(bytes)), summary: "a source far too large" }));
for (const [name, a] of [["list_tasks", {}], ["describe_task", { task: "cpu_relu" }],
                         ["next_step", { session_id: 1 }], ["memory_status", {}]]) {
  results.push(await timed(name, a));
}
// The server still serves after all of it.
results.push(await timed("list_tasks", { backend: "cpu" }));
await client.close();
console.log(JSON.stringify({ results }));
