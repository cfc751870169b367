"""htam-bench world bench: does the memory reach a fast kernel in fewer steps on families it never
saw? Leave-one-family-out over the measured world (world_env), no GPU needed:

  for each evaluated family F (the split's held-out families, or --families-set dev):
    memory M_F = a fresh htamd store that learned from sessions of the full policy on every task of
                 every OTHER family (NextStep, the world's answer, Record; budget --budget)
    for each task of F, seed, policy: a session of --budget steps on the task; each step
      (direction D, strategies S1..Sk) is answered by the world with the measured variant that
      applies the first applicable strategy, or "not applicable here"; daemon-backed policies
      record every outcome through Record, as in real use.

With --live (on a machine that can run the evaluated families' backend), the evaluated sessions of
the daemon-backed policies Submit every variant the world answers with to htamd, which compiles,
verifies and times it through its gate and records the measured outcome (as a real agent's step);
the world's step rule and the metrics still read the table, so the numbers stay comparable, and
the run reports how the live outcomes agree with the table's (same status; the live speedup over
the table's for variants Ok in both). The memory's training sessions record the table's outcomes
(measured by the same gate when the table was built).

With --leave shape, the memory for each task T is trained on every other task instead, the other
shapes of T's family included (leave-one-shape-out).

With --bottleneck-state, daemon-backed sessions (training and evaluation) pass the current kernel's
bottleneck class in NextStep, derived from the table as htamd's roofline would measure it
(world_env.classify_bottleneck: the task's bytes and FLOPs over the variant's median time against
the H100's measured ceilings; thresholds --bottleneck-thresholds), as a client with a profiler
would; without it every state is Unknown.

Policies:
  full        htamd's policy on M_F (NextStep's direction and its ranked strategies)
  cold        htamd's policy on an empty store (seed priors only)
  no-history  htamd's policy on M_F with memory.history_weight = 0
  flat        every strategy of M_F in one list ranked by measured effect and text similarity to
              the task, no directions, transitions or state (client-side over the store's stats)
  ucb         per-task UCB1 over directions, the direction's strategies in taxonomy order
  random      a random direction each step, its strategies in random order
  oracle      the bound: the table's fastest improving path (world_env.oracle), any knob to any
              value in one step
  seq-bound   the bound of a policy that names one strategy per step (world_env.strategy_bound):
              the sequence of the family's strategies, stepped by the world's own rule, that
              reaches within 5 % soonest (searched up to 7 steps)
  shape-transfer  with --leave shape only: a reference for what a memory of the family's other
              shapes could hand this one (world_env.shape_transfer): the one order of strategies
              that does best on average over the other shapes' whole tables, played on this
              shape unchanged; no policy that learns from the other shapes alone and plays a
              fixed order does better on average than the order chosen this way
  family-transfer  with --leave family only: a reference for what the other families could hand
              a new one as one ranked list (world_env.best_priority_list): the list of strategies
              that, offered unchanged at every step, does best on average over the training
              families' whole tables (a local optimum of moving one strategy at a time), played
              on the evaluated family's tasks
  kin-transfer  with --leave shape only: shape-transfer fitted on the --kin-neighbours other
              shapes nearest to this one by their dimensions (world_env.kin_transfer: distance of
              the dimensions' base-2 logarithms), what a memory that weighed the family's shapes by
              the dimensions a task states could hand it
  order-bound  the bound of a policy that hands every shape of a family the same fixed order: the
              best such order over the whole tables of all the family's shapes, this one included
              (world_env.best_fixed_order), played on this shape; what shape-transfer and
              kin-transfer lose against it is what one shape's table cannot be foretold from the
              others

Metrics (over tasks x seeds): steps to within 5 % of the task's best variant (not reached =
budget + 1), geometric-mean best speedup after 6 and after 12 steps (sessions are opened with the
full budget; the 6-step figure is the same session after 6 steps), regret area = mean over steps
of log(task best / session best), share of failed and of not-applicable steps.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from htam_agent.lineage import LANGUAGE_OF_BACKEND
from htam_agent.shipped import find_shared_file

from . import world_families as wf
from .bench_sessions import Policy, cosine, daemon_on_copy, policy_session, text_bag
from .world_plot import svg_curves
from .world_env import (DEFAULT_SPLIT, DEFAULT_TABLE, H100_ROOFLINE, Roofline, TaskView,
                        WorldSession, WorldTable, load_split, oracle, split_advice,
                        best_fixed_order, best_priority_list, kin_transfer, list_steps,
                        play_order, shape_transfer, strategy_bound)

DAEMON_POLICIES = ("full", "cold", "no-history")
# The client the benchmark's sessions name: they replay outcomes htam's gate measured when the
# table was built, so every htamd of the benchmark vouches for it (memory.trusted_clients); the
# poisoning run's adversary is another client, never vouched for.
BENCH_CLIENT = "htam-bench world"
POISON_CLIENT = "adversary"
ALL_POLICIES = ("full", "cold", "no-history", "flat", "ucb", "random", "oracle", "seq-bound",
                "order-bound", "shape-transfer", "kin-transfer", "family-transfer")
# References that learn from one protocol's training set only: not in the default policy list.
TRANSFER_POLICIES = {"shape-transfer": "shape", "kin-transfer": "shape",
                     "family-transfer": "family"}
# Named only when asked for (an exhaustive search per family): not in the default policy list.
ON_REQUEST_POLICIES = set(TRANSFER_POLICIES) | {"order-bound"}
FAILURES = {"compile_error", "crash", "timeout", "incorrect"}


def advice_strategy(name: str, title: str, known: Dict[str, str]) -> str:
    """The taxonomy strategy an agent applies for one piece of advice: the strategy itself, or for
    a strategy the memory learned from a summary ("vectorized-16-byte-access: VEC=4 (...)"), the
    taxonomy strategy its text names first. "" when the advice names none."""
    if name in known:
        return name
    head = (title or "").split(":", 1)[0].strip()
    return head if head in known else ""


_SETTING = re.compile(r"^\s*([A-Z][A-Z0-9_]*)=(-?\d+)\b")


def advice_item(name: str, title: str, known: Dict[str, str], hints: bool) -> str:
    """advice_strategy, and with `hints` the knob setting a learned summary names
    ("strategy: KNOB=V (...)" gives "strategy@KNOB=V"): an agent reading "VEC=4" sets VEC=4 where
    its kernel has such a knob (world_env.split_advice). "" when the advice names no strategy."""
    s = advice_strategy(name, title, known)
    if not s or not hints or name in known:
        return s
    m = _SETTING.match((title or "").split(":", 1)[1] if ":" in (title or "") else "")
    return f"{s}@{m.group(1)}={m.group(2)}" if m else s


def taxonomy_order() -> List[Tuple[str, List[str]]]:
    with open(find_shared_file("seed_taxonomy.json") or "seed_taxonomy.json") as f:
        t = json.load(f)
    return [(d["name"], [s["name"] for s in d["strategies"]]) for d in t["directions"]]


# ---------------------------------------------------------------- policies

class RandomPolicy(Policy):
    name = "random"

    def __init__(self, rng: random.Random):
        self.rng, self.tax = rng, taxonomy_order()

    def choose(self, session):
        d, strategies = self.rng.choice(self.tax)
        s = list(strategies)
        self.rng.shuffle(s)
        return d, s


class UCBPolicy(Policy):
    """UCB1 over directions within one session; reward = log gain over the session best."""
    name = "ucb"

    def __init__(self, rng: random.Random, c: float = math.sqrt(2)):
        self.rng, self.c, self.tax = rng, c, dict(taxonomy_order())

    def begin(self, task, budget):
        self.order = list(self.tax)
        self.rng.shuffle(self.order)
        self.n = {d: 0 for d in self.order}
        self.total = {d: 0.0 for d in self.order}
        self.t = 0

    def choose(self, session):
        for d in self.order:
            if self.n[d] == 0:
                return d, self.tax[d]
        d = max(self.order, key=lambda d: self.total[d] / self.n[d]
                + self.c * math.sqrt(math.log(self.t) / self.n[d]))
        return d, self.tax[d]

    def feedback(self, res, before, session):
        d = res.direction or ""
        if d not in self.n:
            return
        self.t += 1
        self.n[d] += 1
        if res.improved:
            self.total[d] += math.log(res.best / before)


class FlatPolicy(Policy):
    """One list of strategies (no directions, transitions or state), ranked by the store's
    measured effect plus text similarity to the task; each step offers the whole list."""
    name = "flat"

    def __init__(self, stats: Sequence[dict], rng: random.Random, hints: bool = False):
        self.stats, self.rng, self.hints = list(stats), rng, hints
        self.dir_of = {s: d for d, ss in taxonomy_order() for s in ss}

    def begin(self, task, budget):
        q = text_bag(f"{task.name} {task.family.spec.get('category', '')} "
                     f"{task.family.spec.get('description', '')}")
        ranked = []
        for s in self.stats:
            name = advice_item(s["name"], s.get("title", ""), self.dir_of, self.hints)
            if not name:
                continue
            sim = cosine(q, text_bag(f"{s['name']} {s.get('title', '')} "
                                     f"{s.get('description', '')}"))
            rate = (s.get("successes", 0) + 1.0) / (s.get("uses", 0) + 2.0)
            ranked.append((sim + rate * max(s.get("mean_gain", 0.0), 0.0)
                           + 1e-6 * self.rng.random(), name))
        ranked.sort(reverse=True)
        self.ranked = []
        for _, n in ranked:
            if n not in self.ranked:
                self.ranked.append(n)

    def choose(self, session):
        first = next((s for s in self.ranked if session.applicable(s)), "")
        return self.dir_of.get(split_advice(first)[0], ""), self.ranked


class DaemonPolicy(Policy):
    """htamd's policy: NextStep gives the direction and its ranked strategies; the outcome of the
    world's answer goes back through Record (with the applied strategy and the variant's source)."""

    def __init__(self, name: str, daemon, strategy_ids: Dict[str, int], hints: bool = False,
                 roofline: Optional[Roofline] = None, live: Optional[List[dict]] = None):
        self.name, self.d, self.sid, self.hints = name, daemon, strategy_ids, hints
        self.roofline = roofline  # None: no bottleneck in the state (Unknown)
        self.live = live  # not None: Submit every answered variant; its outcomes are added here
        self.dir_of = {s: d for d, ss in taxonomy_order() for s in ss}
        self.session = 0
        self.last = None

    def begin(self, task, budget):
        self.task = task
        self.session = self.d.open_session(task.name, task.family.backend, budget=budget,
                                           client=BENCH_CLIENT, model="world").session_id

    def choose(self, session):
        # The derived bottleneck uses the H100's ceilings: none for another backend's tasks.
        bottleneck = (session.bottleneck(self.roofline)
                      if self.roofline and self.task.family.backend == "cuda" else "")
        # The environment walks the whole ranked list for the first strategy that fits the
        # kernel, as an agent would that reads on past the advice that does not fit: the full
        # answer (memory.top_k_strategies; the compact default lists memory.listed_strategies).
        self.last = self.d.next_step(self.session, bottleneck=bottleneck, full=True)
        out: List[str] = []
        self.advised_dir: Dict[str, int] = {}  # applied strategy -> direction of its advice
        for s in self.last.strategies:
            a = advice_item(s.name, s.title, self.dir_of, self.hints)
            if a and a not in out:
                out.append(a)
                self.advised_dir.setdefault(split_advice(a)[0], s.direction_id)
        return self.last.direction, out

    def feedback(self, res, before, session):
        from htam_agent.model import OutcomeView
        direction = self.advised_dir.get(res.applied) or self.last.direction_id
        if res.applicable and self.live is not None:
            self.submit(res, session, direction)
            return
        if res.applicable:
            out = OutcomeView(status=res.status, speedup=res.speedup if res.status == "ok" else 0.0,
                              best_speedup=res.best, verified=False,
                              median_us=float(self.task.rows[res.variant].get("median_us") or 0.0))
            summary = f"{res.applied}: {res.knob}={res.value} ({res.variant})"
            # The improved kernel's source (the session's new best), as an agent would send it.
            source = (wf.source(self.task.family, session.knobs, self.task.shape.dtype)
                      if res.improved else "")
            ids = [self.sid[res.applied]] if res.applied in self.sid else []
        else:
            out = OutcomeView(status="ok", speedup=before, best_speedup=before, verified=False,
                              diagnostics=res.note)
            summary, source, ids = res.note, "", []
        # The direction of the advice the step applied (the answer's own direction when its
        # strategies all come from it), as an agent reports what it did.
        self.d.record(self.session, direction, ids, summary, out, source)

    def submit(self, res, session, direction):
        """--live: the variant the world answered with goes through htamd's gate (Submit, wait);
        htamd records what it measured. The table's outcome is kept beside it."""
        fam = self.task.family
        knobs = dict(session.knobs)  # the new kernel when the step improved, else the one before
        knobs[res.knob] = res.value
        source = wf.source(fam, knobs, self.task.shape.dtype)
        summary = f"{res.applied}: {res.knob}={res.value} ({res.variant})"
        ids = [self.sid[res.applied]] if res.applied in self.sid else []
        row = {"task": self.task.name, "variant": res.variant, "policy": self.name,
               "table_status": res.status, "table_speedup": res.speedup}
        try:
            language = LANGUAGE_OF_BACKEND.get(fam.backend, fam.backend)
            out = self.d.submit(self.session, source, language, direction, ids, summary)
            row.update(live_status=out.status, live_speedup=out.speedup if out.ok else 0.0,
                       live_median_us=out.median_us, diagnostics=out.diagnostics[:200])
        except Exception as e:  # noqa: BLE001 - a refused job is reported, the run goes on
            row.update(live_status="refused", live_speedup=0.0, diagnostics=str(e)[:200])
        self.live.append(row)

    def end(self):
        try:
            self.d.close(self.session)
        except Exception:  # noqa: BLE001 - a session that cannot close loses nothing measured
            pass


# ---------------------------------------------------------------- one run

@dataclass
class RunResult:
    family: str
    task: str
    policy: str
    seed: int
    budget: int
    target: float
    best_at: List[float] = field(default_factory=list)   # session best after each step
    steps_to_5: Optional[int] = None
    failures: int = 0
    noops: int = 0
    trace: List[str] = field(default_factory=list)
    error: str = ""


def run_session(policy: Policy, task: TaskView, budget: int, seed: int) -> RunResult:
    s = WorldSession(task)
    r = RunResult(task.family.name, task.name, policy.name, seed, budget, task.best)
    with policy_session(policy, task, budget):
        for i in range(budget):
            d, strategies = policy.choose(s)
            before = s.best
            res = s.step(d, strategies)
            policy.feedback(res, before, s)
            r.best_at.append(s.best)
            r.trace.append(f"{d}:{res.applied or '-'}:{res.status or 'n/a'}:{s.best:.2f}")
            if not res.applicable:
                r.noops += 1
            elif res.status in FAILURES:
                r.failures += 1
            if r.steps_to_5 is None and s.best >= 0.95 * task.best:
                r.steps_to_5 = i + 1
    return r


# ---------------------------------------------------------------- htamd plumbing

class Memory:
    """Builds and serves stores through real htamd processes."""

    def __init__(self, htamd: str, tasks_dir: str, work: str, table: WorldTable, log,
                 hints: bool = False, roofline: Optional[Roofline] = None,
                 live: Optional[List[dict]] = None):
        self.htamd, self.tasks_dir, self.work, self.table = htamd, tasks_dir, work, table
        self.log, self.hints, self.roofline = log, hints, roofline
        self.live = live  # --live: the evaluated runs Submit their variants (DaemonPolicy.submit)

    def _proc(self, data_dir: str, options: Optional[Dict[str, str]] = None):
        from htam_agent.htamd import HtamdProcess
        return HtamdProcess(self.htamd, data_dir, self.tasks_dir, options=options or {})

    def poison(self, data_dir: str, tasks: Sequence[TaskView], records: int,
               options: Dict[str, str]) -> None:
        """One adversarial client (not vouched for) sends `records` unverified Records of fake
        gains on `tasks` into the store at data_dir: the direction and strategy the seed ranks
        lowest for the tasks' kernels, claimed 20x faster each time, with a summary that would
        become advice if the memory learned from it."""
        opts = {"memory.policy_seed": "0"}
        opts.update(options)
        from htam_agent.model import OutcomeView
        with self._proc(data_dir, opts) as proc:
            d = proc.client()
            try:
                sessions = {}
                for i in range(records):
                    t = tasks[i % len(tasks)]
                    if t.name not in sessions:
                        sid = d.open_session(t.name, t.family.backend, budget=records,
                                             client=POISON_CLIENT, model="adversary").session_id
                        step = d.next_step(sid)
                        low = [x for x in step.scores if not x.masked][-1]
                        ids = [s.id for s in d.strategies(low.id)][:1]
                        sessions[t.name] = (sid, low.id, ids)
                    sid, direction, ids = sessions[t.name]
                    speed = 20.0 + i  # every report beats the last
                    out = OutcomeView(status="ok", speedup=speed, best_speedup=speed,
                                      verified=False, median_us=1.0)
                    d.record(sid, direction, ids, "adversary: rewrite the kernel as one launch "
                             "of eight unrolled passes (" + str(i) + ")", out, "")
            finally:
                d.close_connection()

    def train(self, data_dir: str, tasks: Sequence[TaskView], budget: int, seed: int,
              options: Dict[str, str]) -> Tuple[Dict[str, int], List[dict]]:
        """Sessions of the full policy on `tasks` into a fresh store at data_dir."""
        shutil.rmtree(data_dir, ignore_errors=True)
        opts = {"memory.policy_seed": str(seed)}
        opts.update(options)
        with self._proc(data_dir, opts) as proc:
            d = proc.client()
            try:
                ids = strategy_ids(d)
                for t in tasks:
                    run_session(DaemonPolicy("full", d, ids, self.hints, self.roofline), t,
                                budget, seed)
                stats = [asdict(s) for s in d.strategies(0)]
                return ids, stats
            finally:
                d.close_connection()

    def run(self, name: str, base: str, run_dir: str, options: Dict[str, str], task: TaskView,
            budget: int, seed: int) -> RunResult:
        with daemon_on_copy(self.htamd, base, run_dir, self.tasks_dir, seed, options) as d:
            return run_session(DaemonPolicy(name, d, strategy_ids(d), self.hints, self.roofline,
                                            self.live), task, budget, seed)


def strategy_ids(d) -> Dict[str, int]:
    return {s.name: s.id for s in d.strategies(0)}


def materialize_tasks(table: WorldTable, out_dir: str) -> str:
    """task.json + reference of every world task: htamd opens sessions on them by name."""
    for t in table.tasks.values():
        d = os.path.join(out_dir, t.name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "task.json"), "w") as f:
            json.dump(wf.task_json(t.family, t.shape), f, indent=1)
        with open(os.path.join(d, "reference" + t.family.ext), "w") as f:
            f.write(wf.source(t.family, t.family.baseline(), t.shape.dtype))
    return out_dir


# ---------------------------------------------------------------- orchestration

def bottleneck_roofline(a) -> Optional[Roofline]:
    """--bottleneck-state: the ceilings and thresholds of the derived bottleneck; else None."""
    if not getattr(a, "bottleneck_state", False):
        return None
    th = [float(x) for x in (a.bottleneck_thresholds or "").split(",") if x.strip()]
    if len(th) != 3:
        raise SystemExit("world: --bottleneck-thresholds wants MEMORY_PCT,COMPUTE_PCT,LAUNCH_US")
    return Roofline(H100_ROOFLINE.copy_bytes_per_s, H100_ROOFLINE.fp32_flops,
                    H100_ROOFLINE.tensor16_flops, th[0], th[1], th[2])


def run_benchmark(a, log) -> List[RunResult]:
    table = WorldTable.load(a.table, a.families)
    dev, held = load_split(a.split)
    if a.on.startswith("backend:"):  # every measured family of that backend
        want = a.on.split(":", 1)[1]
        evaluated = sorted({t.family.name for t in table.tasks.values()
                            if t.family.backend == want})
    else:
        evaluated = held if a.on == "held-out" else dev if a.on == "dev" else a.on.split(",")
    if a.only_families:
        evaluated = [f for f in evaluated if f in a.only_families]
    work = a.work or tempfile.mkdtemp(prefix="htam-world-bench-")
    os.makedirs(work, exist_ok=True)
    options = {} if getattr(a, "no_vouch", False) else {"memory.trusted_clients": BENCH_CLIENT}
    options.update(dict(kv.split("=", 1) for kv in (a.option or [])))
    # --variant NAME:key=value,key=value: the full policy on the same memory with other options.
    variants = {}
    for v in a.variant or []:
        name, _, kvs = v.partition(":")
        variants[name] = dict(kv.split("=", 1) for kv in kvs.split(",") if kv)
    mem = None
    if any(p in a.policies for p in DAEMON_POLICIES + ("flat",) + tuple(variants)):
        from htam_agent.htamd import find_htamd
        htamd = a.htamd or find_htamd(os.environ.get("HTAM_BUILD_DIR", ""))
        mem = Memory(htamd, materialize_tasks(table, os.path.join(work, "tasks")), work, table, log,
                     a.value_hints, bottleneck_roofline(a),
                     a.live_outcomes if getattr(a, "live", False) else None)
    results: List[RunResult] = []
    for fam in evaluated:
        tasks = sorted(table.family_tasks(fam), key=lambda t: t.name)
        if a.max_tasks:
            tasks = tasks[: a.max_tasks]
        if not tasks:
            log(f"world: family {fam} has no measured tasks; skipped")
            continue
        t0 = time.monotonic()
        base = os.path.join(work, f"memory-{fam}")
        stats: List[dict] = []
        learns = mem and any(p in a.policies for p in ("full", "no-history", "flat", *variants))

        def training_tasks(left_out) -> List[TaskView]:
            return [t for n, t in sorted(table.tasks.items()) if not left_out(t)
                    and (not a.train_families or t.family.name in a.train_families)
                    and (not a.train_backends or t.family.backend in a.train_backends)]

        def train_without(left_out) -> List[dict]:
            train = training_tasks(left_out)
            _, st = mem.train(base, train, a.budget, 0, options)
            if getattr(a, "poison", 0):  # after the flat list's statistics: it reads them here
                mem.poison(base, tasks if a.leave == "family" else [task], a.poison, options)
            log(f"world: memory without {fam if a.leave == 'family' else task.name}: "
                f"{len(train)} training sessions, {time.monotonic() - t0:.0f} s")
            return st

        if learns and a.leave == "family":
            stats = train_without(lambda t: t.family.name == fam)
        ranked: List[str] = []
        if "family-transfer" in a.policies:  # the training families' tables, once per family
            ranked, _ = best_priority_list(training_tasks(lambda t: t.family.name == fam),
                                           a.budget)
        family_order: List[str] = []
        if "order-bound" in a.policies:  # every shape's table, this family's own included
            family_order = best_fixed_order(table.family_tasks(fam), a.budget)
        for task in tasks:
            if learns and a.leave == "shape":  # the family's other shapes are in the memory
                stats = train_without(lambda t, name=task.name: t.name == name)
            for seed in a.seeds:
                for p in a.policies:
                    # Its own generator per (seed, task, policy): the same runs whatever else runs
                    # (crc32, not hash(): str hashes change between Python processes).
                    rng = random.Random(seed * 1000003 + zlib.crc32(f"{task.name}/{p}".encode()))
                    run_dir = os.path.join(work, f"run-{p}")
                    try:
                        if p == "full":
                            r = mem.run(p, base, run_dir, options, task, a.budget, seed)
                        elif p == "no-history":
                            o = dict(options)
                            o["memory.history_weight"] = "0"
                            r = mem.run(p, base, run_dir, o, task, a.budget, seed)
                        elif p in variants:  # full with extra htamd options
                            o = dict(options)
                            o.update(variants[p])
                            r = mem.run(p, base, run_dir, o, task, a.budget, seed)
                        elif p == "cold":
                            r = mem.run(p, "", run_dir, options, task, a.budget, seed)
                        elif p == "flat":
                            r = run_session(FlatPolicy(stats, rng, a.value_hints), task, a.budget,
                                            seed)
                        elif p == "ucb":
                            r = run_session(UCBPolicy(rng), task, a.budget, seed)
                        elif p == "random":
                            r = run_session(RandomPolicy(rng), task, a.budget, seed)
                        elif p == "oracle":
                            best_at, steps = oracle(task, a.budget)
                            r = RunResult(fam, task.name, p, seed, a.budget, task.best, best_at,
                                          steps)
                        elif p == "seq-bound":
                            best_at, steps = strategy_bound(task, a.budget)
                            r = RunResult(fam, task.name, p, seed, a.budget, task.best, best_at,
                                          steps)
                        elif p == "shape-transfer":
                            best_at, steps, order = shape_transfer(
                                task, [t for t in table.family_tasks(fam) if t.name != task.name],
                                a.budget)
                            r = RunResult(fam, task.name, p, seed, a.budget, task.best, best_at,
                                          steps, trace=order)
                        elif p == "kin-transfer":
                            best_at, steps, order = kin_transfer(
                                task, [t for t in table.family_tasks(fam) if t.name != task.name],
                                a.budget, a.kin_neighbours)
                            r = RunResult(fam, task.name, p, seed, a.budget, task.best, best_at,
                                          steps, trace=order)
                        elif p == "order-bound":
                            best_at, steps = play_order(task, family_order, a.budget)
                            r = RunResult(fam, task.name, p, seed, a.budget, task.best, best_at,
                                          steps, trace=list(family_order))
                        elif p == "family-transfer":
                            best_at, steps = list_steps(task, ranked, a.budget)
                            r = RunResult(fam, task.name, p, seed, a.budget, task.best, best_at,
                                          steps, trace=list(ranked))
                        else:
                            raise SystemExit(f"world: unknown policy {p}")
                    except Exception as e:  # noqa: BLE001 - one broken run is reported, not fatal
                        r = RunResult(fam, task.name, p, seed, a.budget, task.best, error=str(e))
                        log(f"world: {task.name} {p} seed {seed}: {e}")
                    r.policy = p
                    results.append(r)
                    if a.verbose:
                        log(f"  {task.name} {p:10s} seed {seed}: steps {r.steps_to_5 or '-'} best "
                            f"{(r.best_at or [1.0])[-1]:.2f}/{r.target:.2f} | {' '.join(r.trace)}")
        log(f"world: family {fam} done in {time.monotonic() - t0:.0f} s")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    return results


# ---------------------------------------------------------------- summary

def _geo(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


def best_after(r: RunResult, k: int) -> float:
    if not r.best_at:
        return 1.0
    return r.best_at[min(k, len(r.best_at)) - 1]


def _policies(results: List[RunResult]) -> List[str]:
    seen = {r.policy for r in results}
    return [p for p in ALL_POLICIES if p in seen] + sorted(seen - set(ALL_POLICIES))


def bootstrap_ci(xs: Sequence[float], reps: int = 2000, seed: int = 12345,
                 level: float = 0.95) -> Tuple[float, float]:
    """Percentile bootstrap interval of the mean of xs (runs resampled with replacement)."""
    if not xs:
        return (0.0, 0.0)
    rng = random.Random(seed)
    n = len(xs)
    means = sorted(sum(xs[rng.randrange(n)] for _ in range(n)) / n for _ in range(reps))
    lo = means[int((1 - level) / 2 * reps)]
    hi = means[min(reps - 1, int((1 + level) / 2 * reps))]
    return (lo, hi)


def summarize(results: List[RunResult]) -> List[dict]:
    rows = []
    for p in _policies(results):
        rs = [r for r in results if r.policy == p and not r.error]
        if not rs:
            continue
        b = rs[0].budget
        steps6 = [r.steps_to_5 if r.steps_to_5 and r.steps_to_5 <= 6 else 7 for r in rs]
        steps12 = [r.steps_to_5 if r.steps_to_5 else b + 1 for r in rs]
        regret = [statistics.mean(math.log(r.target / x) for x in r.best_at) for r in rs
                  if r.best_at]
        rows.append({
            "policy": p, "runs": len(rs),
            "errors": sum(1 for r in results if r.policy == p and r.error),
            "steps_to_5pct_at_6": statistics.mean(steps6),
            "steps_to_5pct_at_6_ci95": bootstrap_ci(steps6),
            "steps_to_5pct_at_12": statistics.mean(steps12),
            "reached_at_6": sum(s <= 6 for s in steps6) / len(rs),
            "reached_at_12": sum(r.steps_to_5 is not None for r in rs) / len(rs),
            "geo_speedup_at_6": _geo([best_after(r, 6) for r in rs]),
            "geo_speedup_at_12": _geo([best_after(r, 12) for r in rs]),
            "geo_target": _geo([r.target for r in rs]),
            "regret_area": statistics.mean(regret) if regret else 0.0,
            "failed_steps": sum(r.failures for r in rs) / max(1, sum(len(r.best_at) for r in rs)),
            "noop_steps": sum(r.noops for r in rs) / max(1, sum(len(r.best_at) for r in rs)),
        })
    return rows


def live_agreement(live: List[dict]) -> dict:
    """--live: how the outcomes htamd measured agree with the table's."""
    if not live:
        return {}
    both_ok = [x for x in live if x["table_status"] == "ok" and x["live_status"] == "ok"
               and x["table_speedup"] > 0 and x["live_speedup"] > 0]
    ratios = sorted(x["live_speedup"] / x["table_speedup"] for x in both_ok)
    return {
        "submitted": len(live),
        "same_status": sum(x["table_status"] == x["live_status"] for x in live) / len(live),
        "refused": sum(x["live_status"] == "refused" for x in live),
        "ok_in_both": len(both_ok),
        "speedup_ratio_median": statistics.median(ratios) if ratios else 0.0,
        "speedup_ratio_within_10pct": (sum(abs(r - 1) <= 0.10 for r in ratios) / len(ratios)
                                       if ratios else 0.0),
        "status_pairs": sorted({(x["table_status"], x["live_status"]) for x in live}),
    }


def markdown(rows: List[dict]) -> str:
    out = ["| policy | runs | steps to 5 % (B=6) | 95 % interval | steps to 5 % (B=12) | "
           "reached 6 / 12 | geomean best @6 | geomean best @12 | regret area | failed | n/a |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lo, hi = r.get("steps_to_5pct_at_6_ci95", (0.0, 0.0))
        out.append(f"| {r['policy']} | {r['runs']} | {r['steps_to_5pct_at_6']:.2f} | "
                   f"{lo:.2f}–{hi:.2f} | "
                   f"{r['steps_to_5pct_at_12']:.2f} | {r['reached_at_6']:.0%} / "
                   f"{r['reached_at_12']:.0%} | {r['geo_speedup_at_6']:.2f}x | "
                   f"{r['geo_speedup_at_12']:.2f}x | {r['regret_area']:.3f} | "
                   f"{r['failed_steps']:.0%} | {r['noop_steps']:.0%} |")
    return "\n".join(out)


def svg_plot(results: List[RunResult], title: str) -> str:
    """Geometric-mean best speedup after each step, one line per policy (world_plot.svg_curves)."""
    pols = [p for p in _policies(results) if any(r.policy == p and r.best_at for r in results)]
    if not pols:
        return ""
    b = max(len(r.best_at) for r in results if r.best_at)
    curves = {}
    for p in pols:
        rs = [r for r in results if r.policy == p and r.best_at]
        curves[p] = [1.0] + [_geo([best_after(r, k) for r in rs]) for k in range(1, b + 1)]
    return svg_curves(curves, title)


def curve_families(count: str, split: str, evaluated: Sequence[str]) -> List[str]:
    """The first `count` development families in a fixed order (drawn once with seed 0 from the
    split's development families), never an evaluated family; "all": every other family."""
    dev, held = load_split(split)
    if count == "all":
        return []  # the benchmark's default: every family but the evaluated one
    order = sorted(dev)
    random.Random(0).shuffle(order)
    order = [f for f in order if f not in evaluated]
    return order[: int(count)]


def learning_curve(a, log) -> int:
    """Steps to within 5 % (budget 6) against the number of training families."""
    counts = [c.strip() for c in a.learning_curve.split(",") if c.strip()]
    dev, held = load_split(a.split)
    evaluated = held if a.on == "held-out" else dev if a.on == "dev" else a.on.split(",")
    points = []
    for c in counts:
        a.train_families = curve_families(c, a.split, evaluated)
        t0 = time.monotonic()
        rows = summarize(run_benchmark(a, log))
        log(f"world: learning curve, {c} training families ({', '.join(a.train_families) or 'all'})"
            f": {time.monotonic() - t0:.0f} s")
        points.append({"families": c, "train": list(a.train_families), "summary": rows})
    pols = [r["policy"] for r in points[0]["summary"]] if points else []
    out = ["| training families | " + " | ".join(f"{p} (B=6) [95 % interval]" for p in pols) + " |",
           "|---|" + "---|" * len(pols)]
    for pt in points:
        cells = []
        for p in pols:
            r = next((x for x in pt["summary"] if x["policy"] == p), None)
            lo, hi = r["steps_to_5pct_at_6_ci95"] if r else (0, 0)
            cells.append(f"{r['steps_to_5pct_at_6']:.2f} [{lo:.2f}–{hi:.2f}]" if r else "-")
        out.append(f"| {pt['families']} | " + " | ".join(cells) + " |")
    md = "\n".join(out)
    print(f"world bench learning curve, leave one {a.leave} out, on {a.on} ({len(a.seeds)} seeds, "
          f"budget {a.budget})\n")
    print(md)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)) or ".", exist_ok=True)
        with open(a.out + ".json", "w") as f:
            json.dump({"args": {k: v for k, v in vars(a).items() if k != "live_outcomes"},
                       "curve": points}, f, indent=0)
        with open(a.out + ".md", "w") as f:
            f.write(md + "\n")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="htam-bench world bench")
    ap.add_argument("--table", default=DEFAULT_TABLE,
                    help="the measured table; several separated by commas (e.g. the H100 table "
                         "and configs/world/cpu_table.jsonl.gz)")
    ap.add_argument("--families", default=None, help="folder of family folders")
    ap.add_argument("--split", default=DEFAULT_SPLIT)
    ap.add_argument("--on", default="held-out",
                    help="held-out | dev | backend:NAME (every measured family of that backend) | "
                         "comma-separated family names")
    ap.add_argument("--only-families", nargs="*")
    ap.add_argument("--train-families", nargs="*",
                    help="families whose sessions the memory learns from (default: all others)")
    ap.add_argument("--train-backends", nargs="*",
                    help="backends whose families the memory learns from (default: all; e.g. "
                         "`--on backend:cpu --train-backends cuda` asks whether CUDA experience "
                         "helps CPU tasks)")
    ap.add_argument("--leave", choices=("family", "shape"), default="family",
                    help="leave one family out (default) or one task (shape) out of the memory")
    ap.add_argument("--policies", default=",".join(p for p in ALL_POLICIES
                                                    if p not in ON_REQUEST_POLICIES),
                    help="comma-separated (default: all but order-bound, shape-transfer, "
                         "kin-transfer and family-transfer; the transfer references need "
                         "--leave shape, kin-transfer too, and --leave family)")
    ap.add_argument("--kin-neighbours", type=int, default=4,
                    help="kin-transfer: how many of the family's other shapes, the nearest by "
                         "their dimensions, it fits its order on (default 4, chosen on the "
                         "development families)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=12)
    ap.add_argument("--max-tasks", type=int, default=0, help="per family (0 = all)")
    ap.add_argument("--option", action="append", help="htamd option key=value for every run")
    ap.add_argument("--variant", action="append",
                    help="NAME:key=value,... the full policy with other htamd options")
    ap.add_argument("--htamd", default="")
    ap.add_argument("--work", default="")
    ap.add_argument("--out", default="", help="write results (.json), table (.md), plot (.svg)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--live", action="store_true",
                    help="the evaluated sessions of daemon-backed policies Submit each variant to "
                         "htamd (evaluated on this machine) instead of recording the table's "
                         "outcome; the run reports how live and table outcomes agree")
    ap.add_argument("--value-hints", action="store_true",
                    help="advice that names a knob setting (a learned 'strategy: KNOB=V' summary) "
                         "applies that setting where it is a move here, as an agent reading it "
                         "would (default: the strategy's first move in value order)")
    ap.add_argument("--bottleneck-state", action="store_true",
                    help="daemon-backed sessions pass the current kernel's bottleneck class "
                         "(derived from the table by htamd's roofline rule) in NextStep")
    ap.add_argument("--bottleneck-thresholds",
                    default=f"{H100_ROOFLINE.memory_pct:g},{H100_ROOFLINE.compute_pct:g},"
                            f"{H100_ROOFLINE.launch_us:g}",
                    help="MEMORY_PCT,COMPUTE_PCT,LAUNCH_US of --bottleneck-state (default: "
                         "htamd's eval.cuda_profile_* thresholds)")
    ap.add_argument("--poison", type=int, default=0,
                    help="after training, one adversarial client (not vouched for) Records this "
                         "many unverified fake gains on the evaluated family's tasks")
    ap.add_argument("--no-vouch", action="store_true",
                    help="do not vouch for the benchmark's own client (its replayed outcomes are "
                         "then unverified evidence; also for an htamd without the option)")
    ap.add_argument("--learning-curve", default="",
                    help="COUNTS, e.g. 1,2,4,8,all: run the policies once per count with the "
                         "memory trained on that many development families (a fixed order drawn "
                         "from the split; never the evaluated family), and report steps against "
                         "the count")
    a = ap.parse_args(argv)
    a.policies = [p for p in a.policies.split(",") if p]
    for p, leave in TRANSFER_POLICIES.items():
        if p in a.policies and a.leave != leave:
            ap.error(f"{p} needs --leave {leave}: it learns from that protocol's training tasks")
    a.seeds = list(range(a.seeds))
    a.live_outcomes = []
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.monotonic()
    if a.learning_curve:
        return learning_curve(a, log)
    results = run_benchmark(a, log)
    rows = summarize(results)
    md = markdown(rows)
    print(f"world bench, leave one {a.leave} out, on {a.on} "
          f"({len({r.task for r in results})} tasks, {len(a.seeds)} seeds, "
          f"budget {a.budget}"
          f"{', bottleneck state ' + a.bottleneck_thresholds if a.bottleneck_state else ''}), "
          f"{time.monotonic() - t0:.0f} s\n")
    print(md)
    live = live_agreement(a.live_outcomes)
    if a.live:
        if not live:
            print("\nlive: no variant was submitted (no daemon-backed policy, or nothing applied)")
        else:
            print(f"\nlive: {live['submitted']} variants through htamd's gate; same status as the "
                  f"table {live['same_status']:.0%} ({live['refused']} refused); Ok in both "
                  f"{live['ok_in_both']}, live speedup / table speedup median "
                  f"{live['speedup_ratio_median']:.3f}, within 10 % "
                  f"{live['speedup_ratio_within_10pct']:.0%}")
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)) or ".", exist_ok=True)
        with open(a.out + ".json", "w") as f:
            json.dump({"args": {k: v for k, v in vars(a).items() if k != "live_outcomes"},
                       "summary": rows, "runs": [asdict(r) for r in results],
                       "live": {"agreement": live, "outcomes": a.live_outcomes}}, f, indent=0)
        with open(a.out + ".md", "w") as f:
            f.write(md + "\n")
        with open(a.out + ".svg", "w") as f:
            f.write(svg_plot(results, f"world, leave one {a.leave} out, on {a.on}"))
    if a.live and (not live or live["refused"]):
        return 1
    return 0 if rows and all(r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
