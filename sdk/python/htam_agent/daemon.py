"""The agent's view of htamd: a few calls, answered with the plain views of htam_agent.model.

`connect()` returns an implementation over the Python SDK (package `htam`, ZeroMQ + FlatBuffers).
Everything else in htam_agent talks to the `Daemon` interface only.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from .model import DirectionInfo, OutcomeView, SessionView, StepView, StrategyView

DEFAULT_ENDPOINT = "tcp://127.0.0.1:7878"


class DaemonError(Exception):
    """A request htamd refused or could not answer (the message names the request and why)."""


class Daemon:
    """Interface. Not thread-safe: one agent loop per instance."""

    def hello(self) -> dict:
        raise NotImplementedError

    def open_session(self, task: str, backend: str, arch: str = "", budget: int = 0,
                     client: str = "htam-agent", model: str = "",
                     session_id: int = 0) -> SessionView:
        raise NotImplementedError

    def next_step(self, session_id: int, bottleneck: str = "", full: bool = False) -> StepView:
        """`bottleneck`: the current kernel's measured class ("Memory", "Compute", "Latency",
        "Launch"; "" = let htamd decide). `full`: the full answer (memory.top_k_strategies, every
        strategy with its text) instead of the compact default (memory.listed_strategies)."""
        raise NotImplementedError

    # Submit with profile: an Ok candidate is also profiled with Nsight Compute (its diagnostics
    # carry the "ncu: <class>-bound" or "profile unavailable" line).
    profile: bool = False

    def submit(self, session_id: int, source: str, language: str, direction_id: int,
               strategy_ids: List[int], summary: str) -> OutcomeView:
        """Evaluates the candidate and waits for the outcome."""
        raise NotImplementedError

    def record(self, session_id: int, direction_id: int, strategy_ids: List[int], summary: str,
               outcome: OutcomeView, source: str = "") -> OutcomeView:
        """Reports an outcome measured elsewhere (stored as unverified)."""
        raise NotImplementedError

    def close(self, session_id: int) -> SessionView:
        raise NotImplementedError

    def directions(self) -> List[DirectionInfo]:
        raise NotImplementedError

    def strategies(self, direction_id: int = 0) -> List[StrategyView]:
        raise NotImplementedError

    # ---- helpers over the interface ----
    _direction_cache: Optional[Dict[str, int]] = None

    def direction_id(self, slug: str) -> int:
        if self._direction_cache is None or slug not in self._direction_cache:
            self._direction_cache = {d.name: d.id for d in self.directions()}
        return self._direction_cache.get(slug, 0)

    def close_connection(self) -> None:
        pass


def connect(endpoint: str = DEFAULT_ENDPOINT, timeout_s: float = 600.0,
            server_public_key: str = "", client_key_file: str = "") -> Daemon:
    """A Daemon over the Python SDK."""
    from .sdk_daemon import SdkDaemon  # the SDK (and pyzmq) only when a daemon is used
    return SdkDaemon(endpoint, timeout_s=timeout_s, server_public_key=server_public_key,
                     client_key_file=client_key_file)
