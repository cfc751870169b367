"""The Daemon interface over the htam Python SDK (package `htam`, htam.Client)."""

from __future__ import annotations

from typing import Any, Dict, List

from .daemon import Daemon, DaemonError
from .model import (DirectionInfo, DirectionScoreView, OutcomeView, SessionView, StepView,
                    StrategyView, status_slug, status_value)


def _strategy(d: Dict[str, Any], hit: Dict[str, Any] = None) -> StrategyView:
    hit = hit or {}
    stats = d.get("stats") or {}
    uses = int(stats.get("uses", 0) or 0)
    successes = int(stats.get("successes", 0) or 0)
    mean_gain = (float(stats.get("sum_gain", 0.0) or 0.0) / successes) if successes else 0.0
    return StrategyView(
        id=int(d.get("id", 0) or 0), name=d.get("name") or "",
        direction_id=int(d.get("direction_id", 0) or 0), title=d.get("title") or "",
        description=d.get("description") or "", code_pattern=d.get("code_pattern") or "",
        preconditions=[p for p in (d.get("preconditions") or []) if p],
        failure_modes=[p for p in (d.get("failure_modes") or []) if p],
        score=float(hit.get("score", 0.0) or 0.0),
        success_rate=float(hit["success_rate"]) if "success_rate" in hit
        else (successes / uses if uses else 0.0),
        mean_gain=float(hit["mean_gain"]) if "mean_gain" in hit else mean_gain,
        uses=uses, successes=successes, example_source=hit.get("example_source") or "",
        backends=[b for b in (d.get("backends") or []) if b])


def _session(d: Dict[str, Any], info: Dict[str, Any] = None) -> SessionView:
    info = info or {}
    task = info.get("task") or {}
    return SessionView(session_id=int(d.get("id", 0) or 0), task=d.get("task_name") or "",
                       backend=d.get("backend") or "", arch=d.get("arch") or "",
                       budget=int(d.get("budget", 0) or 0),
                       description=task.get("description") or "",
                       category=task.get("category") or "",
                       baseline_source=info.get("baseline_source") or "",
                       best_source=info.get("best_source") or "",
                       best_speedup=float(d.get("best_speedup", 1.0) or 1.0))


class SdkDaemon(Daemon):
    """Over htam.Client (the Python SDK: ZeroMQ DEALER + FlatBuffers envelopes)."""

    def __init__(self, endpoint: str, timeout_s: float = 600.0, server_public_key: str = "",
                 client_key_file: str = ""):
        try:
            import htam  # the SDK, assembled in build/python by the build
        except ImportError as e:
            raise DaemonError(f"the htam Python SDK is not importable ({e}): put the build's "
                              f"python folder (build/python) on PYTHONPATH") from e
        self._sdk = htam
        keys = {}
        if server_public_key:
            keys["server_public_key"] = server_public_key
        if client_key_file:
            keys["client_key_file"] = client_key_file
        try:
            self.c = htam.Client(endpoint, timeout_s=min(timeout_s, 60.0), client_name="htam-agent",
                                 hello=False, **keys)
        except (htam.HtamError, ValueError, OSError) as e:
            raise DaemonError(f"cannot connect to {endpoint}: {e}") from e
        except Exception as e:  # zmq.ZMQError: a malformed endpoint, no CURVE support
            raise DaemonError(f"cannot connect to {endpoint}: {e}") from e
        self.eval_timeout_s = timeout_s
        self._direction_cache = None

    def _req(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except self._sdk.HtamError as e:
            raise DaemonError(str(e)) from e
        except Exception as e:  # zmq errors: transport trouble
            raise DaemonError(f"{what}: {e}") from e

    def close_connection(self) -> None:
        self.c.close()

    def hello(self) -> dict:
        return self._req("hello", self.c.hello)

    def open_session(self, task, backend, arch="", budget=0, client="htam-agent", model="",
                     session_id=0) -> SessionView:
        self.c.client_name = client
        d = self._req("open session", self.c.open_session, task=task, backend=backend, arch=arch,
                      budget=budget, model=model, session_id=session_id)
        return _session(d.get("session") or {}, d)

    def next_step(self, session_id, bottleneck: str = "", full: bool = False) -> StepView:
        d = self._req("next step", self.c.next_step, session_id, bottleneck=bottleneck or None,
                      full=full)
        direction = d.get("direction") or {}
        strategies = [_strategy(h.get("strategy") or {}, h) for h in (d.get("strategies") or [])]
        scores = [DirectionScoreView(
            id=int(s.get("direction_id", 0) or 0), name=s.get("name") or "",
            score=float(s.get("score", 0.0)), p_success=float(s.get("p_success", 0.0)),
            expected_gain=float(s.get("expected_gain", 0.0)),
            exploration=float(s.get("exploration", 0.0)), penalty=float(s.get("penalty", 0.0)),
            effective_count=float(s.get("effective_count", 0.0)),
            masked=bool(s.get("masked", False)), mask_reason=s.get("mask_reason") or "")
            for s in (d.get("scores") or [])]
        return StepView(session_id=session_id, step=int(d.get("step", 0) or 0),
                        direction_id=int(direction.get("id", 0) or 0),
                        direction=direction.get("name") or "",
                        direction_title=direction.get("title") or "",
                        direction_description=direction.get("description") or "",
                        strategies=strategies, scores=scores, why=d.get("why") or "",
                        prompt_context=d.get("prompt_context") or "")

    def submit(self, session_id, source, language, direction_id, strategy_ids,
               summary) -> OutcomeView:
        d = self._req("submit", self.c.submit, session_id, source, language=language,
                      direction_id=direction_id, strategy_ids=list(strategy_ids),
                      summary=summary, wait=True, timeout_s=self.eval_timeout_s,
                      profile=self.profile)
        while not d.get("done", True) and d.get("job_id"):
            d = self._req("poll", self.c.poll, d["job_id"], wait_ms=60000)
        return OutcomeView(status=status_slug(int(d.get("status", 7) or 0)),
                           speedup=float(d.get("speedup", 0.0) or 0.0),
                           best_speedup=float(d.get("best_speedup", 0.0) or 0.0),
                           diagnostics=d.get("diagnostics") or "",
                           median_us=float(d.get("median_us", 0.0) or 0.0),
                           baseline_us=float(d.get("baseline_us", 0.0) or 0.0),
                           transition_id=int(d.get("transition_id", 0) or 0),
                           new_strategy_id=int(d.get("new_strategy_id", 0) or 0), verified=True)

    def record(self, session_id, direction_id, strategy_ids, summary, outcome,
               source="") -> OutcomeView:
        tid = self._req("record", self.c.record, session_id, direction_id=direction_id,
                        strategy_ids=list(strategy_ids), summary=summary,
                        status=status_value(outcome.status),
                        speedup_after=float(outcome.speedup if outcome.ok else 0.0),
                        median_us=float(outcome.median_us), source=source)
        return OutcomeView(status=outcome.status, speedup=outcome.speedup,
                           best_speedup=outcome.best_speedup, diagnostics=outcome.diagnostics,
                           median_us=outcome.median_us,
                           transition_id=int(tid or 0), verified=False)

    def close(self, session_id) -> SessionView:
        return _session(self._req("close session", self.c.close_session, session_id) or {})

    def directions(self) -> List[DirectionInfo]:
        d = self._req("query directions", self.c.query, "directions", limit=1000)
        return [DirectionInfo(id=int(x.get("id", 0)), name=x.get("name") or "",
                              title=x.get("title") or "") for x in (d.get("directions") or [])]

    def strategies(self, direction_id=0) -> List[StrategyView]:
        d = self._req("query strategies", self.c.query, "strategies", direction_id=direction_id,
                      limit=10000)
        return [_strategy(x) for x in (d.get("strategies") or [])]
