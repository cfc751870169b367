"""A small request/reply channel to htamd: one ZeroMQ DEALER socket, one FlatBuffers Envelope per
frame (schema/protocol.fbs), built and read through the modules flatc generates into
build/python/htam/fb. Used where the `htam` SDK package offers no client.

Tables are built from plain dicts ({"session_id": 3, "summary": "..."}: snake_case field names
as in the schema) and read back into plain dicts, so nothing here knows individual messages.
Not thread-safe: one WireChannel per thread.
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Dict, Optional, Tuple

PROTOCOL_VERSION = 1


class WireError(Exception):
    """Transport failure or an Error answer (code name and message in the text)."""

    def __init__(self, message: str, code: str = ""):
        super().__init__(message)
        self.code = code


def _camel(snake: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in snake.split("_"))


_SNAKE_RE = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(camel: str) -> str:
    return _SNAKE_RE.sub("_", camel).lower()


def _fb(name: str):
    try:
        return importlib.import_module(f"htam.fb.{name}")
    except ImportError as e:
        raise WireError(f"the generated FlatBuffers module htam.fb.{name} is missing: put the "
                        f"build's python folder (build/python) on PYTHONPATH ({e})") from e


# Element type of the vectors clients send, by field name (everything else is a scalar,
# a string or a nested table).
_VECTOR_PREPEND = {"strategy_ids": "PrependUint64", "embedding": "PrependFloat32"}


def build_table(builder, type_name: str, fields: Dict[str, Any]) -> int:
    """Builds table `type_name` from a dict; nested tables as (type_name, dict) tuples."""
    mod = _fb(type_name)
    prepared = []
    for key, value in fields.items():
        if value is None:
            continue
        if isinstance(value, str):
            value = builder.CreateString(value)
        elif isinstance(value, (bytes, bytearray)):
            value = builder.CreateString(bytes(value))
        elif isinstance(value, tuple):
            value = build_table(builder, value[0], value[1])
        elif isinstance(value, list):
            getattr(mod, f"{type_name}Start{_camel(key)}Vector")(builder, len(value))
            prepend = getattr(builder, _VECTOR_PREPEND.get(key, "PrependUint64"))
            for x in reversed(value):
                prepend(x)
            value = builder.EndVector()
        prepared.append((key, value))
    getattr(mod, f"{type_name}Start")(builder)
    for key, value in prepared:
        getattr(mod, f"{type_name}Add{_camel(key)}")(builder, value)
    return getattr(mod, f"{type_name}End")(builder)


_SKIP = ("Init", "GetRootAs")


def to_dict(obj) -> Dict[str, Any]:
    """Every field of a generated table (or struct) object, recursively, as a dict."""
    out: Dict[str, Any] = {}
    cls = type(obj)
    for name in dir(cls):
        if (name.startswith("_") or name.startswith(_SKIP) or name.endswith("AsNumpy")
                or name.endswith("IsNone") or name.endswith("Length")
                or name.endswith("BufferHasIdentifier") or name.endswith("Type")
                and name != "Type"):
            continue
        fn = getattr(obj, name)
        code = getattr(getattr(fn, "__func__", None), "__code__", None)
        if code is None:
            continue
        nargs = code.co_argcount - 1
        if nargs == 0:
            out[_snake(name)] = _value(fn())
        elif nargs == 1 and hasattr(obj, name + "Length"):
            n = getattr(obj, name + "Length")()
            out[_snake(name)] = [_value(fn(j)) for j in range(n)]
    return out


def _value(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if hasattr(v, "_tab") and not type(v).__name__ == "Table":
        return to_dict(v)
    return v


class WireChannel:
    """DEALER socket to htamd; request() sends one Envelope and waits for its answer."""

    def __init__(self, endpoint: str, timeout_s: float = 600.0, server_public_key: str = "",
                 client_key_file: str = "", client_name: str = "htam-agent"):
        import zmq  # python3-zmq (Debian)
        self._zmq = zmq
        self.endpoint = endpoint
        self.timeout_ms = int(timeout_s * 1000)
        self._ctx = zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        if server_public_key:
            public, secret = _read_client_keys(client_key_file) if client_key_file \
                else zmq.curve_keypair()
            self._sock.curve_serverkey = server_public_key.encode()
            self._sock.curve_publickey = public
            self._sock.curve_secretkey = secret
        self._sock.connect(endpoint)
        self._next_id = 1
        self._body = _fb("Body").Body
        self._body_names = {v: k for k, v in vars(self._body).items()
                            if not k.startswith("_") and isinstance(v, int)}

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close(0)
            self._sock = None

    def request(self, body: str, fields: Dict[str, Any],
                timeout_ms: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        import flatbuffers
        if self._sock is None:
            raise WireError("channel closed")
        rid = self._next_id
        self._next_id += 1
        b = flatbuffers.Builder(1024 + sum(len(v) for v in fields.values() if isinstance(v, str)))
        body_off = build_table(b, body, fields)
        env = _fb("Envelope")
        env.EnvelopeStart(b)
        env.EnvelopeAddVersion(b, PROTOCOL_VERSION)
        env.EnvelopeAddRequestId(b, rid)
        env.EnvelopeAddBodyType(b, getattr(self._body, body))
        env.EnvelopeAddBody(b, body_off)
        b.Finish(env.EnvelopeEnd(b), file_identifier=b"HTAM")
        self._sock.send(bytes(b.Output()))
        wait = self.timeout_ms if timeout_ms is None else timeout_ms
        while True:
            if not self._sock.poll(wait):
                raise WireError(f"no answer from {self.endpoint} within {wait / 1000:.0f}s "
                                f"({body})", code="Timeout")
            frames = self._sock.recv_multipart()
            payload = frames[-1]
            name, data, got_id = self._decode(payload)
            if got_id != rid or name == "Progress":
                continue  # a stale answer or a progress event: not ours to return
            if name == "Error":
                code = data.get("code", 0)
                code_name = _enum_name("ErrorCode", code)
                raise WireError(f"{body}: {code_name}: {data.get('message', '')}", code=code_name)
            return name, data

    def _decode(self, payload: bytes):
        env_mod = _fb("Envelope")
        env = env_mod.Envelope.GetRootAs(payload, 0)
        kind = env.BodyType()
        name = self._body_names.get(kind, "")
        table = env.Body()
        if not name or table is None:
            return name, {}, env.RequestId()
        cls = getattr(_fb(name), name)
        obj = cls()
        obj.Init(table.Bytes, table.Pos)
        return name, to_dict(obj), env.RequestId()


def _enum_name(enum: str, value: int) -> str:
    cls = getattr(_fb(enum), enum)
    for k, v in vars(cls).items():
        if v == value and not k.startswith("_"):
            return k
    return str(value)


def _read_client_keys(path: str):
    """A key pair file written by htam-keygen: the two Z85 keys (public first), 40 chars each."""
    with open(path, encoding="utf-8") as f:
        keys = re.findall(r"(?<![A-Za-z0-9.\-:+=^!/*?&<>()\[\]{}@%$#])[0-9A-Za-z.\-:+=^!/*?&<>()"
                          r"\[\]{}@%$#]{40}(?![0-9A-Za-z.\-:+=^!/*?&<>()\[\]{}@%$#])", f.read())
    if len(keys) < 2:
        raise WireError(f"{path}: expected a public and a secret Z85 key")
    return keys[0].encode(), keys[1].encode()
