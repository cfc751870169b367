"""htam-mcp's side of htamd: a pool of SDK clients (htam.Client is not thread-safe, so each
request borrows one) and the task suite on disk. Every failure to reach or use htamd becomes a
ToolError whose message a person or a model can act on.

Safe for concurrent access (the pool is locked; a borrowed client is used by one thread).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional

import htam

from .config import Config

# How long the check that something listens at the endpoint may take before the request is sent
# anyway (a connection refused answers at once; only a filtered port waits this long).
_PROBE_TIMEOUT_S = 1.0
_TASK_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


class ToolError(Exception):
    """A tool failed; the message goes back to the client as a tool result with isError."""


def check_task_name(name: str) -> str:
    if not _TASK_NAME.match(name) or name in (".", ".."):
        raise ToolError(f"bad task name {name!r}: letters, digits and -_. only")
    return name


def identity_secret(path: str) -> bytes:
    """HTAM_IDENTITY_SECRET where set; else the secret in `path` (default
    $XDG_CONFIG_HOME/htam/mcp-identity), made of 16 random bytes on first use; else, where no
    such file can be kept, 16 random bytes of this process alone."""
    if os.environ.get("HTAM_IDENTITY_SECRET"):
        return htam.default_identity_secret()
    if not path:
        base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"),
                                                                 ".config")
        path = os.path.join(base, "htam", "mcp-identity")
    try:
        with open(path, encoding="ascii") as f:
            secret = bytes.fromhex(f.readline().strip())
        if not 16 <= len(secret) <= 64:
            raise ToolError(f"{path}: an identity secret is 32 to 128 hex digits")
        return secret
    except FileNotFoundError:
        pass
    except ValueError as e:
        raise ToolError(f"{path}: not an identity secret ({e})") from e
    secret = os.urandom(16)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secret.hex() + "\n")
    except FileExistsError:  # another htam-mcp made it first
        return identity_secret(path)
    except OSError:
        pass  # nowhere to keep it: this process is its own identity
    return secret


class Htamd:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self._lock = threading.Lock()
        self._free: List[htam.Client] = []
        # One identity for every pooled client, and for every htam-mcp process sharing the
        # identity file (a host restarts its stdio server at will): without CURVE the sessions
        # one tool call opens stay this server's to drive from any later call.
        self._identity_secret = identity_secret(cfg.identity_file)

    # ---- the client pool ----
    def _new_client(self) -> htam.Client:
        try:
            return htam.Client(self.cfg.endpoint, timeout_s=self.cfg.timeout_s,
                               retries=self.cfg.retries, client_name=self.cfg.client_name,
                               server_public_key_file=self.cfg.server_key,
                               client_key_file=self.cfg.client_key,
                               identity_secret=self._identity_secret)
        except htam.HtamTimeout as e:
            raise ToolError(f"htamd is not reachable at {self.cfg.endpoint}: {e.message} (is "
                            f"htamd running there? wrong endpoint or CURVE key?)") from e
        except (OSError, ValueError) as e:  # key files, a malformed endpoint
            raise ToolError(f"cannot connect to htamd at {self.cfg.endpoint}: {e}") from e

    @contextlib.contextmanager
    def client(self, on_progress: Optional[Callable[[Dict[str, Any]], None]] = None
               ) -> Iterator[htam.Client]:
        self._check_listening()
        with self._lock:
            c = self._free.pop() if self._free else None
        if c is None:
            c = self._new_client()
        c.on_progress = on_progress
        healthy = True
        try:
            yield c
        except htam.HtamTimeout as e:
            healthy = False
            raise ToolError(f"htamd at {self.cfg.endpoint} did not answer in time ({e}); it may "
                            f"be down or restarting: try again") from e
        except htam.HtamError as e:
            raise ToolError(f"htamd refused the request: {e}") from e
        finally:
            c.on_progress = None
            if healthy:
                with self._lock:
                    self._free.append(c)
            else:
                c.close()

    def _check_listening(self) -> None:
        """Fails at once when nothing listens at the endpoint (htamd down: connection refused,
        or no ipc socket file), instead of waiting out the request's timeout: ZeroMQ would
        queue the request silently until then."""
        ep = self.cfg.endpoint
        try:
            if ep.startswith("ipc://"):
                path = ep[len("ipc://"):]
                if not os.path.exists(path):
                    raise ToolError(f"htamd is not reachable at {ep}: no socket file {path} "
                                    f"(is htamd running with server.bind = {ep}?)")
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(min(_PROBE_TIMEOUT_S, self.cfg.timeout_s))
                    s.connect(path)
            elif ep.startswith("tcp://"):
                host, _, port = ep[len("tcp://"):].rpartition(":")
                host = host.strip("[]")
                if not port.isdigit() or host in ("", "*"):
                    return  # ZeroMQ's own forms (interfaces, wildcards): left to the request
                probe_s = min(_PROBE_TIMEOUT_S, self.cfg.timeout_s)
                with socket.create_connection((host, int(port)), timeout=probe_s):
                    pass
        except ConnectionRefusedError:
            raise ToolError(f"htamd is not reachable at {ep}: connection refused (htamd is not "
                            f"running there, or listens elsewhere: see --endpoint)") from None
        except socket.timeout:
            return  # slow or filtered: the request's own timeout decides
        except OSError as e:
            raise ToolError(f"htamd is not reachable at {ep}: {e.strerror or e}") from None

    def close(self) -> None:
        with self._lock:
            for c in self._free:
                c.close()
            self._free.clear()

    # ---- the task suite on this host (optional) ----
    def suite_names(self) -> List[str]:
        d = self.cfg.tasks_dir
        if not d or not os.path.isdir(d):
            return []
        return sorted(n for n in os.listdir(d)
                      if _TASK_NAME.match(n) and os.path.isfile(os.path.join(d, n, "task.json")))

    def suite_spec(self, name: str) -> Optional[Dict[str, Any]]:
        """task.json of a task of the suite, or None when there is no suite or no such task."""
        if not self.cfg.tasks_dir:
            return None
        path = os.path.join(self.cfg.tasks_dir, check_task_name(name), "task.json")
        try:
            with open(path, encoding="utf-8") as f:
                spec = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise ToolError(f"{path}: unreadable task specification: {e}") from e
        return spec if isinstance(spec, dict) else None

    def suite_reference(self, name: str, backend: str) -> str:
        """The task's reference source for a backend (the baseline to improve), or ''."""
        spec = self.suite_spec(name) or {}
        refs = spec.get("references") or {}
        rel = refs.get(backend) if isinstance(refs, dict) else None
        if not isinstance(rel, str) or os.path.isabs(rel) or ".." in rel.split("/"):
            return ""
        try:
            with open(os.path.join(self.cfg.tasks_dir, name, rel), encoding="utf-8") as f:
                return f.read()
        except OSError:
            return ""

    def abi_header(self) -> str:
        path = self.cfg.abi_header
        if not path:
            return ""
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except OSError:
            return ""
