"""The Streamable HTTP transport: one endpoint (http_path). POST carries one JSON-RPC message (or a
batch); the answer is application/json, or text/event-stream when the client accepts it and the
request asked for progress (notifications first, then the answer). initialize starts a session
(Mcp-Session-Id), DELETE ends it; stateless (2026-07-28) requests need none. GET is 405 (htam-mcp
sends nothing unasked).

Guards: loopback by default; a bearer token is required on every request when configured and
mandatory when bound to any other address; the Origin header, when present, must be a local one
or listed in allowed_origins (DNS rebinding); bodies over max_message_bytes get 413.

Thread-safe: one thread per connection, sessions under a lock, at most `workers` requests served
at once.
"""

from __future__ import annotations

import collections
import hmac
import ipaddress
import json
import logging
import re
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

from .protocol import (HEADER_MISMATCH, INVALID_REQUEST, PARSE_ERROR, STATELESS_VERSIONS,
                       SUPPORTED_VERSIONS, UNSUPPORTED_VERSION, McpServer, Session, error_response,
                       is_request)

log = logging.getLogger("htam-mcp")

_LOCAL_ORIGIN = re.compile(r"^https?://(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$")
_LOCAL_HOST = re.compile(r"^(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$")
# Requests whose target the 2026-07-28 Mcp-Name header repeats, and the param holding it.
_NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Sessions:
    """Mcp-Session-Id -> Session, the least recently used dropped beyond max_sessions."""

    def __init__(self, limit: int):
        self.limit = limit
        self._lock = threading.Lock()
        self._map: "collections.OrderedDict[str, Session]" = collections.OrderedDict()

    def create(self) -> Session:
        s = Session(id=secrets.token_urlsafe(24))
        with self._lock:
            self._map[s.id] = s
            while len(self._map) > self.limit:
                self._map.popitem(last=False)
        return s

    def get(self, sid: str) -> Optional[Session]:
        with self._lock:
            s = self._map.get(sid)
            if s is not None:
                self._map.move_to_end(sid)
            return s

    def drop(self, sid: str) -> bool:
        with self._lock:
            return self._map.pop(sid, None) is not None


class McpHttpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, server: McpServer):
        cfg = server.cfg
        if not is_loopback(cfg.http_host) and not cfg.token:
            raise ValueError(f"http_host {cfg.http_host} is not a loopback address: set a bearer "
                             f"token (--token or --token-file) to serve it")
        self.mcp = server
        self.cfg = cfg
        self.sessions = Sessions(cfg.max_sessions)
        self.slots = threading.BoundedSemaphore(cfg.workers)
        host = cfg.http_host.strip("[]")
        if ":" in host:
            self.address_family = __import__("socket").AF_INET6
        super().__init__((host, cfg.http_port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}{self.cfg.http_path}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: McpHttpServer

    def log_message(self, fmt: str, *args: Any) -> None:  # stderr is for htam-mcp's own log
        log.debug("http %s " + fmt, self.client_address[0], *args)

    # ---- plain replies ----
    def _send(self, status: int, body: Optional[Any] = None,
              headers: Optional[Dict[str, str]] = None) -> None:
        data = b"" if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)

    def _refuse(self, status: int, code: int, message: str,
                headers: Optional[Dict[str, str]] = None, rid: Any = None) -> None:
        self.close_connection = True  # the body may be unread: never parse it as a request
        self._send(status, error_response(rid, code, message), headers)

    def _guard(self) -> bool:
        """Path, Origin and bearer token; False when a refusal was sent."""
        cfg = self.server.cfg
        if self.path.split("?", 1)[0] != cfg.http_path:
            self._refuse(404, INVALID_REQUEST, f"not found: the MCP endpoint is {cfg.http_path}")
            return False
        host = self.headers.get("Host", "")
        if is_loopback(cfg.http_host) and not _LOCAL_HOST.match(host):
            self._refuse(403, INVALID_REQUEST, f"host {host!r} is not a loopback name (DNS "
                         f"rebinding?)")
            return False
        origin = self.headers.get("Origin")
        if origin is not None and not (_LOCAL_ORIGIN.match(origin) or origin in cfg.origins):
            self._refuse(403, INVALID_REQUEST, f"origin {origin!r} not allowed (allowed_origins)")
            return False
        if cfg.token:
            auth = self.headers.get("Authorization", "")
            given = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
            if not hmac.compare_digest(given.encode(), cfg.token.encode()):
                self._refuse(401, INVALID_REQUEST, "missing or wrong bearer token",
                             {"WWW-Authenticate": 'Bearer realm="htam-mcp"'})
                return False
        return True

    # ---- methods ----
    def do_GET(self) -> None:
        if self._guard():
            self._refuse(405, INVALID_REQUEST, "GET: htam-mcp sends no unrequested messages; POST "
                         "JSON-RPC requests", {"Allow": "POST, DELETE"})

    def do_PUT(self) -> None:
        if self._guard():
            self._refuse(405, INVALID_REQUEST, "use POST", {"Allow": "POST, DELETE"})

    do_PATCH = do_PUT

    def do_DELETE(self) -> None:
        if not self._guard():
            return
        sid = self.headers.get("Mcp-Session-Id")
        if not sid:
            self._refuse(400, INVALID_REQUEST, "DELETE needs an Mcp-Session-Id header")
        elif self.server.sessions.drop(sid):
            self._send(200)
        else:
            self._refuse(404, INVALID_REQUEST, "unknown or expired session")

    def do_POST(self) -> None:
        if not self._guard():
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._refuse(411, INVALID_REQUEST, "Content-Length required")
            return
        if length > self.server.cfg.max_message_bytes or length < 0:
            self.close_connection = True
            self._refuse(413, INVALID_REQUEST, f"body over {self.server.cfg.max_message_bytes} "
                         f"bytes (max_message_bytes)")
            return
        body = self.rfile.read(length)
        try:
            msg = json.loads(body)
        except ValueError as e:
            self._refuse(400, PARSE_ERROR, f"parse error: not JSON ({e})")
            return
        msgs: List[Any] = msg if isinstance(msg, list) else [msg]
        if not msgs:
            self._refuse(400, INVALID_REQUEST, "empty batch")
            return
        first = msgs[0] if isinstance(msgs[0], dict) else {}
        rid = first.get("id") if is_request(first) else None
        version = (self.headers.get("MCP-Protocol-Version") or "").strip()
        if version and version not in SUPPORTED_VERSIONS:
            self._send(400, error_response(
                rid, UNSUPPORTED_VERSION, f"unsupported MCP-Protocol-Version {version!r}; "
                f"supported: {', '.join(SUPPORTED_VERSIONS)}",
                {"supported": list(SUPPORTED_VERSIONS), "requested": version}))
            return
        mismatch = self._header_mismatch(msgs, version)
        if mismatch:
            self._refuse(400, HEADER_MISMATCH, mismatch, rid=rid)
            return
        session, headers, problem = self._session(msgs)
        if problem is not None:
            self._send(problem[0], problem[1])
            return
        if not any(is_request(m) for m in msgs):  # notifications or responses only
            for m in msgs:
                self.server.mcp.handle(m, session)
            self._send(202, None, headers)
            return
        if not isinstance(msg, list) and self._wants_stream(msg):
            self._stream(msg, session, headers, version)
            return
        with self.server.slots:
            replies = [self.server.mcp.handle(m, session, None, version) for m in msgs]
        out = [r for r, _ in replies if r is not None]
        status = replies[0][1] if not isinstance(msg, list) else 200
        self._send(status if status != 202 else 200, out if isinstance(msg, list) else out[0],
                   headers)

    # ---- helpers ----
    def _session(self, msgs: List[Any]) -> Tuple[Session, Dict[str, str], Optional[Tuple[int, Any]]]:
        """The session these messages belong to, headers to answer with, or a refusal."""
        sessions = self.server.sessions
        first = msgs[0] if isinstance(msgs[0], dict) else {}
        if first.get("method") == "initialize":
            s = sessions.create()
            return s, {"Mcp-Session-Id": s.id}, None
        sid = self.headers.get("Mcp-Session-Id")
        if sid:
            s = sessions.get(sid)
            if s is None:
                return Session(), {}, (404, error_response(
                    first.get("id") if is_request(first) else None, INVALID_REQUEST,
                    "unknown or expired Mcp-Session-Id: initialize again"))
            return s, {}, None
        # No session: stateless (2026-07-28) requests, ping, or a request the protocol layer
        # refuses for want of a version.
        return Session(), {}, None

    def _header_mismatch(self, msgs: List[Any], version: str) -> str:
        """2026-07-28 routing headers must be present and agree with the body (whitespace
        around a value is not part of it); earlier revisions' requests are only checked for
        the headers they send."""
        if len(msgs) != 1 or not is_request(msgs[0]):
            return ""
        m = msgs[0]
        params = m.get("params") if isinstance(m.get("params"), dict) else {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        mv = meta.get("io.modelcontextprotocol/protocolVersion")
        if version and mv is not None and version != mv:
            return f"MCP-Protocol-Version header {version!r} differs from _meta version {mv!r}"
        stateless = version in STATELESS_VERSIONS or mv in STATELESS_VERSIONS
        hm = self.headers.get("Mcp-Method")
        if hm is None and stateless:
            return "the Mcp-Method header is required (2026-07-28)"
        if hm is not None and hm.strip() != m.get("method"):
            return f"Mcp-Method header {hm!r} differs from the body's method {m.get('method')!r}"
        hn = self.headers.get("Mcp-Name")
        key = _NAMED.get(m.get("method"))
        name = params.get(key) if key else None
        if hn is None and stateless and isinstance(name, str):
            return f"the Mcp-Name header is required for {m.get('method')} (2026-07-28)"
        if hn is not None and name is not None and hn.strip() != name:
            return f"Mcp-Name header {hn!r} differs from the body's {name!r}"
        return ""

    def _wants_stream(self, msg: Any) -> bool:
        if not is_request(msg) or "text/event-stream" not in self.headers.get("Accept", ""):
            return False
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        return "progressToken" in meta or "io.modelcontextprotocol/logLevel" in meta

    def _stream(self, msg: Dict[str, Any], session: Session, headers: Dict[str, str],
                version: str) -> None:
        """Answers as an SSE stream: notifications as they happen, then the response."""
        self.close_connection = True
        self.send_response(200)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        lock = threading.Lock()

        def event(payload: Dict[str, Any]) -> None:
            data = json.dumps(payload, ensure_ascii=False)
            with lock:
                try:
                    self.wfile.write(f"event: message\ndata: {data}\n\n".encode("utf-8"))
                    self.wfile.flush()
                except OSError:  # the client left; the request still runs to its end
                    pass

        with self.server.slots:
            reply, _ = self.server.mcp.handle(
                msg, session, lambda method, params: event(
                    {"jsonrpc": "2.0", "method": method, "params": params}), version)
        if reply is not None:
            event(reply)
