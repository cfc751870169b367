"""Builds the model prompt from a step, and reads the candidate back out of the model's reply."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Sequence

from .model import OutcomeView, Proposal, SessionView, StepView, StrategyView

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

# Language "kernelbench": a KernelBench ModelNew file (docs/backends.md, "ModelNew candidates").
KERNELBENCH = "kernelbench"
MODELNEW_LANGUAGE_NAME = "Python (a KernelBench ModelNew file)"

MODELNEW_SUMMARY = """\
The file is a Python module that defines `class ModelNew(nn.Module)`:
- `ModelNew.__init__` takes the same arguments as the problem's `Model.__init__` (it is built as
  `ModelNew(*get_init_inputs())` under the seed `Model` was built with: create layers and
  parameters in the same order as `Model` so they get the same values).
- `ModelNew.forward` takes what `Model.forward` takes (`get_inputs()`, in order) and returns the
  same outputs (count, dtype, shape, values within the task's tolerance).
- Do not derive from `Model`, build it or call it; the file does not need `get_inputs` or
  `get_init_inputs`.
Custom kernels, one of:
- CUDA through `import htam; ext = htam.load_cuda(NAME, CUDA_SOURCE, FUNCTIONS)` (compiles with
  nvcc alone, seconds instead of a minute). FUNCTIONS lists C++ declarations of host functions
  defined in the source (not `__global__` kernels: the function that launches them), for example
  `"void relu(const float* x, float* y, long long n, cudaStream_t stream)"`. A pointer parameter
  takes a contiguous CUDA tensor of that dtype (`float` f32, `__half` f16, `__nv_bfloat16` bf16,
  `int` i32, `long long` i64, ...); a scalar parameter takes a Python number; a last
  `cudaStream_t` parameter is filled in by htam with PyTorch's current stream and is NOT passed:
  `y = torch.empty_like(x); ext.relu(x, y, x.numel())`. Return `void`, a scalar or
  `cudaError_t`. No templates, references, default arguments, `std::` types or `torch::Tensor`
  in the declarations. Optional keywords: extra_cuda_cflags, extra_cflags, extra_ldflags,
  extra_include_paths, cpp_sources.
- `torch.utils.cpp_extension.load_inline(name=..., cpp_sources=..., cuda_sources=...,
  functions=[...])` (C++ on the cpu backend, CUDA on cuda; sources without PyTorch headers whose
  functions follow the convention above take the same fast path).
- Triton (`@triton.jit`) on the cuda backend.
Rules the verifier enforces (a violation is rejected as Incorrect, or a CompileError when the
file does not parse):
- no try/except that falls back to PyTorch or to the reference when a kernel fails;
- no side streams (`torch.cuda.Stream`, `cudaStreamCreate`, launches on a stream other than the
  current one), no threads or subprocesses;
- no caching of results between calls (every call computes from its inputs; inputs are never
  modified);
- no patching of `torch`, `time` or `triton`, no `exec`/`eval`/`importlib`;
- the task's policy on PyTorch operators below (checked in the source and at run time)."""

POLICY_WORDS = {"forbid": "forbidden", "warn": "allowed (reported as a warning)",
                "allow": "allowed"}
POLICY_WHAT = [("torch_ops", "PyTorch compute operators in forward (torch.matmul, x.relu(), "
                             "@, reductions, ...)"),
               ("layers", "torch.nn layers (nn.Conv2d, nn.Linear, ...)"),
               ("functional", "torch.nn.functional calls")]


# kb_static.py's defaults for a task without "kernelbench_policy" (KernelBench's own rules).
DEFAULT_POLICY = {"functional": "warn", "layers": "warn", "torch_ops": "warn",
                  "streams": "warn", "precision": "warn", "require_kernel": True}


def policy_lines(policy: Optional[dict]) -> str:
    """The task's kernelbench_policy as rules the model can follow."""
    p = dict(DEFAULT_POLICY)
    p.update(policy or {})
    lines = ["The task's policy on PyTorch operators:"]
    for key, what in POLICY_WHAT:
        lines.append(f"- {what}: {POLICY_WORDS.get(str(p.get(key)), str(p.get(key)))}")
    if p.get("require_kernel", True):
        lines.append("- the file must define at least one custom kernel (htam.load_cuda, "
                     "load_inline or Triton)")
    else:
        lines.append("- a custom kernel is not required")
    return "\n".join(lines)


def _example_fence(example: str, fence: str, backend: str) -> str:
    """A strategy's example keeps its own language: the memory's examples are mostly lean-ABI
    kernels, whose device code a ModelNew file can compile through htam.load_cuda."""
    if fence == "python" and not _MODELNEW_RE.search(example):
        return FENCE_LANG.get(backend, "")
    return fence


def modelnew_backend_note(backend: str) -> str:
    if backend == "cuda":
        return ""
    return (f"\nOn the {backend} backend there is no CUDA device: write custom kernels in C++ "
            "through load_inline (cpp_sources and functions); htam.load_cuda and Triton need "
            "the cuda backend.")


def code_marker(language: str) -> str:
    """What the candidate's code block must contain."""
    return "class ModelNew" if language == KERNELBENCH else "htam_kernel"


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


def is_compact(s: StrategyView) -> bool:
    """A compact entry of the daemon's list (ranked past memory.detailed_strategies): name,
    title and statistics, nothing to read beyond them."""
    return not (s.description or s.code_pattern or s.preconditions or s.failure_modes
                or s.example_source)


def build_messages(session: SessionView, step: StepView, best_source: str, best_speedup: float,
                   history: Sequence[HistoryItem], spec_text: str = "",
                   repair: Optional[HistoryItem] = None, language: str = "",
                   policy: Optional[dict] = None) -> List[dict]:
    """language: "kernelbench" for ModelNew files (policy: the task's kernelbench_policy), else
    the backend's lean-ABI language."""
    modelnew = language == KERNELBENCH
    lang = MODELNEW_LANGUAGE_NAME if modelnew else LANGUAGE_NAME.get(session.backend,
                                                                     session.backend)
    fence = "python" if modelnew else FENCE_LANG.get(session.backend, "")
    parts: List[str] = []
    parts.append(f"# Task `{session.task}` on the {session.backend} backend"
                 + (f" ({session.arch})" if session.arch else ""))
    if session.description:
        parts.append(session.description)
    if spec_text:
        parts.append("Specification:\n```json\n" + spec_text + "\n```")
    if modelnew:
        parts.append(f"Language: {lang}.\n{MODELNEW_SUMMARY}"
                     f"{modelnew_backend_note(session.backend)}\n{policy_lines(policy)}")
    else:
        parts.append(f"Language: {lang}.\n{ABI_SUMMARY}")

    what = "ModelNew file" if modelnew else "kernel"
    over = "PyTorch eager" if modelnew else "the reference"
    parts.append(f"# Current best {what} (speedup {best_speedup:.2f}x over {over})\n"
                 f"```{fence}\n{best_source.rstrip()}\n```")

    d = step.direction
    parts.append(f"# Direction for step {step.step + 1}: {d}"
                 + (f" -- {step.direction_title}" if step.direction_title else ""))
    if step.direction_description:
        parts.append(step.direction_description)
    if step.why:
        parts.append("Why the memory chose it: " + step.why)

    if step.strategies:
        detailed = [s for s in step.strategies if not is_compact(s)]
        compact = [s for s in step.strategies if is_compact(s)]
        lines = ["# Strategies under this direction (with their evidence)"]
        for i, s in enumerate(detailed, 1):
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
                ex_fence = _example_fence(s.example_source, fence, session.backend)
                lines.append(f"   verified example:\n```{ex_fence}\n"
                             f"{_clip(s.example_source, MAX_SNIPPET)}\n```")
        if compact:  # past the daemon's memory.detailed_strategies: one line each
            lines.append("\n# Other strategies that worked in similar states (name: title)")
            lines.extend(f"- {s.name}: {s.title or s.name}" for s in compact)
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
        f"Then the complete source file in one ```{fence} fenced block containing "
        f"{code_marker(language)}.")
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "\n\n".join(parts)}]


_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+\-.]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


_MODELNEW_RE = re.compile(r"^class[ \t]+ModelNew\b", re.M)


def _has_entry(block: str, language: str) -> bool:
    if language == KERNELBENCH:
        return _MODELNEW_RE.search(block) is not None
    return "htam_kernel" in block


def extract_code(reply: str, language: str = "") -> Optional[str]:
    """The candidate in a reply: the last fenced block that defines the entry point (htam_kernel;
    for language "kernelbench" a top-level `class ModelNew`) -- models often show a fragment
    first and the full file last; an unterminated final block (reply cut off) counts. None when
    no block has it."""
    blocks = [m.group(2) for m in _FENCE_RE.finditer(reply or "")]
    with_entry = [b for b in blocks if _has_entry(b, language)]
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


def make_proposal(reply: str, step: StepView, language: str = "") -> Proposal:
    return Proposal(source=extract_code(reply, language), summary=extract_summary(reply),
                    direction=step.direction, strategy_ids=extract_strategies(reply, step))
