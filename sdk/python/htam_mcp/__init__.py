"""htam-mcp: a Model Context Protocol server in front of htamd (docs/mcp.md).

Any MCP client (coding agents, the inspector) reaches htam's memory and evaluator as tools,
resources and a prompt, over stdio or Streamable HTTP. It is a client of htamd through the
Python SDK (package htam).
"""

__version__ = "0.1.0"
