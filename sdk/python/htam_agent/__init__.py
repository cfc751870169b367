"""htam-agent: the reference agent of htam.

It runs optimization sessions against htamd (open session -> NextStep -> propose -> Submit ->
close) with a model proposer (any OpenAI-compatible chat-completions endpoint) or a replay
proposer (a task's lineage, no model needed); and imports lineages into the memory. Entry point:
`python3 -m htam_agent` (see docs/agent.md). The benchmarks built on it live in htam-bench's
package (tools/bench/python/htam_bench).
"""

__version__ = "0.1.0"
