"""Proposers: what writes the candidate for a step.

- LLMProposer asks an OpenAI-compatible model, feeding back compile errors and wrong results.
- ReplayProposer answers from a task's lineage, as an agent would: the variant that applies the
  chosen direction to the current best, else (optionally) the next-ranked direction it has a
  variant for, else nothing. It needs no model, so the whole loop runs anywhere.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Set

from .lineage import ROOT, Lineage, Task
from .llm import ChatClient, LLMError
from .model import OutcomeView, Proposal, SessionView, StepView
from .prompt import HistoryItem, build_messages, code_marker, make_proposal


@dataclass
class AgentContext:
    """What the agent knows when it asks for a proposal."""
    session: SessionView
    best_source: str
    best_speedup: float
    history: List[HistoryItem] = field(default_factory=list)
    spec_text: str = ""
    budget_left: int = 0
    language: str = ""           # "kernelbench" (ModelNew files) or "" (the lean ABI)
    policy: Optional[dict] = None  # the task's kernelbench_policy, for language kernelbench


class Proposer:
    name = "proposer"

    def propose(self, ctx: AgentContext, step: StepView) -> Proposal:
        raise NotImplementedError

    def observe(self, proposal: Proposal, outcome: OutcomeView) -> None:
        pass


class LLMProposer(Proposer):
    """One model call per step (plus one re-ask when the reply holds no code). After a compile
    error or a wrong result, the next step repairs that candidate under its direction, with the
    diagnostics in the prompt, up to max_repairs times in a row."""

    name = "llm"

    def __init__(self, client: ChatClient, max_repairs: int = 1,
                 log: Optional[Callable[[str], None]] = None):
        self.client = client
        self.max_repairs = max_repairs
        self._log = log or (lambda m: None)
        self._repairs_in_a_row = 0
        self._last: Optional[HistoryItem] = None

    def _repair_target(self, ctx: AgentContext) -> Optional[HistoryItem]:
        last = ctx.history[-1] if ctx.history else None
        if (last is None or last.outcome.status not in ("compile_error", "incorrect",
                                                        "nondeterministic", "crash")
                or not last.source or self._repairs_in_a_row >= self.max_repairs):
            return None
        return last

    def propose(self, ctx: AgentContext, step: StepView) -> Proposal:
        repair = self._repair_target(ctx)
        messages = build_messages(ctx.session, step, ctx.best_source, ctx.best_speedup,
                                  ctx.history, spec_text=ctx.spec_text, repair=repair,
                                  language=ctx.language, policy=ctx.policy)
        tokens_in = tokens_out = 0
        for attempt in range(2):
            try:
                c = self.client.complete(messages)
            except LLMError as e:
                return Proposal(source=None, note=f"model unavailable: {e}")
            tokens_in += c.prompt_tokens
            tokens_out += c.completion_tokens
            p = make_proposal(c.text, step, ctx.language)
            p.tokens_in, p.tokens_out = tokens_in, tokens_out
            if p.source:
                if repair is not None:
                    p.direction = repair.direction
                    p.note = f"repair of step {repair.step + 1} ({repair.outcome.status})"
                    self._repairs_in_a_row += 1
                else:
                    self._repairs_in_a_row = 0
                    p.note = "model candidate"
                return p
            messages = messages + [
                {"role": "assistant", "content": c.text},
                {"role": "user", "content": "Your reply had no fenced code block defining "
                                            f"{code_marker(ctx.language)}. Answer again: SUMMARY "
                                            "line, STRATEGIES line, then the complete file in "
                                            "one fenced block."}]
        return Proposal(source=None, note="the model gave no code", tokens_in=tokens_in,
                        tokens_out=tokens_out)


class ReplayProposer(Proposer):
    """Answers from a lineage. The current node starts at the reference and moves to a replayed
    variant when it comes back correct and faster than the best so far (small timing noise
    tolerated for variants the lineage measured as improvements)."""

    name = "replay"
    NOISE = 0.95

    def __init__(self, task: Task, lineage: Lineage, fallback: bool = True,
                 rng: Optional[random.Random] = None):
        self.task = task
        self.lineage = lineage
        self.fallback = fallback
        self.rng = rng
        self.node = ROOT
        self.best_speedup = 1.0
        self.tried: Set[str] = set()

    def _candidates(self, direction: str):
        out = [v for v in self.lineage.children(self.node)
               if v.direction == direction and v.id not in self.tried]
        if self.rng is not None:
            self.rng.shuffle(out)
        return out

    def propose(self, ctx: AgentContext, step: StepView) -> Proposal:
        order = [step.direction]
        if self.fallback:
            order += [s.name for s in step.ranked_directions() if s.name not in order]
            order += [d for d in self.lineage.directions() if d not in order]
        for d in order:
            cands = self._candidates(d)
            if not cands:
                continue
            v = cands[0]
            where = "the reference" if self.node == ROOT else f"current best {self.node}"
            note = f"lineage variant {v.id} applies {d} to {where}"
            if d != step.direction:
                note += f" (no variant for the memory's choice {step.direction} here)"
            recorded = OutcomeView(status=v.status, speedup=v.speedup,
                                   best_speedup=max(self.best_speedup, v.speedup),
                                   diagnostics=f"recorded in {self.lineage.path}: "
                                               f"expected {v.expected}",
                                   median_us=float(v.measured.get("median_us", 0.0) or 0.0),
                                   verified=False)
            return Proposal(source=v.source(), summary=v.annotation(), direction=d,
                            strategy=v.strategy, variant_id=v.id, note=note, recorded=recorded)
        return Proposal(source=None, note=f"the lineage has no untried variant from "
                                          f"{self.node} under {step.direction}"
                                          + (" or any other direction" if self.fallback else ""))

    def observe(self, proposal: Proposal, outcome: OutcomeView) -> None:
        if not proposal.variant_id:
            return
        self.tried.add(proposal.variant_id)
        v = self.lineage.by_id(proposal.variant_id)
        if not outcome.ok or v is None:
            return
        # The lineage continues from this variant when it recorded an improvement, or recorded
        # nothing but expects one ("ok", not "slower"): a candidate within timing noise of the
        # best is built on, as the lineage's author did.
        parent = self.lineage.speedup_of(self.node)
        lineage_improves = v.expected == "ok" and (v.speedup > parent or v.speedup <= 0)
        if outcome.speedup > self.best_speedup or (
                lineage_improves and outcome.speedup >= self.NOISE * self.best_speedup):
            self.node = v.id
            self.best_speedup = max(self.best_speedup, outcome.speedup)
