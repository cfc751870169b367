"""The htam Python client: htamd's protocol (ZeroMQ DEALER + FlatBuffers envelopes) as plain calls.

Replies are returned as plain ``dict`` objects whose keys are the schema's field names
(snake_case, see schema/protocol.fbs and schema/htg.fbs); strings are ``str``. A refused request
raises :class:`HtamError` (with the wire error code); no answer in time raises :class:`HtamTimeout`.

Timeouts and reconnection follow the "lazy pirate" pattern: when a request times out, the socket
is closed and opened again (so a restarted daemon is reached); requests that are safe to repeat
(hello, next_step, poll, query, status, reopening a session) are retried ``retries`` times first.

Not thread-safe: use one :class:`Client` per thread.
"""

from __future__ import annotations

import itertools
import os
import re
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

import flatbuffers
import zmq

from htam.fb import Body as _Body
from htam.fb import Bottleneck as _Bottleneck
from htam.fb import ErrorCode as _ErrorCode
from htam.fb import OutcomeStatus as _OutcomeStatus
from htam.fb import QueryKind as _QueryKind
from htam.fb.CloseSession import CloseSessionT
from htam.fb.Envelope import EnvelopeT
from htam.fb.Hello import HelloT
from htam.fb.NextStep import NextStepT
from htam.fb.OpenSession import OpenSessionT
from htam.fb.Poll import PollT
from htam.fb.Query import QueryT
from htam.fb.Record import RecordT
from htam.fb.StatusRequest import StatusRequestT
from htam.fb.Submit import SubmitT

__all__ = ["BOTTLENECK_NAMES", "Client", "HtamError", "HtamTimeout", "OUTCOME_NAMES", "QUERY_KINDS",
           "bottleneck_value", "parse_status", "read_key_file", "to_dict"]

PROTOCOL_VERSION = 1
CLIENT_VERSION = "0.1.0"
DEFAULT_ENDPOINT = "tcp://127.0.0.1:7878"


def _enum_names(cls: type) -> Dict[int, str]:
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


OUTCOME_NAMES: Dict[int, str] = _enum_names(_OutcomeStatus.OutcomeStatus)
ERROR_NAMES: Dict[int, str] = _enum_names(_ErrorCode.ErrorCode)
BODY_NAMES: Dict[int, str] = _enum_names(_Body.Body)
QUERY_KINDS: Dict[str, int] = {k.lower(): v for v, k in _enum_names(_QueryKind.QueryKind).items()}
BOTTLENECK_NAMES: Dict[int, str] = _enum_names(_Bottleneck.Bottleneck)
_OUTCOME_VALUES: Dict[str, int] = {v: k for k, v in OUTCOME_NAMES.items()}


def bottleneck_value(bottleneck: Any) -> int:
    """The wire value of a bottleneck class given by name ("Memory", "memory", "memory-bound") or
    value (schema/htg.fbs Bottleneck); None or "" is Unknown (0). ValueError for anything else."""
    if bottleneck is None or bottleneck == "":
        return 0
    if isinstance(bottleneck, int) and not isinstance(bottleneck, bool):
        if bottleneck in BOTTLENECK_NAMES:
            return bottleneck
        raise ValueError(f"no bottleneck class {bottleneck}")
    name = str(bottleneck).strip().lower()
    if name.endswith("-bound"):
        name = name[: -len("-bound")]
    for v, n in BOTTLENECK_NAMES.items():
        if n.lower() == name:
            return v
    raise ValueError(f"no bottleneck class '{bottleneck}' (one of "
                     f"{', '.join(BOTTLENECK_NAMES.values())})")


class HtamError(Exception):
    """htamd refused a request. ``code`` is the wire ErrorCode name (e.g. "NotFound", "Busy");
    ``retry_after_ms`` the daemon's hint with Busy (0: none)."""

    def __init__(self, code: str, message: str, request: str = "", retry_after_ms: int = 0):
        super().__init__(f"{request + ': ' if request else ''}{code}: {message}")
        self.code = code
        self.message = message
        self.retry_after_ms = retry_after_ms


class HtamTimeout(HtamError):
    """No answer from htamd in time (it may be down, restarting, or refusing our CURVE key)."""

    def __init__(self, message: str, request: str = ""):
        super().__init__("Timeout", message, request)


_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def to_dict(obj: Any) -> Any:
    """Turns a FlatBuffers object-API value into plain Python: dicts with snake_case keys, str."""
    if obj is None or isinstance(obj, (int, float, bool, str)):
        return obj
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    if isinstance(obj, (list, tuple)):
        return [to_dict(x) for x in obj]
    if hasattr(obj, "tolist"):  # numpy arrays, when numpy is installed
        return obj.tolist()
    if hasattr(obj, "__dict__"):
        return {_snake(k): to_dict(v) for k, v in vars(obj).items()}
    return obj


def read_key_file(path: str) -> Dict[str, str]:
    """Reads an htam-keygen file: {"public": Z85, "secret": Z85 (only in .key files)}."""
    keys: Dict[str, str] = {}
    with open(path, encoding="ascii") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            name, value = (x.strip() for x in line.split("=", 1))
            if name in ("public", "secret"):
                keys[name] = value
    if "public" not in keys:
        raise ValueError(f"{path}: no public key")
    return keys


def default_identity_secret() -> bytes:
    """The identity secret of a client made without one: HTAM_IDENTITY_SECRET (hex, 16 to 64
    bytes) where set, so that processes of one tool (an agent resuming its session after a
    restart) are one owner; else 16 fresh random bytes."""
    text = os.environ.get("HTAM_IDENTITY_SECRET", "")
    if not text:
        return os.urandom(16)
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        raise ValueError("HTAM_IDENTITY_SECRET is not hexadecimal") from None
    if not 16 <= len(secret) <= 64:
        raise ValueError("HTAM_IDENTITY_SECRET must be 16 to 64 bytes (32 to 128 hex digits)")
    return secret


_IDEMPOTENT = {"Hello", "NextStep", "Poll", "Query", "StatusRequest"}


class Client:
    """A connection to htamd.

    Args:
        endpoint: htamd's ``server.bind`` (``tcp://host:port`` or ``ipc://path``).
        timeout_s: default deadline of one request.
        retries: extra attempts for requests that are safe to repeat.
        client_name: shown in htamd's status and logs.
        server_public_key / client_public_key / client_secret_key: CURVE keys (Z85), all or none.
        server_public_key_file / client_key_file: the same from htam-keygen files.
        on_progress: called with each Progress event (a dict) of ``submit(..., progress=True)``.
        hello: perform the Hello handshake now (raises when htamd does not answer).
        identity_secret: 16 to 64 bytes sent in the Hello of every socket this client opens;
            without CURVE htamd holds sessions to it, so a reopened socket resumes this client's
            sessions and other clients cannot drive them. Default: default_identity_secret()
            (HTAM_IDENTITY_SECRET, else 16 random bytes of its own).
            Clients meant to share sessions (one tool's pool) pass the same; keep it private.
    """

    def __init__(self, endpoint: str = DEFAULT_ENDPOINT, timeout_s: float = 30.0, retries: int = 2,
                 client_name: str = "htam-python", server_public_key: str = "",
                 client_public_key: str = "", client_secret_key: str = "",
                 server_public_key_file: str = "", client_key_file: str = "",
                 on_progress: Optional[Callable[[Dict[str, Any]], None]] = None,
                 hello: bool = True, identity_secret: bytes = b""):
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.retries = retries
        self.client_name = client_name
        self.on_progress = on_progress
        if server_public_key_file:
            server_public_key = read_key_file(server_public_key_file)["public"]
        if client_key_file:
            k = read_key_file(client_key_file)
            client_public_key, client_secret_key = k["public"], k.get("secret", "")
        given = [bool(server_public_key), bool(client_public_key), bool(client_secret_key)]
        if any(given) and not all(given):
            raise ValueError("CURVE needs the server public key and the client key pair")
        self._curve = (server_public_key, client_public_key, client_secret_key) if all(given) else None
        if not identity_secret:
            identity_secret = default_identity_secret()
        if not 16 <= len(identity_secret) <= 64:
            raise ValueError("identity_secret must be 16 to 64 bytes")
        self._identity_secret = bytes(identity_secret)
        self._ctx = zmq.Context.instance()
        self._sock: Optional[zmq.Socket] = None
        self._ids = itertools.count(1)
        self._open_socket(announce=not hello)
        self.server: Dict[str, Any] = {}
        if hello:
            try:
                self.server = self.hello(timeout_s=min(timeout_s, 10.0))
            except HtamTimeout as e:
                self.close()
                raise HtamTimeout(f"htamd did not answer at {endpoint}: {e.message} (not "
                                  f"running, wrong endpoint, or CURVE key refused)",
                                  "connect") from e

    # ---- connection ----
    def _open_socket(self, announce: bool = True) -> None:
        """A new socket; ``announce`` queues a Hello on it first (its answer is skipped like any
        stray one), so htamd knows the socket as this client before its first request."""
        if self._sock is not None:
            self._sock.close(linger=0)
        s = self._ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        if self._curve:
            server, public, secret = self._curve
            s.curve_serverkey = server.encode()
            s.curve_publickey = public.encode()
            s.curve_secretkey = secret.encode()
        if self.endpoint.startswith("tcp://["):  # an IPv6 address needs IPv6 on the socket
            s.setsockopt(zmq.IPV6, 1)
        s.connect(self.endpoint)
        self._sock = s
        if announce:
            try:
                s.send(self._envelope(next(self._ids), self._hello_body(), _Body.Body.Hello),
                       zmq.NOBLOCK)
            except zmq.Again:
                pass  # no room: the request itself will say whether the socket is known

    def _hello_body(self) -> HelloT:
        m = HelloT()
        m.client = self.client_name
        m.clientVersion = CLIENT_VERSION
        m.identitySecret = list(self._identity_secret)
        return m

    @staticmethod
    def _envelope(rid: int, body: Any, body_type: int) -> bytes:
        env = EnvelopeT()
        env.version = PROTOCOL_VERSION
        env.requestId = rid
        env.bodyType = body_type
        env.body = body
        b = flatbuffers.Builder(256)
        b.Finish(env.Pack(b), file_identifier=b"HTAM")
        return bytes(b.Output())

    def close(self) -> None:
        """Closes the socket. Sessions stay in htamd and can be resumed by id."""
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- the request/reply core ----
    def _call(self, body: Any, body_type: int, timeout_s: Optional[float] = None,
              idempotent: Optional[bool] = None) -> Any:
        name = BODY_NAMES.get(body_type, str(body_type))
        if idempotent is None:
            idempotent = name in _IDEMPOTENT
        timeout = self.timeout_s if timeout_s is None else timeout_s
        attempts = 1 + (self.retries if idempotent else 0)
        for attempt in range(attempts):
            if self._sock is None:
                self._open_socket()
            rid = next(self._ids)
            deadline = time.monotonic() + timeout
            data = self._envelope(rid, body, body_type)
            reply = self._wait(rid, deadline) if self._send(data, deadline) else None
            if reply is not None and self._unknown_socket(reply) and body_type != _Body.Body.Hello:
                # The socket reconnected on its own (htamd restarted) and htamd no longer knows
                # it as this client: introduce it, then ask once more.
                self._call(self._hello_body(), _Body.Body.Hello, timeout_s)
                rid = next(self._ids)
                deadline = time.monotonic() + timeout
                data = self._envelope(rid, body, body_type)
                reply = self._wait(rid, deadline) if self._send(data, deadline) else None
            if reply is not None:
                return self._unwrap(reply, name)
            self._open_socket()  # lazy pirate: drop what is queued for a dead peer
        tries = f" ({attempts} attempts of {timeout:.1f} s)" if attempts > 1 else ""
        raise HtamTimeout(f"no answer from {self.endpoint} within {attempts * timeout:.1f} s"
                          f"{tries}", name)

    def _send(self, data: bytes, deadline: float) -> bool:
        """Queues a request; False when the socket has no connection to queue it on before the
        deadline (a DEALER whose CURVE handshake was refused drops its connection, and a blocking
        send would then wait forever)."""
        while True:
            try:
                self._sock.send(data, zmq.NOBLOCK)
                return True
            except zmq.Again:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._sock.poll(min(int(left * 1000) + 1, 50), zmq.POLLOUT)

    def _wait(self, rid: int, deadline: float) -> Optional[EnvelopeT]:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not self._sock.poll(int(left * 1000) + 1, zmq.POLLIN):
                continue
            frames = self._sock.recv_multipart()
            try:
                buf = frames[-1]
                if len(buf) < 8 or buf[4:8] != b"HTAM":
                    continue
                env = EnvelopeT.InitFromBuf(buf, _root_pos(buf))
            except Exception:  # a reply we cannot read is ignored, like a stray one
                continue
            if env.bodyType == _Body.Body.Progress:
                if self.on_progress is not None:
                    self.on_progress(to_dict(env.body))
                continue
            if env.requestId != rid:
                continue  # late answer to an earlier, timed-out request
            return env

    @staticmethod
    def _unknown_socket(env: EnvelopeT) -> bool:
        """A refusal because this socket never introduced itself (docs/protocol.md, Hello)."""
        return (env.bodyType == _Body.Body.Error
                and env.body.code == _ErrorCode.ErrorCode.Unauthorized
                and "sent no Hello" in (to_dict(env.body.message) or ""))

    @staticmethod
    def _unwrap(env: EnvelopeT, request: str) -> Any:
        if env.bodyType == _Body.Body.Error:
            err = env.body
            raise HtamError(ERROR_NAMES.get(err.code, str(err.code)),
                            to_dict(err.message) or "", request,
                            int(getattr(err, "retryAfterMs", 0) or 0))
        return env.body

    # ---- requests ----
    def hello(self, timeout_s: Optional[float] = None) -> Dict[str, Any]:
        """Protocol and server version, capabilities, backends and devices of the daemon."""
        return to_dict(self._call(self._hello_body(), _Body.Body.Hello, timeout_s))

    def open_session(self, task: str = "", backend: str = "cpu", arch: str = "", budget: int = 0,
                     model: str = "", session_id: int = 0) -> Dict[str, Any]:
        """Opens a session on a task of htamd's suite, or resumes ``session_id``.

        Returns SessionInfo: {"session": {...}, "task": {...}, "baseline_source", "best_source"}.
        """
        m = OpenSessionT()
        m.sessionId = session_id
        m.task = task
        m.backend = backend
        m.arch = arch
        m.budget = budget
        m.client = self.client_name
        m.model = model
        return to_dict(self._call(m, _Body.Body.OpenSession, idempotent=session_id != 0))

    def next_step(self, session_id: int, embedding: Optional[Sequence[float]] = None,
                  bottleneck: Any = None, full: bool = False) -> Dict[str, Any]:
        """The next direction, the strategies under it, scores, evidence, why and prompt context.

        ``bottleneck``: the bottleneck class of the session's current kernel as the client
        measured it (roofline or profiler): a name ("Memory", "Compute", "Latency", "Launch") or
        its value; htamd keys the state with it, masks directions and ranks strategies whose
        targets exclude it lower, and records it as the state before the next recorded step.
        None (default) leaves it to htamd (what it profiled for the session, else Unknown).

        ``full``: False (default) asks the compact answer (memory.listed_strategies strategies,
        the first memory.detailed_strategies with their text, the heaviest evidence, a
        prompt_context that names them); True every strategy of memory.top_k_strategies in full,
        all the evidence and their text in prompt_context too."""
        m = NextStepT()
        m.sessionId = session_id
        m.full = bool(full)
        if embedding:
            m.embedding = list(embedding)
        m.bottleneck = bottleneck_value(bottleneck)
        return to_dict(self._call(m, _Body.Body.NextStep))

    def submit(self, session_id: int, source: str, language: str = "", direction_id: int = 0,
               strategy_ids: Iterable[int] = (), summary: str = "", wait: bool = True,
               progress: bool = False, timeout_s: Optional[float] = None,
               profile: bool = False) -> Dict[str, Any]:
        """Evaluates a candidate on the session's backend.

        With ``wait`` (default) returns the Result once evaluated and recorded (``done`` is False
        if htamd's wait limit passed first: continue with :meth:`poll`). Without, returns the
        SubmitAck at once ({"job_id", "candidate_hash", "queued"}).

        With ``profile``, an Ok candidate's one call is also profiled with Nsight Compute:
        ``profile`` of the Result gets ``dram_throughput``, ``sm_throughput`` and ``occupancy``
        (fractions of peak, -1 when unknown) and the diagnostics name the bottleneck class, or
        say "profile unavailable: ..." (still Ok) where htamd has no usable ncu.
        """
        m = SubmitT()
        m.sessionId = session_id
        m.source = source
        m.language = language
        m.directionId = direction_id
        m.strategyIds = list(strategy_ids)
        m.summary = summary
        m.wait = wait
        m.progress = progress
        m.profile = profile
        reply = to_dict(self._call(m, _Body.Body.Submit, timeout_s if timeout_s is not None
                                   else (max(self.timeout_s, 600.0) if wait else None)))
        return _with_status_name(reply)

    def poll(self, job_id: int, wait_ms: int = 0) -> Dict[str, Any]:
        """The result of a submitted job; ``done`` is False while it runs. ``wait_ms`` waits on
        the daemon side for completion."""
        m = PollT()
        m.jobId = job_id
        m.waitMs = int(wait_ms)
        return _with_status_name(to_dict(self._call(m, _Body.Body.Poll,
                                                    self.timeout_s + wait_ms / 1000.0)))

    def record(self, session_id: int, direction_id: int = 0, strategy_ids: Iterable[int] = (),
               summary: str = "", status: str = "Ok", speedup_after: float = 0.0,
               median_us: float = 0.0, source: str = "") -> int:
        """Reports an outcome measured elsewhere; htamd stores its class with verified=False.
        Returns the transition id."""
        m = RecordT()
        m.sessionId = session_id
        m.directionId = direction_id
        m.strategyIds = list(strategy_ids)
        m.summary = summary
        m.status = _OUTCOME_VALUES[status] if isinstance(status, str) else int(status)
        m.speedupAfter = float(speedup_after)
        m.medianUs = float(median_us)
        m.source = source
        return int(self._call(m, _Body.Body.Record).transitionId)

    def close_session(self, session_id: int) -> Dict[str, Any]:
        """Closes a session; returns its final record."""
        m = CloseSessionT()
        m.sessionId = session_id
        return to_dict(self._call(m, _Body.Body.CloseSession)).get("session") or {}

    def query(self, kind: str, id: int = 0, direction_id: int = 0, session_id: int = 0,
              task: str = "", backend: str = "", limit: int = 100, cursor: int = 0,
              with_sources: bool = False) -> Dict[str, Any]:
        """Reads the memory. kind: directions, strategies, transitions, sessions, tasks,
        bestcandidates, edges. Returns QueryReply lists (only the asked one is filled) and
        ``next_cursor``: non-zero when the list went on past the daemon's reply budget
        (server.reply_max_bytes) or ``limit``; pass it as ``cursor`` for the next page.
        Lists carry candidate sources only ``with_sources``."""
        m = QueryT()
        m.kind = QUERY_KINDS[kind.replace("_", "").lower()]
        m.id = id
        m.directionId = direction_id
        m.sessionId = session_id
        m.task = task
        m.backend = backend
        m.limit = limit
        m.cursor = cursor
        m.withSources = with_sources
        reply = to_dict(self._call(m, _Body.Body.Query))
        out = {k: (v or []) for k, v in reply.items() if k != "next_cursor"}
        out["next_cursor"] = int(reply.get("next_cursor") or 0)
        return out

    def status(self, section: str = "") -> str:
        """htamd's INFO-style status text (sections: server, clients, memory, evaluation)."""
        m = StatusRequestT()
        m.section = section
        return to_dict(self._call(m, _Body.Body.StatusRequest)).get("text", "")


def _root_pos(buf: bytes) -> int:
    return flatbuffers.encode.Get(flatbuffers.packer.uoffset, buf, 0)


def _with_status_name(reply: Dict[str, Any]) -> Dict[str, Any]:
    if isinstance(reply, dict) and "status" in reply and isinstance(reply["status"], int):
        reply["status_name"] = OUTCOME_NAMES.get(reply["status"], str(reply["status"]))
    return reply


def parse_status(text: str) -> Dict[str, Dict[str, str]]:
    """Parses status text into {section: {key: value}}."""
    out: Dict[str, Dict[str, str]] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith("# "):
            section = line[2:].strip()
            out.setdefault(section, {})
        elif ": " in line:
            k, v = line.split(": ", 1)
            out.setdefault(section, {})[k.strip()] = v.strip()
    return out
