"""Plain views of what the daemon answers, independent of the wire types.

The agent, the proposers and the benchmark work on these; htam_agent.daemon converts the SDK's
answers into them. Outcome classes are slugs of the OutcomeStatus enum in schema/htg.fbs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

# OutcomeStatus enum values (schema/htg.fbs), in order.
STATUS_SLUGS = ["ok", "compile_error", "crash", "timeout", "resource_limit", "incorrect",
                "nondeterministic", "infra_error", "unverified"]
FAILURE_SLUGS = {"compile_error", "crash", "timeout", "resource_limit", "incorrect",
                 "nondeterministic"}


def status_slug(value) -> str:
    """OutcomeStatus (int or name, any case) -> slug; unknown -> 'infra_error'."""
    if isinstance(value, int):
        return STATUS_SLUGS[value] if 0 <= value < len(STATUS_SLUGS) else "infra_error"
    text = str(value)
    # CamelCase names from the schema ("CompileError") or slugs already.
    out = ""
    for i, ch in enumerate(text):
        if ch.isupper() and i > 0 and text[i - 1] != "_":
            out += "_"
        out += ch.lower()
    return out if out in STATUS_SLUGS else "infra_error"


def status_value(slug: str) -> int:
    return STATUS_SLUGS.index(slug) if slug in STATUS_SLUGS else STATUS_SLUGS.index("infra_error")


@dataclass
class StrategyView:
    id: int = 0
    name: str = ""
    direction_id: int = 0
    title: str = ""
    description: str = ""
    code_pattern: str = ""
    preconditions: List[str] = field(default_factory=list)
    failure_modes: List[str] = field(default_factory=list)
    score: float = 0.0
    success_rate: float = 0.0
    mean_gain: float = 0.0
    uses: int = 0
    successes: int = 0
    example_source: str = ""
    backends: List[str] = field(default_factory=list)


@dataclass
class DirectionScoreView:
    id: int = 0
    name: str = ""
    score: float = 0.0
    p_success: float = 0.0
    expected_gain: float = 0.0
    exploration: float = 0.0
    penalty: float = 0.0
    effective_count: float = 0.0
    masked: bool = False
    mask_reason: str = ""


@dataclass
class StepView:
    session_id: int
    step: int
    direction_id: int
    direction: str                       # slug
    direction_title: str = ""
    direction_description: str = ""
    strategies: List[StrategyView] = field(default_factory=list)
    scores: List[DirectionScoreView] = field(default_factory=list)
    why: str = ""
    prompt_context: str = ""

    def ranked_directions(self) -> List[DirectionScoreView]:
        """Unmasked directions, best score first (the chosen one is normally first)."""
        return sorted((s for s in self.scores if not s.masked), key=lambda s: -s.score)


@dataclass
class OutcomeView:
    status: str                          # slug
    speedup: float = 0.0                 # of this candidate over the baseline
    best_speedup: float = 1.0            # session best after this step
    diagnostics: str = ""
    median_us: float = 0.0
    baseline_us: float = 0.0
    transition_id: int = 0
    new_strategy_id: int = 0
    verified: bool = True

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def failed(self) -> bool:
        return self.status in FAILURE_SLUGS


@dataclass
class SessionView:
    session_id: int
    task: str
    backend: str
    arch: str = ""
    budget: int = 0
    description: str = ""
    category: str = ""
    baseline_source: str = ""
    best_source: str = ""
    best_speedup: float = 1.0


@dataclass
class DirectionInfo:
    id: int
    name: str
    title: str = ""


@dataclass
class Proposal:
    """What a proposer answers for a step: a candidate, or nothing (source None)."""
    source: Optional[str]
    summary: str = ""
    direction: str = ""                  # slug the candidate applies (normally the step's)
    strategy_ids: List[int] = field(default_factory=list)
    strategy: str = ""                   # strategy slug, when known (lineage replay)
    note: str = ""                       # why this proposal (shown in the progress)
    tokens_in: int = 0
    tokens_out: int = 0
    variant_id: str = ""                 # lineage variant replayed, if any
    recorded: Optional[OutcomeView] = None  # known outcome (replay without evaluation)


# The seed taxonomy's direction slugs (configs/seed_taxonomy.json uses exactly these).
DIRECTION_SLUGS = [
    "global-memory-access", "on-chip-reuse-tiling", "shared-memory-banks", "fusion",
    "reductions-scans", "parallel-mapping-occupancy", "latency-hiding",
    "compute-throughput-precision", "control-flow", "algorithmic", "launch-overhead",
    "architecture-specific", "parameter-tuning",
]
