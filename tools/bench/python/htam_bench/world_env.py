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
import math
import statistics
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from htam_agent.shipped import find_shared_file

from . import world_families as wf

# Shipped under share/htam/world (htam.paths; a build tree links it there).
DEFAULT_TABLE = find_shared_file("world/h100_table.jsonl.gz")
DEFAULT_SPLIT = find_shared_file("world/split.json")
STATUS_SLUG = {"Ok": "ok", "Incorrect": "incorrect", "CompileError": "compile_error",
               "Crash": "crash", "Timeout": "timeout"}


# ---------------------------------------------------------------- the measured bottleneck

@dataclass(frozen=True)
class Roofline:
    """The device's ceilings and the bottleneck thresholds, in one place.

    Ceilings: what the CUDA backend measured on the table's H100 80GB HBM3 when it opened the
    device (backends/cuda/cuda_roofline.cc, `Roofline`): a large device-to-device copy (bytes read +
    written), an FMA-bound fp32 kernel, a 16-bit mma.sync-bound kernel. Thresholds: htamd's profile
    classification (eval.cuda_profile_memory_pct / _compute_pct / _launch_us, 60 / 60 / 5;
    backends/cuda/ncu_profile.cc, ClassifyBottleneck)."""
    copy_bytes_per_s: float = 2950e9
    fp32_flops: float = 64.5e12
    tensor16_flops: float = 625e12
    memory_pct: float = 60.0
    compute_pct: float = 60.0
    launch_us: float = 5.0


H100_ROOFLINE = Roofline()
BOTTLENECKS = ("Unknown", "Memory", "Compute", "Latency", "Launch")  # schema/htg.fbs order


def roofline_fractions(bytes_: float, flops: float, median_us: float, is16: bool,
                       roof: Roofline = H100_ROOFLINE) -> Tuple[float, float]:
    """(memory %, compute %) of the device's ceilings that a kernel moving `bytes_` and doing
    `flops` in `median_us` achieves; the compute ceiling is the 16-bit tensor cores' when an input
    is f16/bf16, else fp32 FMA (the gate's speed-of-light rule, daemon/eval/gate/gate_timing.cc)."""
    if median_us <= 0:
        return -1.0, -1.0
    sec = median_us * 1e-6
    peak = roof.tensor16_flops if is16 else roof.fp32_flops
    return (100.0 * max(0.0, bytes_) / sec / roof.copy_bytes_per_s,
            100.0 * max(0.0, flops) / sec / peak)


def classify_bottleneck(bytes_: float, flops: float, median_us: float, is16: bool,
                        roof: Roofline = H100_ROOFLINE) -> str:
    """The bottleneck class of a measured kernel by htamd's rule (ClassifyBottleneck) with the
    roofline fractions standing for the profiler's DRAM and SM throughput: Memory when the memory
    fraction reaches memory_pct and is the larger, Compute likewise, else a unit over its
    threshold, else Launch when the kernel runs under launch_us, else Latency. Unknown without a
    time."""
    mem, comp = roofline_fractions(bytes_, flops, median_us, is16, roof)
    if mem < 0:
        return "Unknown"
    if mem >= roof.memory_pct and mem >= comp:
        return "Memory"
    if comp >= roof.compute_pct and comp > mem:
        return "Compute"
    if mem >= roof.memory_pct:
        return "Memory"
    if comp >= roof.compute_pct:
        return "Compute"
    if median_us < roof.launch_us:
        return "Launch"
    return "Latency"


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

    @property
    def is16(self) -> bool:
        """An input is 16-bit floating point (the roofline's compute ceiling is the tensor
        cores')."""
        return any(i.get("dtype", "").replace("$T", self.shape.dtype) in ("f16", "bf16")
                   for i in self.family.spec.get("inputs", []))

    def median_us(self, vid: str) -> float:
        """The variant's measured median time (0 unless Ok); the baseline's is the task's
        reference time."""
        r = self.rows.get(vid)
        if vid == wf.variant_id(self.family.baseline()) and self.baseline_us:
            return self.baseline_us
        if not r or r["status"] != "Ok":
            return 0.0
        return float(r.get("median_us") or 0.0)

    def bottleneck(self, vid: str, roof: Roofline = H100_ROOFLINE) -> str:
        """The bottleneck class of variant `vid` as htamd's roofline would measure it."""
        return classify_bottleneck(self.bytes, self.flops, self.median_us(vid), self.is16, roof)


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
        """The families and the rows of `table`: one file, or several separated by commas (e.g. the
        H100 table and the CPU table; their tasks are distinct)."""
        rows = []
        for path in [p for p in table.split(",") if p]:
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rt") as f:
                for n, line in enumerate(f, 1):
                    if line.strip():
                        try:
                            rows.append(json.loads(line))
                        except json.JSONDecodeError as e:
                            raise TableError(f"{path}:{n}: not JSON ({e})") from e
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

    def bottleneck(self, roof: Roofline = H100_ROOFLINE) -> str:
        """The current kernel's bottleneck class (what a profiler or htamd's roofline reports)."""
        return self.task.bottleneck(self.current, roof)

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


def strategy_bound(task: TaskView, budget: int, depth: int = 7) -> Tuple[List[float], Optional[int]]:
    """The bound of a policy that hands the world one strategy per step (what every policy here
    does): over every sequence of the family's strategies, stepped by WorldSession's own rule (the
    first untried value in value order, failures and slower variants kept out of the current
    kernel), the one that reaches within 5 % of the task's best in the fewest steps (searched up to
    `depth` steps), then its curve held for the rest of the budget. Tighter than `oracle`, which
    may set any knob to any value in one step: a policy without value hints cannot beat this.
    Returns (best speedup after each step, steps to within 5 % or None)."""
    strategies = family_strategies(task.family)
    target = 0.95 * task.best
    best_curve: List[float] = []  # the shortest curve found that reaches the target

    def walk(s: WorldSession, curve: List[float]) -> None:
        nonlocal best_curve
        if s.best >= target and curve:
            if not best_curve or len(curve) < len(best_curve):
                best_curve = list(curve)
            return
        if len(curve) + 1 >= (len(best_curve) if best_curve else depth + 1):
            return
        for st in strategies:
            if s.applicable(st):
                c = _clone(s)
                c.step("", [st])
                walk(c, curve + [c.best])

    walk(WorldSession(task), [])
    if not best_curve and target <= 1.0:
        best_curve = [1.0]  # the baseline is already within 5 %
    steps = len(best_curve) if best_curve and len(best_curve) <= budget else None
    curve = best_curve or [1.0]
    return (curve + [curve[-1]] * budget)[:budget], steps


def family_strategies(family: wf.Family) -> List[str]:
    """The taxonomy strategies the family's knobs apply, in knob and value order."""
    out: List[str] = []
    for k in family.knobs:
        for v in k.values:
            if v != k.baseline and k.names(v)[0] not in out:
                out.append(k.names(v)[0])
    return out


def _clone(s: WorldSession) -> WorldSession:
    c = WorldSession(s.task)
    c.knobs, c.current, c.best, c.tried = dict(s.knobs), s.current, s.best, set(s.tried)
    return c


def best_fixed_order(tasks: Sequence[TaskView], budget: int) -> List[str]:
    """The one sequence of strategies (one per step, stepped by WorldSession's rule) that reaches
    within 5 % of each task's best in the fewest steps on average over `tasks` (not reached =
    budget + 1), found by exhaustive search with a lower-bound cut; ties go to the sequence found
    first (knob order). What a memory that knew these tasks' whole tables could hand a new task of
    their family as a fixed plan."""
    strategies = family_strategies(tasks[0].family) if tasks else []
    best: List = [float("inf"), []]

    def walk(sessions, reached, seq):
        n = len(seq)
        floor = sum(r if r is not None else n + 1 for r in reached) / len(tasks)
        if floor >= best[0]:
            return
        if n == budget or all(r is not None for r in reached):
            total = sum(r if r is not None else budget + 1 for r in reached) / len(tasks)
            if total < best[0]:
                best[0], best[1] = total, list(seq)
            return
        for st in strategies:
            if not any(r is None and s.applicable(st) for s, r in zip(sessions, reached)):
                continue  # a step wasted on every task still open: never better
            nxt, rch = [], []
            for s, r, t in zip(sessions, reached, tasks):
                if r is not None:
                    nxt.append(s)
                    rch.append(r)
                    continue
                c = _clone(s)
                c.step("", [st])
                nxt.append(c)
                rch.append(n + 1 if c.best >= 0.95 * t.best else None)
            walk(nxt, rch, seq + [st])

    walk([WorldSession(t) for t in tasks],
         [0 if 1.0 >= 0.95 * t.best else None for t in tasks], [])
    return best[1]


def shape_transfer(task: TaskView, siblings: Sequence[TaskView],
                   budget: int) -> Tuple[List[float], Optional[int], List[str]]:
    """A reference for leaving one shape out: the best fixed order of the family's other shapes
    (best_fixed_order over their whole tables, far more than any store of sessions holds) played
    on `task`, whose own table it never saw. Returns (best speedup after each step, steps to
    within 5 % or None, the order)."""
    order = best_fixed_order(siblings, budget) if siblings else []
    return (*play_order(task, order, budget), order)


def _play(task: TaskView, budget: int,
          plan: Callable[[int], Sequence[str]]) -> Tuple[List[float], Optional[int]]:
    """`budget` steps on `task`, step i handing the world plan(i) (no step when it is empty).
    Returns (best speedup after each step, steps to within 5 % or None; counted after each step,
    as run_session counts them)."""
    s = WorldSession(task)
    curve: List[float] = []
    reached = None
    for i in range(budget):
        strategies = plan(i)
        if strategies:
            s.step("", list(strategies))
        curve.append(s.best)
        if reached is None and s.best >= 0.95 * task.best:
            reached = i + 1
    return curve, reached


def play_order(task: TaskView, order: Sequence[str],
               budget: int) -> Tuple[List[float], Optional[int]]:
    """A fixed plan on `task`: step i names order[i] alone (nothing once the order is spent).
    Returns what _play returns."""
    return _play(task, budget, lambda i: order[i:i + 1])


def dims_distance(a: TaskView, b: TaskView) -> float:
    """How far apart two shapes of one family are: the Euclidean distance of their dimensions'
    base-2 logarithms (a dimension one of them lacks counts as 1). What a memory that knew only the
    dimensions a task states could call kin."""
    keys = set(a.shape.dims) | set(b.shape.dims)
    return math.sqrt(sum((math.log2(max(a.shape.dims.get(k, 1), 1)) -
                          math.log2(max(b.shape.dims.get(k, 1), 1))) ** 2 for k in keys))


def kin_transfer(task: TaskView, siblings: Sequence[TaskView], budget: int,
                 k: int = 4) -> Tuple[List[float], Optional[int], List[str]]:
    """shape_transfer fitted on the `k` siblings nearest to `task` by dims_distance (ties by
    name), not on all of them: a reference for a memory that weighs the family's other shapes by
    how near their dimensions are. Returns what shape_transfer returns."""
    near = sorted(siblings, key=lambda t: (dims_distance(task, t), t.name))[:max(k, 1)]
    return shape_transfer(task, near, budget)


def list_steps(task: TaskView, ranked: Sequence[str],
               budget: int) -> Tuple[List[float], Optional[int]]:
    """A stateless policy on `task`: every step hands the world the same ranked list (it applies
    the first strategy with an untried move). Returns what _play returns."""
    return _play(task, budget, lambda i: ranked)


def best_priority_list(tasks: Sequence[TaskView], budget: int,
                       max_sweeps: int = 6) -> Tuple[List[str], float]:
    """The ranked list of every strategy the tasks' families apply that, handed to the world at
    every step (list_steps), reaches within 5 % soonest on average over `tasks` (not reached =
    budget + 1): local search by moving one strategy to another place, from the order of the mean
    log gain of each strategy's first move from the baseline, until no move helps (or max_sweeps
    passes). A local optimum, deterministic. Returns (the list, its mean steps over `tasks`)."""
    strategies: List[str] = []
    for t in tasks:
        for st in family_strategies(t.family):
            if st not in strategies:
                strategies.append(st)
    if not tasks:
        return strategies, 0.0

    def first_gain(st: str) -> float:
        total = 0.0
        for t in tasks:
            s = WorldSession(t)
            if s.applicable(st):
                s.step("", [st])
                total += math.log(s.best)
        return total / len(tasks)

    def mean_steps(ranked: List[str]) -> float:
        return sum(r if r is not None else budget + 1
                   for r in (list_steps(t, ranked, budget)[1] for t in tasks)) / len(tasks)

    ranked = sorted(strategies, key=first_gain, reverse=True)
    best = mean_steps(ranked)
    for _ in range(max_sweeps):
        improved = False
        for i in range(len(ranked)):
            for j in range(len(ranked)):
                if i == j:
                    continue
                cand = list(ranked)
                cand.insert(j, cand.pop(i))
                v = mean_steps(cand)
                if v < best - 1e-12:
                    best, ranked, improved = v, cand, True
        if not improved:
            break
    return ranked, best
