"""The measured world as an environment: a session on one task starts at the family's baseline
kernel; a step "direction D, strategies S1..Sk, on the current kernel" is answered with the
measured variant that applies the first applicable strategy (its table row), or "not applicable
here" when none of S1..Sk names a knob move that is left from the current kernel.

Applying strategy S = setting the first knob (in the family's order) that has a non-baseline
value named by S (knobs.json: the knob's strategy, or value_strategies) to its first such value
(in the knob's value order) whose variant the session has not tried yet. The current kernel moves
to the new variant when it is correct (Ok) and faster than the session's best, as an agent keeps
its best kernel; a failure or a slower variant leaves it where it was.

Speedups are over the family's baseline kernel (the task's reference): the median of the
reference's time over all of the task's evaluations (each gate evaluation times the reference
again) divided by the variant's median time.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from . import world_families as wf

DEFAULT_TABLE = os.path.join(wf.REPO, "configs", "world", "h100_table.jsonl.gz")
DEFAULT_SPLIT = os.path.join(wf.REPO, "configs", "world", "split.json")
STATUS_SLUG = {"Ok": "ok", "Incorrect": "incorrect", "CompileError": "compile_error",
               "Crash": "crash", "Timeout": "timeout"}


class TableError(ValueError):
    """A table that does not fit the families (the message says which row)."""


@dataclass
class TaskView:
    family: wf.Family
    shape: wf.Shape
    name: str
    rows: Dict[str, dict]            # variant id -> table row
    baseline_us: float = 0.0
    best: float = 1.0                # best speedup over all Ok variants (>= 1: the baseline)

    def speedup(self, vid: str) -> float:
        r = self.rows.get(vid)
        if not r or r["status"] != "Ok" or not r.get("median_us"):
            return 0.0
        return self.baseline_us / r["median_us"]

    @property
    def flops(self) -> float:
        return _eval_expr(self.family.spec["flops"], self.shape)

    @property
    def bytes(self) -> float:
        return _eval_expr(self.family.spec["bytes"], self.shape)


def _eval_expr(expr: str, shape: wf.Shape) -> float:
    text = expr.replace("$B", str(wf.DTYPE_BYTES[shape.dtype]))
    try:
        return float(eval(text, {"__builtins__": {}}, dict(shape.dims)))  # dims and arithmetic
    except Exception:  # noqa: BLE001 - a malformed expression only loses a feature
        return 0.0


class WorldTable:
    """The families and the measured table, indexed by task."""

    def __init__(self, families: Sequence[wf.Family], rows: Sequence[dict]):
        self.families = {f.name: f for f in families}
        by_task: Dict[str, Dict[str, dict]] = collections.defaultdict(dict)
        for i, r in enumerate(rows):
            for k in ("family", "shape", "task", "variant", "status"):
                if k not in r:
                    raise TableError(f"table row {i + 1}: missing '{k}'")
            if r["family"] in self.families:
                by_task[r["task"]][r["variant"]] = r
        self.tasks: Dict[str, TaskView] = {}
        for f in families:
            for sh in f.shapes:
                name = f.task_name(sh)
                rs = by_task.get(name)
                if not rs:
                    continue
                base_times = [r["baseline_us"] for r in rs.values()
                              if r["status"] == "Ok" and r.get("baseline_us")]
                if not base_times:
                    continue
                t = TaskView(f, sh, name, rs, statistics.median(base_times))
                t.best = max([1.0] + [t.speedup(v) for v in rs])
                self.tasks[name] = t

    @classmethod
    def load(cls, table: str = DEFAULT_TABLE, families_dir: Optional[str] = None) -> "WorldTable":
        rows = []
        opener = gzip.open if table.endswith(".gz") else open
        with opener(table, "rt") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        raise TableError(f"{table}:{n}: not JSON ({e})") from e
        return cls(wf.load_families(families_dir), rows)

    def family_tasks(self, family: str) -> List[TaskView]:
        return [t for t in self.tasks.values() if t.family.name == family]


def load_split(path: str = DEFAULT_SPLIT) -> Tuple[List[str], List[str]]:
    with open(path) as f:
        s = json.load(f)
    return list(s["development"]), list(s["held_out"])


@dataclass
class StepResult:
    applied: str = ""                # strategy applied ("" = not applicable here)
    direction: str = ""
    knob: str = ""
    value: int = 0
    variant: str = ""
    status: str = ""                 # table status slug; "" when nothing was applied
    speedup: float = 0.0             # of the variant (0 unless Ok)
    best: float = 1.0                # session best after the step
    improved: bool = False
    note: str = ""

    @property
    def applicable(self) -> bool:
        return bool(self.applied)


def split_advice(item: str) -> Tuple[str, Optional[Tuple[str, int]]]:
    """A piece of advice as a policy hands it to the world: a strategy name, or "strategy@KNOB=V"
    when the advice names a knob setting (a learned summary "strategy: KNOB=V (...)", read with
    value hints on). Returns (strategy, (knob, value) or None)."""
    name, _, hint = item.partition("@")
    knob, _, val = hint.partition("=")
    if knob and val.lstrip("-").isdigit():
        return name, (knob, int(val))
    return name, None


class WorldSession:
    """One session on one task (not thread-safe; one per run)."""

    def __init__(self, task: TaskView):
        self.task = task
        self.fam = task.family
        self.knobs = self.fam.baseline()
        self.current = wf.variant_id(self.knobs)
        self.best = 1.0
        self.tried = {self.current}
        self.history: List[StepResult] = []

    def moves(self, strategy: str) -> List[Tuple[str, int]]:
        """(knob, value) moves that apply `strategy` from the current kernel, untried, in order."""
        out = []
        for k in self.fam.knobs:
            for v in k.values:
                if v == k.baseline or v == self.knobs[k.name] or k.names(v)[0] != strategy:
                    continue
                a = dict(self.knobs)
                a[k.name] = v
                vid = wf.variant_id(a)
                if vid not in self.tried and vid in self.task.rows:
                    out.append((k.name, v))
        return out

    def applicable(self, strategy: str) -> bool:
        return bool(self.moves(split_advice(strategy)[0]))

    def step(self, direction: str, strategies: Sequence[str]) -> StepResult:
        """Applies the first piece of advice that has a move here: its named knob setting when it
        names one that is a move of its strategy from this kernel, else the strategy's first move
        in value order."""
        for item in strategies:
            s, hint = split_advice(item)
            mv = self.moves(s)
            if not mv:
                continue
            knob, value = hint if hint in mv else mv[0]
            a = dict(self.knobs)
            a[knob] = value
            vid = wf.variant_id(a)
            row = self.task.rows[vid]
            self.tried.add(vid)
            sp = self.task.speedup(vid)
            res = StepResult(s, self.fam.knobs[[k.name for k in self.fam.knobs].index(knob)]
                             .names(value)[1], knob, value, vid,
                             STATUS_SLUG.get(row["status"], "infra_error"), sp)
            if sp > self.best:
                self.knobs, self.current, self.best = a, vid, sp
                res.improved = True
            res.best = self.best
            if res.status != "ok":
                res.note = (row.get("diagnostics") or "")[:160]
            self.history.append(res)
            return res
        res = StepResult(direction=direction, best=self.best,
                         note=f"not applicable here: no untried knob move of "
                              f"{', '.join(split_advice(x)[0] for x in strategies) or direction} "
                              f"from {self.current}")
        self.history.append(res)
        return res


def oracle(task: TaskView, budget: int) -> Tuple[List[float], Optional[int]]:
    """The bound: best speedup after each step when every step takes the move (one knob to one of
    its non-baseline values) that the table says leads fastest to the best, improving moves only;
    and the steps to within 5 % of the task's best (None: not within the budget)."""
    fam = task.family
    start = fam.baseline()
    frontier = {wf.variant_id(start): (start, 1.0)}
    best_at: List[float] = []
    best = 1.0
    reached = None
    seen = set(frontier)
    for step in range(1, budget + 1):
        nxt = {}
        for vid, (a, sp) in frontier.items():
            for k in fam.knobs:
                for v in k.values:
                    if v == k.baseline or v == a[k.name]:
                        continue
                    b = dict(a)
                    b[k.name] = v
                    nid = wf.variant_id(b)
                    s2 = task.speedup(nid)
                    if s2 > sp and nid not in seen:
                        nxt[nid] = (b, s2)
        # Keep the whole frontier (the table is small): the bound is exact.
        for nid in nxt:
            seen.add(nid)
        frontier.update(nxt)
        best = max([best] + [s for _, s in frontier.values()])
        best_at.append(best)
        if reached is None and best >= 0.95 * task.best:
            reached = step
    return best_at, reached
