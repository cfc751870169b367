"""MCP over JSON-RPC 2.0, independent of the transport: message checks, protocol-version
negotiation (the initialize handshake of 2025-03-26 .. 2025-11-25, and the stateless 2026-07-28
revision with per-request _meta and server/discover), and the tools, resources, prompts, ping and
logging methods.

McpServer.handle is safe to call from several threads at once (one call per request); a Session
is shared by the requests of one stdio connection or one HTTP session and guarded by its lock.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import __version__
from .htamd import Htamd, ToolError, check_task_name
from .schema import validate
from .tools import Progress, Tools, _stored_task

log = logging.getLogger("htam-mcp")

STATELESS_VERSIONS = ("2026-07-28",)
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
SUPPORTED_VERSIONS = STATELESS_VERSIONS + LEGACY_VERSIONS
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
META_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG = "io.modelcontextprotocol/logLevel"

# JSON-RPC and MCP error codes.
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL = \
    -32700, -32600, -32601, -32602, -32603
HEADER_MISMATCH = -32020
RESOURCE_NOT_FOUND_LEGACY = -32002
UNSUPPORTED_VERSION = -32022

# Methods of the handshake revisions that 2026-07-28 removed: method not found there.
REMOVED_IN_STATELESS = ("initialize", "ping", "logging/setLevel")
# 2026-07-28 caching hints (ttlMs, cacheScope) of list and read results: the catalogue is fixed
# while htam-mcp runs; task lists and sources change with htamd's memory.
STATIC_TTL_MS = 60000
PROGRESS_SETTLE_S = 0.05
LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]

SERVER_INFO = {"name": "htam-mcp", "title": "htam: shared memory of GPU-kernel optimization",
               "version": __version__}
CAPABILITIES = {"tools": {"listChanged": False},
                "resources": {"subscribe": False, "listChanged": False},
                "prompts": {"listChanged": False}, "logging": {}}
INSTRUCTIONS = (
    "htam evaluates kernels on real hardware and remembers what worked across an organization. "
    "Loop: list_tasks -> describe_task -> open_session -> next_step -> write a candidate -> "
    "submit_candidate -> next_step ... -> best_candidate. A candidate is one C entry point "
    "(htam_kernel) from the kernel ABI header; pass the direction_id and strategy_ids from "
    "next_step and a one-line summary with each submission.")


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None, http_status: int = 200):
        super().__init__(message)
        self.code, self.message, self.data, self.http_status = code, message, data, http_status


@dataclass
class Session:
    """What the initialize handshake set up (legacy revisions); unused by stateless requests."""
    id: str = ""
    version: str = ""
    initialized: bool = False
    log_level: str = ""
    client_info: Dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Request:
    """One request being served: its id, method, params, the version it is served under, and how
    to send notifications back on its stream (None where the transport cannot)."""
    id: Any
    method: str
    params: Dict[str, Any]
    version: str = ""
    stateless: bool = False
    log_level: str = ""
    notify: Optional[Callable[[str, Dict[str, Any]], None]] = None


Notify = Callable[[str, Dict[str, Any]], None]


def error_response(id_: Any, code: int, message: str, data: Any = None) -> Dict[str, Any]:
    err: Dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": err}


def is_request(m: Any) -> bool:
    return isinstance(m, dict) and "method" in m and "id" in m


def _valid_id(i: Any) -> bool:
    return isinstance(i, str) or (isinstance(i, int) and not isinstance(i, bool))


class McpServer:
    def __init__(self, htamd: Htamd):
        self.htamd = htamd
        self.cfg = htamd.cfg
        self.tools = Tools(htamd)

    # ---- entry point ----
    def handle(self, msg: Any, session: Session, notify: Optional[Notify] = None,
               http_version: str = "") -> Tuple[Optional[Dict[str, Any]], int]:
        """Serves one JSON-RPC message. Returns (response or None for a notification or a
        response from the client, the HTTP status the transport should use). http_version is
        the MCP-Protocol-Version header of an HTTP request."""
        if not isinstance(msg, dict):
            return error_response(None, INVALID_REQUEST, "a JSON-RPC message must be an object"), 400
        if "method" not in msg:
            if "result" in msg or "error" in msg:
                return None, 202  # a response to a request we never send: ignored
            return error_response(msg.get("id") if _valid_id(msg.get("id")) else None,
                                  INVALID_REQUEST, "no 'method' in the message"), 400
        if "id" not in msg:
            self._notification(msg, session)
            return None, 202
        rid = msg.get("id")
        if not _valid_id(rid):
            return error_response(None, INVALID_REQUEST, "'id' must be a string or an integer"), 400
        try:
            if msg.get("jsonrpc") != "2.0":
                raise RpcError(INVALID_REQUEST, "'jsonrpc' must be \"2.0\"", http_status=400)
            if not isinstance(msg["method"], str):
                raise RpcError(INVALID_REQUEST, "'method' must be a string", http_status=400)
            params = msg.get("params", {})
            if params is None:
                params = {}
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "'params' must be an object", http_status=400)
            req = Request(rid, msg["method"], params, notify=notify)
            result = self._dispatch(req, session, http_version)
            if req.stateless:
                result = {**result, "resultType": "complete"}
                if req.method in CACHE_TTL_MS:
                    result.update(ttlMs=CACHE_TTL_MS[req.method], cacheScope="private")
            return {"jsonrpc": "2.0", "id": rid, "result": result}, 200
        except RpcError as e:
            return error_response(rid, e.code, e.message, e.data), self._status(
                e.http_status, msg, session, http_version)
        except Exception as e:  # a bug: answer it, log it, keep serving
            log.exception("internal error serving %s", msg.get("method"))
            return (error_response(rid, INTERNAL, f"internal error: {type(e).__name__}: {e}"),
                    self._status(500, msg, session, http_version))

    @staticmethod
    def _status(status: int, msg: Dict[str, Any], session: Session, http_version: str) -> int:
        """HTTP status of an error: 2026-07-28 gives errors their own (400, 404, ...); within a
        session of the initialize handshake, JSON-RPC errors travel with 200."""
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        with session.lock:
            legacy = session.version
        stateless = ((META_VERSION in meta and meta[META_VERSION] != legacy)
                     or http_version in STATELESS_VERSIONS)
        return 200 if legacy and not stateless else status

    def _notification(self, msg: Dict[str, Any], session: Session) -> None:
        method = msg.get("method")
        if method == "notifications/initialized":
            with session.lock:
                session.initialized = True
        # notifications/cancelled: htamd cannot stop an evaluation it has started, so the request
        # runs to its end (and is recorded); the transport drops the response. Others: ignored.

    # ---- version negotiation ----
    def _version(self, req: Request, session: Session, http_version: str) -> None:
        meta = req.params.get("_meta")
        has_meta_version = isinstance(meta, dict) and META_VERSION in meta
        if has_meta_version:
            with session.lock:
                if session.version and meta.get(META_VERSION) == session.version:
                    has_meta_version = False  # a handshake client that also names its revision
        stateless = (has_meta_version or req.method == "server/discover"
                     or http_version in STATELESS_VERSIONS)
        if stateless and req.method in REMOVED_IN_STATELESS:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {req.method} (not part of "
                           f"{', '.join(STATELESS_VERSIONS)})", http_status=404)
        if req.method == "initialize":
            return
        if stateless:
            if not isinstance(meta, dict):
                raise RpcError(INVALID_PARAMS, f"params._meta with '{META_VERSION}' and "
                               f"'{META_CAPS}' is required", http_status=400)
            v = meta.get(META_VERSION)
            if not isinstance(v, str) or not v:
                raise RpcError(INVALID_PARAMS, f"params._meta['{META_VERSION}'] must be a "
                               f"protocol version string", http_status=400)
            if v not in STATELESS_VERSIONS:
                raise RpcError(UNSUPPORTED_VERSION, f"unsupported protocol version {v!r} in "
                               f"_meta; supported: {', '.join(STATELESS_VERSIONS)} (and "
                               f"{', '.join(LEGACY_VERSIONS)} through initialize)",
                               {"supported": list(STATELESS_VERSIONS), "requested": v},
                               http_status=400)
            if not isinstance(meta.get(META_CAPS), dict):
                raise RpcError(INVALID_PARAMS, f"params._meta['{META_CAPS}'] must be an object",
                               http_status=400)
            if META_INFO in meta and not isinstance(meta[META_INFO], dict):
                raise RpcError(INVALID_PARAMS, f"params._meta['{META_INFO}'] must be an object",
                               http_status=400)
            lvl = meta.get(META_LOG)
            req.version, req.stateless = v, True
            req.log_level = lvl if lvl in LOG_LEVELS else ""
            return
        with session.lock:
            req.version, req.log_level = session.version, session.log_level
        if not req.version and req.method != "ping":
            raise RpcError(INVALID_PARAMS, "no protocol version: send initialize first "
                           f"({', '.join(LEGACY_VERSIONS)}), or put '{META_VERSION}' "
                           f"({', '.join(STATELESS_VERSIONS)}) and '{META_CAPS}' in params._meta",
                           http_status=400)

    # ---- methods ----
    def _dispatch(self, req: Request, session: Session, http_version: str) -> Dict[str, Any]:
        self._version(req, session, http_version)
        m = req.method
        if m == "initialize":
            return self._initialize(req, session)
        if m == "ping":
            return {}
        if m == "server/discover":
            return {"supportedVersions": list(SUPPORTED_VERSIONS), "capabilities": CAPABILITIES,
                    "serverInfo": SERVER_INFO, "instructions": INSTRUCTIONS,
                    "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}
        if m == "tools/list":
            return {"tools": self.tools.listing()}
        if m == "tools/call":
            return self._call_tool(req)
        if m == "resources/list":
            return {"resources": self._resources()}
        if m == "resources/templates/list":
            return {"resourceTemplates": RESOURCE_TEMPLATES}
        if m == "resources/read":
            return self._read_resource(req)
        if m == "prompts/list":
            return {"prompts": [PROMPT]}
        if m == "prompts/get":
            return self._get_prompt(req)
        if m == "logging/setLevel" and not req.stateless:
            level = req.params.get("level")
            if level not in LOG_LEVELS:
                raise RpcError(INVALID_PARAMS, f"level must be one of {', '.join(LOG_LEVELS)}")
            with session.lock:
                session.log_level = level
            return {}
        raise RpcError(METHOD_NOT_FOUND, f"method not found: {m}", http_status=404)

    def _initialize(self, req: Request, session: Session) -> Dict[str, Any]:
        p = req.params
        asked = p.get("protocolVersion")
        if not isinstance(asked, str):
            raise RpcError(INVALID_PARAMS, "initialize needs params.protocolVersion (a string)")
        # The client's version when we speak it; otherwise our latest, and the client decides.
        version = asked if asked in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
        with session.lock:
            session.version = version
            session.client_info = p.get("clientInfo") if isinstance(p.get("clientInfo"), dict) else {}
        log.info("initialize: client %s asked %s, speaking %s",
                 session.client_info.get("name", "?"), asked, version)
        return {"protocolVersion": version, "capabilities": CAPABILITIES,
                "serverInfo": SERVER_INFO, "instructions": INSTRUCTIONS}

    def _call_tool(self, req: Request) -> Dict[str, Any]:
        name = req.params.get("name")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, "tools/call needs params.name (a string)")
        tool = self.tools.defs.get(name)
        if tool is None:
            raise RpcError(INVALID_PARAMS, f"unknown tool: {name!r} (tools: "
                           f"{', '.join(self.tools.defs)})")
        args = req.params.get("arguments", {})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            return _tool_error(f"{name}: arguments must be an object")
        problems = validate(args, tool["inputSchema"])
        if problems:
            return _tool_error(f"{name}: invalid arguments: " + "; ".join(problems[:10]))
        meta = req.params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        send = None
        if token is not None and req.notify is not None and _valid_id(token):
            def send(progress: float, total: Optional[float], message: str) -> None:
                params: Dict[str, Any] = {"progressToken": token, "progress": progress,
                                          "message": message}
                if total is not None:
                    params["total"] = total
                req.notify("notifications/progress", params)
        progress = Progress(send)
        try:
            out = self.tools.call(name, args, progress)
            if progress.count:
                # Some clients (the TypeScript SDK) handle a notification a tick later than a
                # response read in the same chunk, and drop progress for a finished request; a
                # short pause keeps the last notification ahead of the answer.
                time.sleep(PROGRESS_SETTLE_S)
        except ToolError as e:
            self._log(req, "warning", f"{name}: {e}")
            return _tool_error(str(e))
        if name == "submit_candidate":
            self._log(req, "info", f"session {out['session_id']}: {out['status']}, "
                                   f"{out['speedup']:.3f}x (best {out['best_speedup']:.3f}x)")
        return {"content": [{"type": "text", "text": json.dumps(out, indent=1)}],
                "structuredContent": out, "isError": False}

    def _log(self, req: Request, level: str, message: str) -> None:
        """notifications/message, only when the client asked for this level or above."""
        if not req.log_level or req.notify is None:
            return
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(req.log_level):
            return
        req.notify("notifications/message", {"level": level, "logger": "htam-mcp",
                                             "data": message})

    # ---- resources ----
    def _resources(self) -> List[Dict[str, Any]]:
        out = []
        if self.htamd.abi_header():
            out.append(ABI_RESOURCE)
        names = set(self.htamd.suite_names())
        sessions: List[Dict[str, Any]] = []
        try:
            with self.htamd.client() as c:
                names |= {t["name"] for t in c.query("tasks")["tasks"]}
                sessions = c.query("best_candidates", limit=50)["sessions"]
        except ToolError as e:  # htamd down: still list what is on disk
            log.warning("resources/list without htamd: %s", e)
        for n in sorted(names):
            out.append({"uri": f"htam://tasks/{n}/spec", "name": f"{n}-spec",
                        "title": f"Task {n}: specification", "mimeType": "application/json",
                        "description": "inputs, outputs, seen shapes, tolerance, FLOPs and bytes"})
        for s in sessions:
            out.append({"uri": f"htam://sessions/{s['id']}/best", "name": f"session-{s['id']}-best",
                        "title": f"Session {s['id']} ({s['task_name']}, {s['backend']}): best "
                                 f"source, {s['best_speedup']:.2f}x",
                        "mimeType": "text/plain"})
        return out

    def _read_resource(self, req: Request) -> Dict[str, Any]:
        uri = req.params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "resources/read needs params.uri (a string)")
        not_found = RESOURCE_NOT_FOUND_LEGACY if not req.stateless else INVALID_PARAMS
        try:
            if uri == ABI_RESOURCE["uri"]:
                text = self.htamd.abi_header()
                if text:
                    return _contents(uri, "text/x-c", text)
            m = re.fullmatch(r"htam://tasks/([^/]+)/spec", uri)
            if m:
                spec = self._task_spec(check_task_name(m.group(1)))
                if spec is not None:
                    return _contents(uri, "application/json", json.dumps(spec, indent=1))
            m = re.fullmatch(r"htam://sessions/(\d{1,20})/best", uri)
            if m:
                out = self.tools.best_candidate({"session_id": int(m.group(1))}, Progress())
                if out["found"]:
                    return _contents(uri, "text/plain", out["source"])
        except ToolError as e:
            if "NotFound" in str(e):
                raise RpcError(not_found, f"resource not found: {uri} ({e})", {"uri": uri})
            raise RpcError(INTERNAL, f"cannot read {uri}: {e}", {"uri": uri}, http_status=500)
        raise RpcError(not_found, f"resource not found: {uri}", {"uri": uri})

    def _task_spec(self, name: str) -> Optional[Dict[str, Any]]:
        spec = self.htamd.suite_spec(name)
        if spec is not None:
            spec = dict(spec)
            shapes = dict(spec.get("shapes") or {})
            held = shapes.pop("held_out", [])
            spec["shapes"] = {**shapes, "held_out_count": len(held)}  # checked, never shown
            return spec
        with self.htamd.client() as c:
            stored = _stored_task(c, name)
        if not stored:
            return None
        t = stored[0]
        return {k: t.get(k) for k in ("name", "category", "description", "rtol", "atol",
                                      "bad_budget", "flops", "bytes", "baselines", "spec_hash")}

    # ---- prompts ----
    def _get_prompt(self, req: Request) -> Dict[str, Any]:
        if req.params.get("name") != PROMPT["name"]:
            raise RpcError(INVALID_PARAMS, f"unknown prompt: {req.params.get('name')!r} "
                           f"(prompts: {PROMPT['name']})")
        args = req.params.get("arguments") or {}
        if not isinstance(args, dict) or not all(isinstance(v, str) for v in args.values()):
            raise RpcError(INVALID_PARAMS, "prompt arguments must be an object of strings")
        task = args.get("task", "")
        if not task:
            raise RpcError(INVALID_PARAMS, "prompt optimize_task needs the argument 'task'")
        backend = args.get("backend") or "cpu"
        budget = args.get("budget") or "5"
        text = (
            f"Optimize the htam task '{task}' on the {backend} backend with the htam tools, in "
            f"at most {budget} submissions.\n"
            f"1. describe_task (task={task!r}, backend={backend!r}): read the specification, "
            f"the kernel ABI and the reference source; your candidate must keep the same entry "
            f"point and pass the verification gate on shapes you are not shown.\n"
            f"2. open_session (task={task!r}, backend={backend!r}, budget={budget}).\n"
            f"3. Each step: next_step, then write a candidate that applies the advised direction "
            f"and strategies (the prompt_context says what worked in similar states), then "
            f"submit_candidate with direction_id, strategy_ids and a one-line summary. Read the "
            f"status and diagnostics: fix CompileError and Incorrect before going faster.\n"
            f"4. Finish with best_candidate and report the best speedup and its source.")
        return {"description": PROMPT["description"],
                "messages": [{"role": "user", "content": {"type": "text", "text": text}}]}


def _tool_error(message: str) -> Dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def _contents(uri: str, mime: str, text: str) -> Dict[str, Any]:
    return {"contents": [{"uri": uri, "mimeType": mime, "text": text}]}


ABI_RESOURCE = {"uri": "htam://abi/kernel_abi.h", "name": "kernel_abi.h",
                "title": "htam kernel ABI header", "mimeType": "text/x-c",
                "description": "the C entry point and tensor types every candidate includes"}
RESOURCE_TEMPLATES = [
    {"uriTemplate": "htam://tasks/{task}/spec", "name": "task-spec",
     "title": "A task's specification", "mimeType": "application/json"},
    {"uriTemplate": "htam://sessions/{session_id}/best", "name": "session-best",
     "title": "A session's best candidate source", "mimeType": "text/plain"},
]
CACHE_TTL_MS = {"tools/list": STATIC_TTL_MS, "prompts/list": STATIC_TTL_MS,
                "resources/templates/list": STATIC_TTL_MS, "resources/list": 0,
                "resources/read": 0}
PROMPT = {"name": "optimize_task", "title": "Optimize this task with htam",
          "description": "Optimize this task with htam: the describe, open, next_step, submit "
                         "loop with htam's memory, within a budget.",
          "arguments": [{"name": "task", "description": "task name (see list_tasks)",
                         "required": True},
                        {"name": "backend", "description": "cpu, cuda or hip (default cpu)",
                         "required": False},
                        {"name": "budget", "description": "submissions to spend (default 5)",
                         "required": False}]}
