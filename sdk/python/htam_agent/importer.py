"""Lineage import: walks a task's known variants through the daemon so the memory learns them.

Each variant is submitted (wait) in a session on its task, every variant after its parent, with
its direction, the strategy slug at the head of its one-line summary and its annotation (what
changed and why), so the memory records a transition and learns (or strengthens) a named skill:
its intent, where it applied, its effect, and -- from the lineage's dead ends -- its failure
modes. Where the backend is not present (CUDA lineages on a host without a GPU), `recorded=True`
reports the lineage's measured outcomes with Record instead (stored as unverified).

Order within a session: the daemon measures a step against the session's best so far, so the
walk is depth-first, and at each variant the children that do not lead to the lineage's best go
first (dead ends, slower variants), the child on the path to the best last. For a chain with
side branches, every step is then measured against its own parent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from .daemon import Daemon, DaemonError
from .lineage import LANGUAGE_OF_BACKEND, ROOT, Lineage, Task, Variant
from .model import OutcomeView


def walk_order(lineage: Lineage) -> List[Variant]:
    best = lineage.best()
    on_path = set(lineage.ancestors(best.id)) if best else set()

    def key(v: Variant):
        return (v.id in on_path, v.ok, v.speedup)

    out: List[Variant] = []
    seen = set()

    def visit(node: str) -> None:
        for v in sorted(lineage.children(node), key=key):
            if v.id in seen:
                continue
            seen.add(v.id)
            out.append(v)
            visit(v.id)

    visit(ROOT)
    out.extend(v for v in lineage.variants if v.id not in seen)  # orphans last
    return out


@dataclass
class ImportedStep:
    task: str
    backend: str
    variant: str
    direction: str
    strategy: str
    expected: str
    status: str
    speedup: float
    transition_id: int
    agrees: bool
    note: str = ""


@dataclass
class ImportReport:
    steps: List[ImportedStep] = field(default_factory=list)
    skipped: List[str] = field(default_factory=list)
    sessions: List[int] = field(default_factory=list)

    @property
    def disagreements(self) -> List[ImportedStep]:
        return [s for s in self.steps if not s.agrees]


def _agrees(v: Variant, outcome: OutcomeView) -> bool:
    if v.expected in ("ok", "slower"):
        return outcome.ok
    return not outcome.ok


def import_task(daemon: Daemon, task: Task, backends: Optional[List[str]] = None,
                recorded: bool = False, out: Callable[[str], None] = print,
                report: Optional[ImportReport] = None, model: str = "") -> ImportReport:
    report = report or ImportReport()
    strategy_cache: Dict[int, Dict[str, int]] = {}
    for backend, lineage in sorted(task.lineages.items()):
        if backends and backend not in backends:
            continue
        order = walk_order(lineage)
        if not order:
            continue
        mode = "recorded" if recorded else "verified"
        try:
            session = daemon.open_session(task.name, backend, budget=len(order),
                                          client="htam-agent import-lineage", model=model)
        except DaemonError as e:
            report.skipped.append(f"{task.name}/{backend}: {e}")
            out(f"{task.name} [{backend}]: cannot open a session: {e}")
            continue
        report.sessions.append(session.session_id)
        out(f"{task.name} [{backend}]: importing {len(order)} variants ({mode}), "
            f"session {session.session_id}")
        try:
            for v in order:
                _import_variant(daemon, session.session_id, task, backend, v, recorded,
                                strategy_cache, report, out)
        finally:
            try:
                daemon.close(session.session_id)
            except DaemonError as e:
                out(f"  warning: closing session {session.session_id}: {e}")
    return report


def _strategy_ids(daemon: Daemon, direction_id: int, slug: str,
                  cache: Dict[int, Dict[str, int]]) -> List[int]:
    if direction_id not in cache:
        try:
            cache[direction_id] = {s.name: s.id for s in daemon.strategies(direction_id)}
        except DaemonError:
            cache[direction_id] = {}
    sid = cache[direction_id].get(slug)
    return [sid] if sid else []


def _import_variant(daemon: Daemon, session_id: int, task: Task, backend: str, v: Variant,
                    recorded: bool, cache, report: ImportReport, out) -> None:
    label = f"  {v.id} [{v.direction} / {v.strategy}]"
    direction_id = daemon.direction_id(v.direction)
    if not direction_id:
        report.skipped.append(f"{task.name}/{backend}/{v.id}: unknown direction {v.direction}")
        out(f"{label}: skipped, the daemon knows no direction '{v.direction}'")
        return
    try:
        source = v.source()
    except OSError as e:
        report.skipped.append(f"{task.name}/{backend}/{v.id}: {e}")
        out(f"{label}: skipped, {e}")
        return
    sids = _strategy_ids(daemon, direction_id, v.strategy, cache)
    try:
        if recorded:
            if v.ok and v.speedup <= 0:
                report.skipped.append(f"{task.name}/{backend}/{v.id}: no measured speedup")
                out(f"{label}: skipped, the lineage has no measured outcome to record")
                return
            known = OutcomeView(status=v.status, speedup=v.speedup,
                                median_us=float(v.measured.get("median_us", 0.0) or 0.0),
                                verified=False)
            outcome = daemon.record(session_id, direction_id, sids, v.annotation(), known, source)
        else:
            outcome = daemon.submit(session_id, source, LANGUAGE_OF_BACKEND.get(backend, backend),
                                    direction_id, sids, v.annotation())
    except DaemonError as e:
        report.skipped.append(f"{task.name}/{backend}/{v.id}: {e}")
        out(f"{label}: refused: {e}")
        return
    agrees = _agrees(v, outcome)
    step = ImportedStep(task.name, backend, v.id, v.direction, v.strategy, v.expected,
                        outcome.status, outcome.speedup if outcome.ok else 0.0,
                        outcome.transition_id, agrees)
    report.steps.append(step)
    line = f"{label}: {outcome.status}"
    if outcome.ok:
        line += f" {outcome.speedup:.2f}x"
    line += f" (lineage: {v.expected}"
    if v.speedup:
        line += f" {v.speedup:.2f}x"
    line += ")"
    if not agrees:
        line += "  <-- differs from the lineage"
        if outcome.diagnostics:
            line += "\n      " + outcome.diagnostics.strip().splitlines()[0][:200]
    if outcome.new_strategy_id:
        line += f"  learned strategy #{outcome.new_strategy_id}"
    out(line)
