"""Command line of htam-mcp.

    htam-mcp [--endpoint tcp://127.0.0.1:7878] [--tasks-dir DIR]              (stdio)
    htam-mcp --transport http [--http-host 127.0.0.1] [--http-port 8787] [--token-file F]

Exit status: 0 after a clean stop (stdin closed, SIGTERM, SIGINT), 2 on bad usage.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import List, Optional

from . import __version__
from .config import load, missing_shipped
from .htamd import Htamd
from .protocol import McpServer

log = logging.getLogger("htam-mcp")


def main(argv: Optional[List[str]] = None) -> int:
    try:
        cfg, args = load(argv)
    except (ValueError, OSError) as e:
        print(f"htam-mcp: {e}", file=sys.stderr)
        return 2
    if args.version:
        print(f"htam-mcp {__version__}")
        return 0
    logging.basicConfig(stream=sys.stderr, format="htam-mcp: %(levelname)s: %(message)s",
                        level=getattr(logging, cfg.log_level.upper(), logging.WARNING))
    for problem in missing_shipped(cfg):
        print(f"htam-mcp: warning: {problem}", file=sys.stderr, flush=True)
    htamd = Htamd(cfg)
    server = McpServer(htamd)
    try:
        if cfg.transport == "stdio":
            from .stdio import StdioServer
            StdioServer(server).serve()
            return 0
        from .http import McpHttpServer
        try:
            httpd = McpHttpServer(server)
        except (ValueError, OSError) as e:
            print(f"htam-mcp: {e}", file=sys.stderr)
            return 2

        def stop(signum: int, frame: object) -> None:  # only starts the shutdown
            threading.Thread(target=httpd.shutdown, daemon=True).start()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        print(f"htam-mcp: serving MCP (Streamable HTTP) at {httpd.url} for htamd at "
              f"{cfg.endpoint}", file=sys.stderr, flush=True)
        httpd.serve_forever()
        httpd.server_close()
        return 0
    finally:
        htamd.close()
