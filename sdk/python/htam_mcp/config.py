"""htam-mcp's options: one table (name, default, meaning), read from the command line and from
HTAM_MCP_<NAME> environment variables (the command line wins). docs/mcp.md lists them.

Immutable after start-up; safe to read from any thread.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

# (name, type, default, meaning). The order is the order of --help and of docs/mcp.md.
OPTIONS: Tuple[Tuple[str, type, Any, str], ...] = (
    ("endpoint", str, "tcp://127.0.0.1:7878",
     "htamd's server.bind (tcp://host:port or ipc://path)"),
    ("server_key", str, "", "htamd's CURVE public key file (htam-keygen .pub), when htamd uses CURVE"),
    ("client_key", str, "", "this client's CURVE key file (htam-keygen .key), when htamd uses CURVE"),
    ("identity_file", str, "",
     "without CURVE, the file of this server's identity secret (created, mode 0600, on first "
     "use): htam-mcp processes sharing it own the same sessions in htamd; empty = "
     "$XDG_CONFIG_HOME/htam/mcp-identity (~/.config/htam/mcp-identity); HTAM_IDENTITY_SECRET "
     "wins when set"),
    ("timeout_s", float, 15.0, "deadline of one request to htamd, except an evaluation"),
    ("retries", int, 1, "extra attempts of requests that are safe to repeat (lazy pirate)"),
    ("submit_timeout_s", float, 900.0, "deadline of one evaluation (submit_candidate)"),
    ("progress_interval_s", float, 5.0,
     "while an evaluation runs, a progress notification this often (when the client asked)"),
    ("max_source_bytes", int, 1 << 20,
     "largest candidate source accepted; larger is a tool error before htamd is asked"),
    ("max_message_bytes", int, 4 << 20, "largest JSON-RPC message (stdio line or HTTP body)"),
    ("tasks_dir", str, "",
     "the task suite (htamd's server.tasks_dir when on this host): lists tasks never opened yet "
     "and serves their specifications and reference sources; empty = the suite shipped with "
     "this install (<prefix>/share/htam/tasks)"),
    ("abi_header", str, "", "the kernel ABI header served as a resource; empty = the one shipped "
     "with this install (<prefix>/share/htam/include/htam/kernel_abi.h)"),
    ("client_name", str, "htam-mcp", "the client name htamd shows in its status and sessions"),
    ("transport", str, "stdio", "stdio or http (Streamable HTTP)"),
    ("http_host", str, "127.0.0.1", "address the HTTP transport binds (loopback by default)"),
    ("http_port", int, 8787, "port of the HTTP transport (0 = any free port, printed at start)"),
    ("http_path", str, "/mcp", "the single MCP endpoint path of the HTTP transport"),
    ("token", str, "",
     "bearer token required on every HTTP request; mandatory when http_host is not loopback"),
    ("token_file", str, "", "file holding the bearer token (first line), instead of --token"),
    ("allowed_origins", str, "",
     "comma-separated Origin values accepted besides http(s)://localhost|127.0.0.1|[::1][:port]"),
    ("max_sessions", int, 256, "HTTP sessions kept (least recently used dropped beyond this)"),
    ("workers", int, 8, "requests served at once (each holds one connection to htamd)"),
    ("log_level", str, "warning", "stderr log level of htam-mcp itself (debug, info, warning, error)"),
)


SHIPPED_TASKS = "tasks"
SHIPPED_ABI_HEADER = "include/htam/kernel_abi.h"


def shipped_roots() -> List[str]:
    """Where an install keeps the files it ships, as htamd looks for them (base/paths.h): the
    share/htam folder of an ancestor of this package, i.e. <prefix>/share/htam for
    <prefix>/lib/python3/dist-packages/htam_mcp, and <build>/share/htam for a build tree's
    <build>/python/htam_mcp. The path is taken as imported, links unresolved."""
    here = os.path.dirname(os.path.abspath(__file__))
    roots = []
    for _ in range(4):
        here = os.path.dirname(here)
        roots.append(os.path.join(here, "share", "htam"))
    return roots


def find_shipped(relative: str) -> str:
    """The first <root>/<relative> of shipped_roots() that exists, or ''."""
    for root in shipped_roots():
        path = os.path.join(root, relative)
        if os.path.exists(path):
            return path
    return ""


def missing_shipped(cfg: "Config") -> List[str]:
    """What this htam-mcp serves without, in words for its start-up log."""
    out = []
    if not cfg.tasks_dir or not os.path.isdir(cfg.tasks_dir):
        where = cfg.tasks_dir or " or ".join(os.path.join(r, SHIPPED_TASKS)
                                             for r in shipped_roots()[:2]) + ", ..."
        out.append(f"no task suite at {where}: list_tasks and describe_task show only the tasks "
                   f"in htamd's memory, without reference sources (set --tasks-dir)")
    if not cfg.abi_header or not os.path.isfile(cfg.abi_header):
        where = cfg.abi_header or os.path.join(shipped_roots()[2], SHIPPED_ABI_HEADER)
        out.append(f"no kernel ABI header at {where}: describe_task and the resource "
                   f"htam://abi/kernel_abi.h go without it (set --abi-header)")
    return out


@dataclass(frozen=True)
class Config:
    values: Dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["values"][name]
        except KeyError as e:
            raise AttributeError(name) from e

    @property
    def origins(self) -> List[str]:
        return [o.strip() for o in self.allowed_origins.split(",") if o.strip()]


def defaults() -> Dict[str, Any]:
    return {name: default for name, _, default, _ in OPTIONS}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="htam-mcp",
        description="Model Context Protocol server in front of htamd (docs/mcp.md). Every option "
                    "can also be set as HTAM_MCP_<NAME> in the environment.")
    for name, typ, default, meaning in OPTIONS:
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=typ, default=None,
                       help=f"{meaning} (default: {default!r})")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    return p


def load(argv: Optional[Sequence[str]] = None,
         environ: Optional[Dict[str, str]] = None) -> Tuple[Config, argparse.Namespace]:
    """Defaults, then HTAM_MCP_* variables, then the command line. Raises ValueError on a bad
    value (the caller prints it and exits 2)."""
    env = os.environ if environ is None else environ
    args = parser().parse_args(argv)
    values = defaults()
    for name, typ, _, _ in OPTIONS:
        raw = env.get("HTAM_MCP_" + name.upper())
        if raw is not None and raw != "":
            try:
                values[name] = typ(raw)
            except ValueError as e:
                raise ValueError(f"HTAM_MCP_{name.upper()}={raw!r}: {e}") from e
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    if values["transport"] not in ("stdio", "http"):
        raise ValueError(f"transport must be stdio or http, not {values['transport']!r}")
    for name in ("max_source_bytes", "max_message_bytes", "workers", "max_sessions",
                 "progress_interval_s", "submit_timeout_s", "timeout_s"):
        if values[name] <= 0:
            raise ValueError(f"{name} must be positive")
    if not values["http_path"].startswith("/"):
        raise ValueError("http_path must start with /")
    for name, shipped in (("tasks_dir", SHIPPED_TASKS), ("abi_header", SHIPPED_ABI_HEADER)):
        if not values[name]:
            values[name] = find_shipped(shipped)
    if values["token_file"]:
        with open(values["token_file"], encoding="utf-8") as f:
            values["token"] = f.readline().strip()
        if not values["token"]:
            raise ValueError(f"{values['token_file']}: empty token")
    return Config(values), args
