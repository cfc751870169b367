"""htam-bench quality: does the memory find a task's best variant in fewer steps?

Leave-one-task-out over the task suite, on recorded outcomes (no GPU needed):

  for each task T whose lineage has measured outcomes (variants without one are left out):
    memory M_T = a fresh store into which the lineages of every OTHER task are recorded
    for each budget (6, 12), seed, policy:
      a session on T: each step the policy picks a direction; the replay world answers with the
      variant T's lineage has for that direction from the current best (its recorded outcome),
      or, when it has none, a no-op (no gain: what an agent gets from a direction with nothing
      to offer); daemon-backed policies learn each outcome through Record, as in real use.

Policies compared:
  full        htamd's policy on M_T (transition attention + strategies)
  empty       htamd's policy on an empty store (cold start: seed priors only)
  no-history  htamd's policy on M_T with memory.history_weight = 0
  flat        strategies of M_T ranked by text similarity to the task and measured effect, with
              no directions, transitions or state (client-side over Query)
  ucb         per-task UCB1 bandit over directions, nothing transferred (client-side)
  random      a uniformly random direction each step (client-side)

With --live the recorded outcomes are replaced first: every variant of the benchmarked lineages is
evaluated once, through htamd's gate on this machine's backend (CPU here, CUDA on a GPU machine), and
its measured outcome (status, speedup over the reference) is what the memory records and what the
world answers with, for every policy alike.

Metrics (per policy and budget, medians over tasks and seeds): steps to reach the lineage's best
reachable variant (not reached = budget + 1; see reachable_best), best speedup at the budget
relative to it,
share of steps wasted on failures (compile error, crash, incorrect, ...).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from htam_agent.daemon import Daemon, DaemonError
from htam_agent.htamd import HtamdProcess, find_htamd
from htam_agent.importer import import_task
from htam_agent.lineage import LANGUAGE_OF_BACKEND, ROOT, Lineage, Task, Variant, discover_tasks
from htam_agent.model import DIRECTION_SLUGS, OutcomeView, StrategyView

from .bench_sessions import Policy, cosine, daemon_on_copy, policy_session, text_bag
from .world_plot import svg_curves

DAEMON_POLICIES = ("full", "empty", "no-history")
ALL_POLICIES = ("full", "empty", "no-history", "flat", "ucb", "random")
FAILURES = {"compile_error", "crash", "timeout", "resource_limit", "incorrect",
            "nondeterministic"}


# ---------------------------------------------------------------- the replay world

class World:
    """A held-out task's lineage answering directions with recorded outcomes."""

    def __init__(self, lineage: Lineage, rng: random.Random):
        self.lineage = lineage
        self.rng = rng
        self.node = ROOT
        self.best = 1.0
        self.tried = set()
        self.target = reachable_best(lineage)

    def act(self, direction: str) -> Tuple[Optional[Variant], OutcomeView]:
        cands = [v for v in self.lineage.children(self.node)
                 if v.direction == direction and v.id not in self.tried and known(v)]
        if not cands:
            return None, OutcomeView(status="ok", speedup=self.best, best_speedup=self.best,
                                     verified=False,
                                     diagnostics=f"no applicable change under {direction}")
        v = self.rng.choice(cands)
        self.tried.add(v.id)
        if v.ok and v.speedup > self.best:
            self.node, self.best = v.id, v.speedup
        return v, OutcomeView(status=v.status, speedup=v.speedup if v.ok else 0.0,
                              best_speedup=self.best, verified=False,
                              median_us=float(v.measured.get("median_us", 0.0) or 0.0))

    @property
    def reached(self) -> bool:
        return self.best >= self.target * (1 - 1e-6)


def known(v: Variant) -> bool:
    """A variant with a recorded outcome: a failure class, or a measured speedup. Correct
    variants nobody measured are left out of the world (and of the recorded import)."""
    return not v.ok or v.speedup > 0


def reachable_best(lineage: Lineage) -> float:
    """The best speedup a session can reach in the replay world, whose rule is to move only to a
    measured child that beats the current best: a variant below a slower parent (a detour the
    lineage's author kept, e.g. scan v4 at 0.07x before v5 at 1.86x) cannot be reached, so it is
    no target for any policy."""
    best = 1.0
    stack = [(ROOT, 1.0)]
    while stack:
        node, speedup = stack.pop()
        for v in lineage.children(node):
            if known(v) and v.ok and v.speedup > speedup:
                best = max(best, v.speedup)
                stack.append((v.id, v.speedup))
    return best


def usable(lineage: Lineage) -> bool:
    """Some measured variant beats the reference (the target of a held-out session)."""
    return lineage.best_speedup() > 1.0


# ---------------------------------------------------------------- policies

class RandomPolicy(Policy):
    name = "random"

    def __init__(self, rng: random.Random):
        self.rng = rng

    def choose(self, step: int) -> str:
        return self.rng.choice(DIRECTION_SLUGS)


class UCBPolicy(Policy):
    """UCB1 over directions within one session: reward = log gain over the session best (0 for
    no gain or failure). Untried directions first, in a seeded random order."""
    name = "ucb"

    def __init__(self, rng: random.Random, c: float = math.sqrt(2)):
        self.rng, self.c = rng, c

    def begin(self, task, lineage, budget):
        self.order = list(DIRECTION_SLUGS)
        self.rng.shuffle(self.order)
        self.n = {d: 0 for d in self.order}
        self.total = {d: 0.0 for d in self.order}
        self.t = 0

    def choose(self, step):
        for d in self.order:
            if self.n[d] == 0:
                return d
        return max(self.order, key=lambda d: self.total[d] / self.n[d]
                   + self.c * math.sqrt(math.log(self.t) / self.n[d]))

    def feedback(self, direction, variant, outcome, before):
        self.t += 1
        self.n[direction] += 1
        if outcome.ok and outcome.speedup > before > 0:
            self.total[direction] += math.log(outcome.speedup / before)


class FlatPolicy(Policy):
    """Flat memory: one list of strategies, no directions, no transitions, no state. Each step
    takes the best-ranked strategy not yet used (similarity to the task + measured effect) and
    applies it; the direction is only where that strategy happens to be filed."""
    name = "flat"

    def __init__(self, strategies: Sequence[StrategyView], direction_names: Dict[int, str],
                 rng: random.Random):
        self.strategies = list(strategies)
        self.names = direction_names
        self.rng = rng

    def begin(self, task, lineage, budget):
        query = text_bag(f"{task.name} {task.category} {task.description}")
        ranked = []
        for s in self.strategies:
            direction = self.names.get(s.direction_id, "")
            if not direction:
                continue
            sim = cosine(query, text_bag(f"{s.name} {s.title} {s.description} "
                                         + " ".join(s.preconditions)))
            rate = (s.successes + 1.0) / (s.uses + 2.0)
            effect = rate * max(s.mean_gain, 0.0)
            ranked.append((sim + effect + 1e-6 * self.rng.random(), direction))
        ranked.sort(reverse=True)
        self.queue = [d for _, d in ranked]

    def choose(self, step):
        if self.queue:
            return self.queue.pop(0)
        return self.rng.choice(DIRECTION_SLUGS)


class DaemonPolicy(Policy):
    """htamd's policy: NextStep picks the direction; each outcome goes back through Record."""

    def __init__(self, name: str, daemon: Daemon, backend: str):
        self.name, self.daemon, self.backend = name, daemon, backend
        self.session = 0
        self.last_step = None

    def begin(self, task, lineage, budget):
        self.session = self.daemon.open_session(task.name, self.backend, budget=budget,
                                                client="htam-bench quality",
                                                model="replay").session_id

    def choose(self, step):
        self.last_step = self.daemon.next_step(self.session)
        return self.last_step.direction

    def feedback(self, direction, variant, outcome, before):
        did = self.last_step.direction_id if self.last_step else self.daemon.direction_id(direction)
        summary = variant.annotation() if variant else f"no applicable change under {direction}"
        source = variant.source() if variant and os.path.exists(variant.path) else ""
        self.daemon.record(self.session, did, [], summary, outcome, source)

    def end(self):
        try:
            self.daemon.close(self.session)
        except DaemonError:
            pass


# ---------------------------------------------------------------- one run

@dataclass
class RunResult:
    task: str
    backend: str
    policy: str
    budget: int
    seed: int
    steps_to_best: Optional[int]
    best: float
    target: float
    failures: int
    noops: int
    directions: List[str] = field(default_factory=list)
    error: str = ""
    best_at: List[float] = field(default_factory=list)  # the session's best after each step


def trace_step(policy: Policy, world: World, step: int, direction: str) -> str:
    """One step of a run, for --trace: where the world stands, which directions have a variant
    there, what the policy chose and, for htamd's policies, its top scores."""
    offered = sorted({v.direction for v in world.lineage.children(world.node)
                      if v.id not in world.tried and known(v)})
    line = (f"    step {step}: kernel {world.node} ({world.best:.2f}x), offered "
            f"{','.join(offered) or '-'}; chose {direction}")
    last = getattr(policy, "last_step", None)
    if last is not None:
        for sc in last.ranked_directions()[:3]:
            line += (f"\n      {sc.name}: score {sc.score:.3f} = E[log gain] {sc.expected_gain:.3f}"
                     f" + exploration {sc.exploration:.3f} - penalty {sc.penalty:.3f}"
                     f" (p {sc.p_success:.2f}, n {sc.effective_count:.2f})")
    return line


def run_one(policy: Policy, task: Task, lineage: Lineage, budget: int, seed: int,
            trace=None) -> RunResult:
    world = World(lineage, random.Random(seed * 7919 + 17))
    res = RunResult(task.name, lineage.backend, policy.name, budget, seed, None, 1.0,
                    world.target, 0, 0)
    with policy_session(policy, task, lineage, budget):
        for i in range(budget):
            d = policy.choose(i)
            if trace:
                trace(trace_step(policy, world, i, d))
            before = world.best
            variant, outcome = world.act(d)
            policy.feedback(d, variant, outcome, before)
            res.directions.append(d)
            res.best_at.append(world.best)
            if variant is None:
                res.noops += 1
            elif outcome.status in FAILURES:
                res.failures += 1
            if res.steps_to_best is None and world.reached:
                res.steps_to_best = i + 1
    res.best = world.best
    return res


# ---------------------------------------------------------------- orchestration

@dataclass
class BenchConfig:
    tasks_dir: str
    htamd: str
    work: str
    budgets: List[int]
    seeds: List[int]
    policies: List[str]
    only_tasks: List[str]
    backend: str
    cwd: str
    verbose: bool = False
    trace: bool = False
    live: bool = False
    live_outcomes: Dict[str, dict] = field(default_factory=dict)  # "task/backend/variant"
    options: Dict[str, str] = field(default_factory=dict)  # htamd options of every htamd run


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def build_memory(cfg: BenchConfig, others: List[Task],
                 data_dir: str) -> Tuple[Dict[int, str], List[StrategyView]]:
    """Records the other tasks' lineages into a fresh store; returns what the flat baseline
    reads from it (direction names by id, every strategy)."""
    with HtamdProcess(cfg.htamd, data_dir, cfg.tasks_dir, options=dict(cfg.options),
                      cwd=cfg.cwd) as proc:
        d = proc.client()
        try:
            for t in others:
                import_task(d, t, recorded=True, out=_log if cfg.verbose else (lambda m: None))
            return {x.id: x.name for x in d.directions()}, d.strategies(0)
        finally:
            d.close_connection()


def _daemon_run(cfg, name, base_dir, run_dir, options, task, lineage, budget, seed) -> RunResult:
    trace = _log if cfg.trace else None
    if trace:
        trace(f"  {task.name}/{lineage.backend} {name} budget {budget} seed {seed}:")
    opts = dict(cfg.options)
    opts.update(options)
    with daemon_on_copy(cfg.htamd, base_dir, run_dir, cfg.tasks_dir, seed, opts, cfg.cwd) as d:
        return run_one(DaemonPolicy(name, d, lineage.backend), task, lineage, budget, seed, trace)


def measure_live(cfg: BenchConfig, tasks: List[Task]) -> None:
    """--live: evaluates every variant of the benchmarked lineages once through htamd's gate (a
    scratch store, each lineage in one session) and puts the measured outcome in place of the
    recorded one: an Ok variant takes the measured speedup, a failure its class. A variant the
    daemon refuses keeps no outcome and drops out of the world, like an unmeasured one."""
    data = os.path.join(cfg.work, "live")
    shutil.rmtree(data, ignore_errors=True)
    with HtamdProcess(cfg.htamd, data, cfg.tasks_dir, cwd=cfg.cwd) as proc:
        d = proc.client()
        try:
            for t in tasks:
                for b, lin in sorted(t.lineages.items()):
                    if cfg.backend and b != cfg.backend:
                        continue
                    sid = d.open_session(t.name, b, budget=len(lin.variants),
                                         client="htam-bench quality --live",
                                         model="lineage").session_id
                    for v in lin.variants:
                        key = f"{t.name}/{b}/{v.id}"
                        try:
                            out = d.submit(sid, v.source(), LANGUAGE_OF_BACKEND.get(b, b),
                                           d.direction_id(v.direction), [], v.annotation())
                        except (OSError, DaemonError) as e:
                            v.measured, v.expected = {}, "ok"
                            cfg.live_outcomes[key] = {"status": "refused", "error": str(e)}
                            _log(f"quality: live {key}: {e}")
                            continue
                        v.expected = "ok" if out.ok else out.status
                        v.measured = {"status": out.status,
                                      "speedup": out.speedup if out.ok else 0.0,
                                      "median_us": out.median_us, "live": True}
                        cfg.live_outcomes[key] = {"status": out.status,
                                                  "speedup": v.measured["speedup"],
                                                  "median_us": out.median_us}
                        if cfg.verbose:
                            _log(f"quality: live {key}: {out.status} "
                                 f"{v.measured['speedup']:.2f}x")
                    d.close(sid)
        finally:
            d.close_connection()
    shutil.rmtree(data, ignore_errors=True)


def run_benchmark(cfg: BenchConfig) -> List[RunResult]:
    tasks = discover_tasks(cfg.tasks_dir)
    if cfg.live:
        measure_live(cfg, tasks)
    held: List[Tuple[Task, Lineage]] = []
    for t in tasks:
        if cfg.only_tasks and t.name not in cfg.only_tasks:
            continue
        for b, lin in sorted(t.lineages.items()):
            if cfg.backend and b != cfg.backend:
                continue
            if usable(lin):
                held.append((t, lin))
            else:
                _log(f"quality: {t.name}/{b}: lineage has no recorded speedups; not held out")
    if not held:
        if cfg.live:  # small kernels on a busy host can measure no gain at all: say so, rc 3
            _log("quality: no lineage has a variant that beat its reference when measured live")
            return []
        raise SystemExit("quality: no task has a lineage with recorded outcomes to hold out")
    results: List[RunResult] = []
    os.makedirs(cfg.work, exist_ok=True)
    for task, lineage in held:
        if reachable_best(lineage) < lineage.best_speedup():
            _log(f"quality: {task.name}/{lineage.backend}: target {reachable_best(lineage):.2f}x, "
                 f"the best the replay world can reach (the lineage's best "
                 f"{lineage.best_speedup():.2f}x lies below a slower variant)")
        others = [t for t in tasks if t.name != task.name]
        tag = f"{task.name}-{lineage.backend}"
        base = os.path.join(cfg.work, tag, "base")
        t0 = time.monotonic()
        need_memory = any(p in cfg.policies for p in ("full", "no-history", "flat"))
        strategies: List[StrategyView] = []
        names: Dict[int, str] = {}
        if need_memory:
            shutil.rmtree(base, ignore_errors=True)
            names, strategies = build_memory(cfg, others, base)
        for budget in cfg.budgets:
            for seed in cfg.seeds:
                for p in cfg.policies:
                    run_dir = os.path.join(cfg.work, tag, f"{p}-{budget}-{seed}")
                    rng = random.Random(seed * 104729 + budget)
                    try:
                        if p == "full":
                            r = _daemon_run(cfg, p, base, run_dir, {}, task, lineage, budget, seed)
                        elif p == "no-history":
                            r = _daemon_run(cfg, p, base, run_dir,
                                            {"memory.history_weight": "0"}, task, lineage,
                                            budget, seed)
                        elif p == "empty":
                            r = _daemon_run(cfg, p, "", run_dir, {}, task, lineage, budget, seed)
                        elif p == "flat":
                            r = run_one(FlatPolicy(strategies, names, rng), task, lineage,
                                        budget, seed)
                        elif p == "ucb":
                            r = run_one(UCBPolicy(rng), task, lineage, budget, seed)
                        elif p == "random":
                            r = run_one(RandomPolicy(rng), task, lineage, budget, seed)
                        else:
                            raise SystemExit(f"quality: unknown policy {p}")
                    except DaemonError as e:
                        r = RunResult(task.name, lineage.backend, p, budget, seed, None, 1.0,
                                      reachable_best(lineage), 0, 0, error=str(e))
                        _log(f"quality: {tag} {p} budget {budget} seed {seed}: {e}")
                    results.append(r)
                    if cfg.verbose:
                        _log(f"  {tag} {p:10s} B={budget:2d} seed={seed}: steps "
                             f"{r.steps_to_best or '-'} best {r.best:.2f}/{r.target:.2f} "
                             f"fail {r.failures} noop {r.noops} {' '.join(r.directions)}")
        shutil.rmtree(os.path.join(cfg.work, tag), ignore_errors=True)
        _log(f"quality: {tag} done in {time.monotonic() - t0:.1f}s")
    return results


# ---------------------------------------------------------------- summary

@dataclass
class Row:
    policy: str
    budget: int
    runs: int
    median_steps: float
    mean_steps: float        # not reached counts as budget + 1
    reached: float
    rel_best: float          # median of best / lineage best
    geo_speedup: float       # geometric mean of best speedup at the budget
    waste: float             # mean share of steps that failed
    noop: float              # mean share of steps with nothing to apply
    errors: int


def summarize(results: List[RunResult]) -> List[Row]:
    rows = []
    keys = sorted({(r.policy, r.budget) for r in results},
                  key=lambda k: (k[1], ALL_POLICIES.index(k[0]) if k[0] in ALL_POLICIES else 99))
    for policy, budget in keys:
        rs = [r for r in results if r.policy == policy and r.budget == budget and not r.error]
        errors = sum(1 for r in results if r.policy == policy and r.budget == budget and r.error)
        if not rs:
            rows.append(Row(policy, budget, 0, float("nan"), float("nan"), 0, 0, 0, 0, 0, errors))
            continue
        steps = [r.steps_to_best if r.steps_to_best else budget + 1 for r in rs]
        rows.append(Row(
            policy, budget, len(rs), statistics.median(steps), statistics.mean(steps),
            sum(1 for r in rs if r.steps_to_best) / len(rs),
            statistics.median(r.best / r.target for r in rs),
            math.exp(sum(math.log(max(r.best, 1e-9)) for r in rs) / len(rs)),
            sum(r.failures for r in rs) / (len(rs) * budget),
            sum(r.noops for r in rs) / (len(rs) * budget), errors))
    return rows


def markdown(rows: List[Row]) -> str:
    out = ["| budget | policy | runs | median steps to best | mean steps to best | reached best "
           "| best / lineage best (median) | geo-mean speedup | steps failed | steps with nothing "
           "to apply |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        steps = f"{r.median_steps:g}" if r.median_steps <= r.budget else f">{r.budget}"
        out.append(f"| {r.budget} | {r.policy} | {r.runs}{f' ({r.errors} errors)' if r.errors else ''} "
                   f"| {steps} | {r.mean_steps:.2f} | {r.reached:.0%} | {r.rel_best:.2f} | {r.geo_speedup:.2f}x | "
                   f"{r.waste:.0%} | {r.noop:.0%} |")
    return "\n".join(out)


def per_task(results: List[RunResult]) -> str:
    """Median steps to the lineage's best per held-out task (columns: policy and budget)."""
    keys = sorted({(r.budget, r.policy) for r in results},
                  key=lambda k: (k[0], ALL_POLICIES.index(k[1]) if k[1] in ALL_POLICIES else 99))
    tasks = sorted({f"{r.task}/{r.backend}" for r in results})
    out = ["| task | " + " | ".join(f"{p} B={b}" for b, p in keys) + " |",
           "|---|" + "---|" * len(keys)]
    for t in tasks:
        cells = []
        for b, p in keys:
            rs = [r for r in results if f"{r.task}/{r.backend}" == t and r.policy == p
                  and r.budget == b and not r.error]
            if not rs:
                cells.append("")
                continue
            med = statistics.median(r.steps_to_best or b + 1 for r in rs)
            cells.append(f"{med:g}" if med <= b else "-")
        out.append(f"| {t} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def _geomean(xs: Sequence[float]) -> float:
    return math.exp(sum(math.log(max(x, 1e-9)) for x in xs) / len(xs)) if xs else 1.0


def svg_plot(results: List[RunResult], title: str) -> str:
    """Geometric-mean best speedup after each step per policy, over the sessions of the largest
    budget (a session of budget 12 passes through what budget 6 sees only under the same seed)."""
    ok = [r for r in results if not r.error and r.best_at]
    if not ok:
        return ""
    b = max(r.budget for r in ok)
    curves: Dict[str, List[float]] = {}
    for p in dict.fromkeys(r.policy for r in ok):
        rs = [r for r in ok if r.policy == p and r.budget == b]
        curves[p] = [1.0] + [_geomean([r.best_at[min(k, len(r.best_at)) - 1] for r in rs])
                             for k in range(1, b + 1)] if rs else []
    return svg_curves(curves, title)


def verdict(rows: List[Row]) -> str:
    lines = []
    for budget in sorted({r.budget for r in rows}):
        by = {r.policy: r for r in rows if r.budget == budget and r.runs}
        if "full" not in by:
            continue
        baselines = [r for p, r in by.items() if p not in ("full",)]
        if not baselines:
            continue
        best = min(baselines, key=lambda r: (r.median_steps, r.mean_steps))
        ratio = by["full"].median_steps / best.median_steps
        mean_best = min(baselines, key=lambda r: r.mean_steps)
        mean_ratio = by["full"].mean_steps / mean_best.mean_steps
        lines.append(f"budget {budget}: steps to the lineage's best, full policy vs best baseline: "
                     f"median {by['full'].median_steps:g} vs {best.median_steps:g} ({best.policy}), "
                     f"ratio {ratio:.2f}; mean {by['full'].mean_steps:.2f} vs "
                     f"{mean_best.mean_steps:.2f} ({mean_best.policy}), ratio {mean_ratio:.2f} "
                     f"(target <= 0.6: {'met' if ratio <= 0.6 else 'NOT met'}; not reached "
                     f"counts as budget + 1)")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="htam-bench quality", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks-dir", default="configs/tasks")
    ap.add_argument("--htamd", default="", help="htamd binary (default build/daemon/htamd)")
    ap.add_argument("--build-dir", default="", help="build folder holding daemon/htamd")
    ap.add_argument("--budgets", default="6,12")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 1..N (default 5)")
    ap.add_argument("--policies", default=",".join(ALL_POLICIES))
    ap.add_argument("--tasks", default="", help="comma-separated held-out tasks (default all)")
    ap.add_argument("--backend", default="", help="hold out only this backend's lineages")
    ap.add_argument("--work", default="", help="scratch folder (default: a temporary one)")
    ap.add_argument("--json", dest="json_out", default="", help="write every run as JSON here")
    ap.add_argument("--per-task", action="store_true",
                    help="also print median steps to the best per held-out task")
    ap.add_argument("--live", action="store_true",
                    help="evaluate every lineage variant once through htamd's gate on this "
                         "machine and use the measured outcomes instead of the recorded ones")
    ap.add_argument("--option", action="append", default=[],
                    help="htamd option key=value for every htamd this benchmark starts")
    ap.add_argument("--svg", default="",
                    help="plot (SVG) of the geomean best speedup after each step per policy, for "
                         "the largest budget (default: beside --json, same name, .svg)")
    ap.add_argument("--verbose", "-v", action="store_true")
    ap.add_argument("--trace", action="store_true",
                    help="print every step of htamd's policies: the kernel, what the lineage "
                         "offers there, the choice and the top three scores (to stderr)")
    args = ap.parse_args(argv)
    htamd = args.htamd or find_htamd(args.build_dir)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in ALL_POLICIES]
    if unknown:
        print(f"htam-bench quality: unknown policies {unknown}; known: {ALL_POLICIES}",
              file=sys.stderr)
        return 2
    if not htamd and any(p in ("full", "empty", "no-history", "flat") for p in policies):
        print("htam-bench quality: htamd not found (build it, or pass --htamd)", file=sys.stderr)
        return 2
    work = args.work or tempfile.mkdtemp(prefix="htam-quality-")
    os.makedirs(work, exist_ok=True)
    os.chmod(work, 0o755)  # evaluation workers run unprivileged when htamd runs as root
    cfg = BenchConfig(tasks_dir=os.path.abspath(args.tasks_dir), htamd=htamd, work=work,
                      budgets=[int(b) for b in args.budgets.split(",") if b],
                      seeds=list(range(1, args.seeds + 1)), policies=policies,
                      only_tasks=[t for t in args.tasks.split(",") if t], backend=args.backend,
                      cwd=os.getcwd(), verbose=args.verbose, trace=args.trace,
                      live=args.live,
                      options=dict(kv.split("=", 1) for kv in args.option if "=" in kv))
    if args.live and not htamd:
        print("htam-bench quality: --live needs htamd (build it, or pass --htamd)",
              file=sys.stderr)
        return 2
    t0 = time.monotonic()
    try:
        results = run_benchmark(cfg)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    if args.json_out and not results:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump({"runs": [], "rows": [], "live_outcomes": cfg.live_outcomes}, f, indent=1)
    if not results:
        print("htam-bench quality: nothing to hold out (see above)")
        return 3
    rows = summarize(results)
    held = sorted({f"{r.task}/{r.backend}" for r in results})
    print(f"htam-bench quality: {len(held)} held-out lineages ({', '.join(held)}), "
          f"seeds {len(cfg.seeds)}, {time.monotonic() - t0:.0f}s"
          + (f", outcomes measured live ({len(cfg.live_outcomes)} variants)" if cfg.live
             else ", recorded outcomes"))
    print(markdown(rows))
    if args.per_task:
        print("\nmedian steps to the lineage's best per held-out task ('-': not reached):\n")
        print(per_task(results))
    print(verdict(rows))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump({"runs": [asdict(r) for r in results], "rows": [asdict(r) for r in rows],
                       "live_outcomes": cfg.live_outcomes}, f, indent=1)
    svg = args.svg or (os.path.splitext(args.json_out)[0] + ".svg" if args.json_out else "")
    if svg:
        with open(svg, "w", encoding="utf-8") as f:
            f.write(svg_plot(results, f"quality: {len(held)} held-out lineages, "
                                      f"{len(cfg.seeds)} seeds"))
    return 1 if any(r.error for r in results) else 0
