"""The agent loop: open a session, then per step ask the memory, propose, evaluate, show; close.

    open session -> loop { NextStep -> propose candidate -> Submit (wait) -> show outcome }
                 -> close -> final table

With `recorded=True` a proposal carrying a known outcome (the replay proposer) is reported with
Record (unverified) instead of being evaluated: the loop then needs no backend at all.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional

from .daemon import Daemon, DaemonError
from .lineage import LANGUAGE_OF_BACKEND
from .model import OutcomeView, Proposal, SessionView, StepView
from .prompt import HistoryItem
from .proposers import AgentContext, Proposer


@dataclass
class StepRow:
    step: int
    chosen: str                 # the memory's direction
    direction: str              # the direction the candidate applied
    why: str
    strategies: List[str]
    summary: str
    note: str
    status: str                 # outcome slug, or "skipped" when nothing was proposed
    speedup: float
    best_speedup: float
    seconds: float
    tokens_in: int = 0
    tokens_out: int = 0
    variant: str = ""
    transition_id: int = 0


@dataclass
class SessionReport:
    session_id: int
    task: str
    backend: str
    budget: int
    rows: List[StepRow] = field(default_factory=list)
    best_speedup: float = 1.0
    closed: bool = False

    @property
    def steps_to_best(self) -> int:
        for r in self.rows:
            if r.best_speedup >= self.best_speedup - 1e-9 and self.best_speedup > 1.0:
                return r.step + 1
        return 0

    @property
    def failures(self) -> int:
        return sum(1 for r in self.rows if r.status not in ("ok", "skipped", "unverified"))


# A model that gives no candidate this many steps in a row (endpoint down, replies without
# code) ends the session instead of spending the rest of the budget.
MAX_EMPTY_STEPS = 2


def _fmt_speedup(x: float) -> str:
    return f"{x:.2f}x" if x > 0 else "-"


def _resolve_direction(daemon: Daemon, step: StepView, slug: str) -> int:
    if not slug or slug == step.direction:
        return step.direction_id
    for s in step.scores:
        if s.name == slug and s.id:
            return s.id
    return daemon.direction_id(slug) or step.direction_id


def show_step_header(out, step: StepView, budget: int) -> None:
    out(f"\n-- step {step.step + 1}/{budget}: direction {step.direction}")
    if step.why:
        out(f"   why: {step.why.strip().splitlines()[0][:300]}")
    top = step.ranked_directions()[:3]
    if top:
        out("   scores: " + ", ".join(f"{s.name} {s.score:.2f}" for s in top))
    if step.strategies:
        out("   strategies: " + "; ".join(
            f"{s.name} (used {s.uses}, success {s.success_rate:.0%}, gain {s.mean_gain:+.2f})"
            for s in step.strategies[:3]))
    else:
        out("   strategies: none known under this direction yet")


def run_session(daemon: Daemon, task: str, backend: str, proposer: Proposer, budget: int,
                arch: str = "", model: str = "", client: str = "htam-agent", recorded: bool = False,
                spec_text: str = "", out: Callable[[str], None] = print,
                session_id: int = 0, language: str = "", start_source: str = "",
                policy: Optional[dict] = None) -> SessionReport:
    """language "" submits the backend's lean-ABI language; "kernelbench" submits ModelNew files,
    starting from start_source (the problem with Model renamed: the daemon's baseline_source is
    a lean-ABI reference, which a KernelBench task does not have) under the task's policy."""
    info: SessionView = daemon.open_session(task, backend, arch=arch, budget=budget,
                                            client=client, model=model, session_id=session_id)
    out(f"session {info.session_id}: task {info.task} on {info.backend}"
        + (f" ({info.arch})" if info.arch else "") + f", budget {budget} steps, proposer "
        f"{proposer.name}{', recorded outcomes' if recorded else ''}"
        + (", ModelNew candidates (language kernelbench)" if language else ""))
    report = SessionReport(session_id=info.session_id, task=info.task or task,
                           backend=info.backend or backend, budget=budget)
    best_source = info.best_source or start_source or info.baseline_source
    best_speedup = max(1.0, info.best_speedup or 1.0)
    history: List[HistoryItem] = []
    prompt_language = language
    language = language or LANGUAGE_OF_BACKEND.get(backend, backend)
    empty_in_a_row = 0
    try:
        for i in range(budget):
            t0 = time.monotonic()
            step = daemon.next_step(info.session_id)
            show_step_header(out, step, budget)
            ctx = AgentContext(session=info, best_source=best_source, best_speedup=best_speedup,
                               history=history, spec_text=spec_text, budget_left=budget - i,
                               language=prompt_language, policy=policy)
            proposal: Proposal = proposer.propose(ctx, step)
            if proposal.source is None and proposal.recorded is None:
                out(f"   nothing to propose: {proposal.note}")
                report.rows.append(StepRow(i, step.direction, step.direction, step.why, [], "",
                                           proposal.note, "skipped", 0.0, best_speedup,
                                           time.monotonic() - t0, proposal.tokens_in,
                                           proposal.tokens_out))
                if proposer.name == "replay":
                    out("   the replay proposer has nothing left to try: stopping early")
                    break
                empty_in_a_row += 1
                if empty_in_a_row >= MAX_EMPTY_STEPS:
                    out(f"   {empty_in_a_row} steps in a row without a candidate: stopping early")
                    break
                continue
            empty_in_a_row = 0
            direction_id = _resolve_direction(daemon, step, proposal.direction)
            out(f"   candidate: {proposal.summary[:160] or '(no summary)'}")
            if proposal.note:
                out(f"   ({proposal.note})")
            if recorded and proposal.recorded is not None:
                outcome = daemon.record(info.session_id, direction_id, proposal.strategy_ids,
                                        proposal.summary, proposal.recorded, proposal.source or "")
            else:
                outcome = daemon.submit(info.session_id, proposal.source or "", language,
                                        direction_id, proposal.strategy_ids, proposal.summary)
            proposer.observe(proposal, outcome)
            if outcome.ok and outcome.speedup > best_speedup:
                best_speedup = outcome.speedup
                best_source = proposal.source or best_source
            best_speedup = max(best_speedup, outcome.best_speedup if outcome.ok else 0.0)
            history.append(HistoryItem(step=i, direction=proposal.direction or step.direction,
                                       summary=proposal.summary, outcome=outcome,
                                       source=proposal.source or ""))
            line = f"   outcome: {outcome.status}"
            if outcome.ok:
                line += f", speedup {_fmt_speedup(outcome.speedup)}"
            line += f", best {_fmt_speedup(best_speedup)}"
            if outcome.new_strategy_id:
                line += f", new strategy #{outcome.new_strategy_id}"
            out(line)
            if not outcome.ok and outcome.diagnostics:
                first = outcome.diagnostics.strip().splitlines()
                out(f"   diagnostics: {first[0][:200] if first else ''}")
            elif outcome.ok and getattr(daemon, "profile", False):
                for pl in outcome.diagnostics.splitlines():
                    if pl.startswith(("ncu: ", "profile unavailable")):
                        out(f"   profile: {pl[:200]}")
            report.rows.append(StepRow(
                i, step.direction, proposal.direction or step.direction, step.why,
                [s.name for s in step.strategies[:3]], proposal.summary, proposal.note,
                outcome.status, outcome.speedup if outcome.ok else 0.0, best_speedup,
                time.monotonic() - t0, proposal.tokens_in, proposal.tokens_out,
                proposal.variant_id, outcome.transition_id))
    finally:
        try:
            closed = daemon.close(info.session_id)
            report.closed = True
            best_speedup = max(best_speedup, closed.best_speedup or 0.0)
        except DaemonError as e:
            out(f"warning: could not close session {info.session_id}: {e}")
    report.best_speedup = best_speedup
    return report


def final_table(report: SessionReport) -> str:
    head = ["step", "memory chose", "applied", "candidate", "outcome", "speedup", "best"]
    rows = []
    for r in report.rows:
        cand = r.variant + (": " if r.variant and r.summary else "") + (r.summary or r.note)
        cand = cand if len(cand) <= 48 else cand[:45] + "..."
        rows.append([str(r.step + 1), r.chosen, r.direction if r.direction != r.chosen else "=",
                     cand, r.status, _fmt_speedup(r.speedup), _fmt_speedup(r.best_speedup)])
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    tokens_in = sum(r.tokens_in for r in report.rows)
    tokens_out = sum(r.tokens_out for r in report.rows)
    lines.append("")
    lines.append(f"task {report.task} on {report.backend}: best speedup "
                 f"{report.best_speedup:.2f}x after {len(report.rows)} steps"
                 + (f" (reached at step {report.steps_to_best})" if report.steps_to_best else "")
                 + f", {report.failures} failed")
    if tokens_in or tokens_out:
        lines.append(f"model tokens: {tokens_in} in, {tokens_out} out")
    lines.append(f"session {report.session_id}: inspect it with `htam trajectory "
                 f"{report.session_id}`")
    return "\n".join(lines)


def eprint(msg: str) -> None:
    print(msg, file=sys.stderr)
