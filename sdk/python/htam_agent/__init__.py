"""htam-agent: the reference agent of htam.

It runs optimization sessions against htamd (open session -> NextStep -> propose -> Submit ->
close) with a model proposer (any OpenAI-compatible chat-completions endpoint) or a replay
proposer (a task's lineage, no model needed); imports lineages into the memory; and runs the
memory-quality benchmark. Entry point: `python3 -m htam_agent` (see docs/agent.md).
"""

__version__ = "0.1.0"
