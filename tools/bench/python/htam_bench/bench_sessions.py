"""What the two memory benchmarks share to drive sessions (quality.py replays task lineages,
world_bench.py answers from the measured world): a policy's session from begin to end, a scratch
htamd on a copy of a trained store, and the text similarity the flat baseline ranks by."""

from __future__ import annotations

import math
import re
import shutil
from contextlib import contextmanager
from typing import Dict, Iterator, Optional

_WORD = re.compile(r"[a-z0-9]+")


def text_bag(text: str) -> Dict[str, float]:
    """Word counts of lower-cased text (letters and digits)."""
    bag: Dict[str, float] = {}
    for w in _WORD.findall(text.lower()):
        bag[w] = bag.get(w, 0.0) + 1.0
    return bag


def cosine(a: Dict[str, float], b: Dict[str, float]) -> float:
    """Cosine similarity of two bags; 0 when either is empty."""
    dot = sum(v * b.get(k, 0.0) for k, v in a.items())
    na = math.sqrt(sum(v * v for v in a.values()))
    nb = math.sqrt(sum(v * v for v in b.values()))
    return dot / (na * nb) if na and nb else 0.0


class Policy:
    """A policy a benchmark drives through one session: begin, then choose and feedback once a
    step, then end. What a choice and a feedback carry is the benchmark's: quality.py chooses a
    direction per step and hears (direction, variant, outcome, speedup before); world_bench.py
    chooses (direction, ranked strategies) and hears (step result, best before, session)."""
    name = "policy"

    def begin(self, *args) -> None:
        pass

    def choose(self, *args):
        raise NotImplementedError

    def feedback(self, *args) -> None:
        pass

    def end(self) -> None:
        pass


@contextmanager
def policy_session(policy, *begin_args) -> Iterator[None]:
    """policy.begin(*begin_args) on entry; policy.end() on exit, whatever happened between."""
    policy.begin(*begin_args)
    try:
        yield
    finally:
        policy.end()


@contextmanager
def daemon_on_copy(htamd: str, base_dir: str, run_dir: str, tasks_dir: str, seed: int,
                   options: Dict[str, str], cwd: Optional[str] = None):
    """A client of a scratch htamd whose store starts as a copy of base_dir ("" for an empty
    store), run with memory.policy_seed = seed and `options`; the scratch store is removed
    afterwards, so that every run starts from the same memory."""
    from htam_agent.htamd import HtamdProcess  # imported here: offline policies need no ZeroMQ
    shutil.rmtree(run_dir, ignore_errors=True)
    if base_dir:
        shutil.copytree(base_dir, run_dir, ignore=shutil.ignore_patterns("*.sock", "*.pid",
                                                                         "htamd.log"))
    opts = {"memory.policy_seed": str(seed)}
    opts.update(options)
    try:
        with HtamdProcess(htamd, run_dir, tasks_dir, options=opts, cwd=cwd) as proc:
            d = proc.client()
            try:
                yield d
            finally:
                d.close_connection()
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
