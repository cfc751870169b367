"""The stdio transport: newline-delimited JSON-RPC messages on stdin, answers on stdout, logs on
stderr. Requests run on a thread pool, so a long evaluation never holds up a ping or a
tools/list; a line that is not JSON, too long, or not a message gets an error and the server
reads on. A cancelled request's answer is dropped.

One StdioServer per process; serve() returns when stdin closes.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, Dict, Optional, Set

from .protocol import (INVALID_REQUEST, PARSE_ERROR, McpServer, Session, error_response,
                       is_request)

log = logging.getLogger("htam-mcp")

_TAIL_BYTES = 4096
# One token of JSON: a string, a bracket, or a run of anything else (numbers, literals, commas,
# colons, blanks).
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]|[^"{}\[\]]+')
_ID_VALUE = re.compile(rb'\s*:\s*("(?:[^"\\]|\\.)*"|-?\d{1,18})')
# The id as the last member of the top-level object (where the TypeScript SDK puts it).
_ID_AT_END = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d{1,18})\s*\}\s*$')


def long_line_id(head: bytes, tail: bytes) -> Any:
    """The "id" member of the top-level object of a JSON-RPC message known only by its first
    bytes (head) and last bytes (tail); None when neither shows it."""
    depth, end = 0, 0
    for m in _TOKEN.finditer(head):
        if m.start() != end:  # an unterminated string: the cut is inside it
            break
        end = m.end()
        tok = m.group()
        if tok in (b"{", b"["):
            depth += 1
        elif tok in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and tok == b'"id"':
            v = _ID_VALUE.match(head, end)
            if v:
                return _decode_id(v.group(1))
    v = _ID_AT_END.search(tail.rstrip(b"\r\n"))
    return _decode_id(v.group(1)) if v else None


def _decode_id(raw: bytes) -> Any:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, (str, int)) else None


class StdioServer:
    def __init__(self, server: McpServer, stdin: Optional[BinaryIO] = None,
                 stdout: Optional[BinaryIO] = None):
        self.server = server
        self.cfg = server.cfg
        self.stdin = stdin or sys.stdin.buffer
        self.stdout = stdout or sys.stdout.buffer
        self.session = Session(id="stdio")
        self._write_lock = threading.Lock()
        self._cancel_lock = threading.Lock()
        self._cancelled: Set[Any] = set()
        self._pool = ThreadPoolExecutor(max_workers=self.cfg.workers,
                                        thread_name_prefix="htam-mcp")

    def write(self, message: Dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        with self._write_lock:
            try:
                self.stdout.write(data + b"\n")
                self.stdout.flush()
            except (BrokenPipeError, ValueError):  # the client went away
                pass

    def notify(self, method: str, params: Dict[str, Any]) -> None:
        self.write({"jsonrpc": "2.0", "method": method, "params": params})

    def serve(self) -> None:
        limit = self.cfg.max_message_bytes
        try:
            while True:
                line = self.stdin.readline(limit + 1)
                if not line:
                    break
                if len(line) > limit and not line.endswith(b"\n"):
                    rid = self._skip_long_line(line)
                    self.write(error_response(rid, INVALID_REQUEST,
                                              f"message longer than {limit} bytes "
                                              f"(max_message_bytes)"))
                    continue
                if line.strip():
                    self._on_line(line)
        finally:
            self._pool.shutdown(wait=True)

    def _skip_long_line(self, head: bytes) -> Any:
        """Reads the rest of a line too long to parse, keeping only its first max_message_bytes
        and a short tail, and returns the request's id where one can be read from those (None
        otherwise): a client waits for the answer to its id, and an error with id null would
        leave it waiting out its whole timeout."""
        tail = b""
        line = head
        while line and not line.endswith(b"\n"):
            line = self.stdin.readline(1 << 20)
            tail = (tail + line)[-_TAIL_BYTES:]
        return long_line_id(head, tail)

    def _on_line(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError as e:
            self.write(error_response(None, PARSE_ERROR, f"parse error: not JSON ({e})"))
            return
        if isinstance(msg, list):  # a batch (2025-03-26): answered as one array
            if not msg:
                self.write(error_response(None, INVALID_REQUEST, "empty batch"))
            else:
                self._pool.submit(self._batch, msg)
            return
        if isinstance(msg, dict) and msg.get("method") == "notifications/cancelled":
            params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
            if isinstance(params.get("requestId"), (str, int)):
                with self._cancel_lock:
                    self._cancelled.add(params["requestId"])
        if is_request(msg):
            self._pool.submit(self._one, msg)
        else:  # notifications and stray responses: quick, in order
            reply, _ = self.server.handle(msg, self.session, self.notify)
            if reply is not None:
                self.write(reply)

    def _one(self, msg: Dict[str, Any]) -> None:
        reply, _ = self.server.handle(msg, self.session, self.notify)
        if reply is None:
            return
        rid = msg.get("id")
        with self._cancel_lock:
            if isinstance(rid, (str, int)) and rid in self._cancelled:
                self._cancelled.discard(rid)
                return
        self.write(reply)

    def _batch(self, msgs: list) -> None:
        replies = []
        for m in msgs:
            reply, _ = self.server.handle(m, self.session, self.notify)
            if reply is not None:
                replies.append(reply)
        if replies:
            self.write(replies)  # type: ignore[arg-type]
