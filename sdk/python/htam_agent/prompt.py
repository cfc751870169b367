"""Builds the model prompt from a step, and reads the candidate back out of the model's reply."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Sequence

from .model import OutcomeView, Proposal, SessionView, StepView

LANGUAGE_NAME = {"cpu": "C++17 (compiled for the host CPU)", "cuda": "CUDA C++",
                 "hip": "HIP C++"}
FENCE_LANG = {"cpu": "cpp", "cuda": "cuda", "hip": "cpp"}

ABI_SUMMARY = """\
The file must `#include <htam/kernel_abi.h>` and define exactly one entry point:
  HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                    htam_stream stream);
Inputs and outputs come in the order of the specification; shapes vary between calls (read them
from the tensors, never hard-code them; htam_numel(&t) gives the element count). Inputs are
read-only, outputs must be fully written, no state may carry over between calls, all device work
goes on `stream`. Return 0 on success."""

MAX_SNIPPET = 1500
MAX_DIAG = 2000


def _clip(text: str, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + "\n... (truncated)"


@dataclass
class HistoryItem:
    step: int
    direction: str
    summary: str
    outcome: OutcomeView
    source: str = ""


SYSTEM_PROMPT = (
    "You are an expert GPU kernel performance engineer. Each turn you receive a kernel, the "
    "optimization direction to apply next and the strategies that worked for similar kernels, "
    "chosen by an organization-wide memory of optimization experience. You answer with ONE "
    "complete, self-contained source file in a single fenced code block. Correctness first: "
    "the candidate is verified on fresh random inputs, unseen shapes, NaN/Inf checks, a second "
    "run for determinism and out-of-bounds guards; then it is timed against the reference.")


def build_messages(session: SessionView, step: StepView, best_source: str, best_speedup: float,
                   history: Sequence[HistoryItem], spec_text: str = "",
                   repair: Optional[HistoryItem] = None) -> List[dict]:
    lang = LANGUAGE_NAME.get(session.backend, session.backend)
    fence = FENCE_LANG.get(session.backend, "")
    parts: List[str] = []
    parts.append(f"# Task `{session.task}` on the {session.backend} backend"
                 + (f" ({session.arch})" if session.arch else ""))
    if session.description:
        parts.append(session.description)
    if spec_text:
        parts.append("Specification:\n```json\n" + spec_text + "\n```")
    parts.append(f"Language: {lang}.\n{ABI_SUMMARY}")

    parts.append(f"# Current best kernel (speedup {best_speedup:.2f}x over the reference)\n"
                 f"```{fence}\n{best_source.rstrip()}\n```")

    d = step.direction
    parts.append(f"# Direction for step {step.step + 1}: {d}"
                 + (f" -- {step.direction_title}" if step.direction_title else ""))
    if step.direction_description:
        parts.append(step.direction_description)
    if step.why:
        parts.append("Why the memory chose it: " + step.why)

    if step.strategies:
        lines = ["# Strategies under this direction (with their evidence)"]
        for i, s in enumerate(step.strategies, 1):
            head = f"{i}. {s.name}" + (f" -- {s.title}" if s.title and s.title != s.name else "")
            lines.append(head)
            if s.description:
                lines.append(f"   what: {s.description}")
            if s.preconditions:
                lines.append("   valid when: " + "; ".join(s.preconditions))
            if s.failure_modes:
                lines.append("   known failure modes: " + "; ".join(s.failure_modes))
            lines.append(f"   evidence: used {s.uses} times, success rate {s.success_rate:.0%}, "
                         f"mean gain {s.mean_gain:+.2f} (log speedup), score {s.score:.2f}")
            if s.code_pattern:
                lines.append("   pattern:\n" + _clip(s.code_pattern, MAX_SNIPPET))
            if s.example_source:
                lines.append(f"   verified example:\n```{fence}\n"
                             f"{_clip(s.example_source, MAX_SNIPPET)}\n```")
        parts.append("\n".join(lines))
    else:
        parts.append("# Strategies\nThe memory has no strategy under this direction yet: use your "
                     "own judgement within the direction.")

    if step.prompt_context:
        parts.append("# Notes from the memory\n" + step.prompt_context)

    if history:
        lines = ["# Recent outcomes in this session (oldest first)"]
        for h in list(history)[-6:]:
            o = h.outcome
            line = f"- step {h.step + 1} [{h.direction}] {h.summary or '(no summary)'} -> {o.status}"
            if o.ok:
                line += f", {o.speedup:.2f}x"
            elif o.diagnostics:
                line += ": " + _clip(o.diagnostics.strip().splitlines()[0] if o.diagnostics.strip()
                                     else "", 200)
            lines.append(line)
        parts.append("\n".join(lines))

    if repair is not None:
        parts.append(
            f"# Your previous candidate failed ({repair.outcome.status})\n"
            f"Diagnostics:\n```\n{_clip(repair.outcome.diagnostics, MAX_DIAG)}\n```\n"
            f"Failed candidate:\n```{fence}\n{repair.source.rstrip()}\n```\n"
            "Fix the cause of this failure while keeping the optimization it attempted.")

    parts.append(
        "# Answer format\n"
        f"First line: `SUMMARY: <one line: what you changed under {d}>`.\n"
        "Second line: `STRATEGIES: <names of the strategies above that you applied, comma "
        "separated, or none>`.\n"
        f"Then the complete source file in one ```{fence} fenced block containing htam_kernel.")
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "\n\n".join(parts)}]


_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+\-.]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


def extract_code(reply: str) -> Optional[str]:
    """The candidate in a reply: the last fenced block that defines htam_kernel (models often
    show a fragment first and the full file last); an unterminated final block (reply cut off)
    counts. None when no block has htam_kernel."""
    blocks = [m.group(2) for m in _FENCE_RE.finditer(reply or "")]
    with_entry = [b for b in blocks if "htam_kernel" in b]
    if not with_entry:
        return None
    return with_entry[-1].rstrip() + "\n"


def extract_summary(reply: str) -> str:
    outside = _FENCE_RE.sub("", reply or "")
    for line in outside.splitlines():
        m = re.match(r"\s*\**summary\**\s*:\s*(.+)", line, re.I)
        if m:
            return m.group(1).strip().strip("`*")[:300]
    for line in outside.splitlines():
        line = line.strip().strip("#*` ")
        if line and not line.lower().startswith("strategies"):
            return line[:300]
    return ""


def extract_strategies(reply: str, step: StepView) -> List[int]:
    """Ids of the step's strategies that the reply says it applied."""
    outside = _FENCE_RE.sub("", reply or "")
    for line in outside.splitlines():
        m = re.match(r"\s*\**strategies\**\s*:\s*(.*)", line, re.I)
        if not m:
            continue
        named = {n.strip().strip("`*").lower() for n in re.split(r"[,;]", m.group(1))}
        ids = []
        for s in step.strategies:
            if s.name.lower() in named or (s.title and s.title.lower() in named):
                ids.append(s.id)
        return ids
    return []


def make_proposal(reply: str, step: StepView) -> Proposal:
    return Proposal(source=extract_code(reply), summary=extract_summary(reply),
                    direction=step.direction, strategy_ids=extract_strategies(reply, step))
