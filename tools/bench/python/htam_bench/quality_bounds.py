"""How much can any memory gain on this suite? Reference policies for htam-bench quality.

Replays, in the benchmark's own World and with its metric, policies that need no daemon:

  prior-sweep      the seed taxonomy's priors in order, never repeating a direction on the same
                   kernel (what the cold-start policy does once failures keep their penalty)
  edge-oracle      knows every improving step (previous direction -> direction) of the OTHER
                   tasks' lineages and follows the most frequent one from the current kernel's
                   last direction; otherwise the prior sweep
  near-oracle      the same, but only from tasks whose policy state is close to the held-out
                   task's (cosine >= 0.9 over the state part of the transition key: category,
                   size, arithmetic intensity, as htamd computes it at step 0)

The oracles read the other lineages directly (the held-out lineage never), so they bound what
transfer of directions between these lineages can buy: if even they do not reach the best in
0.6x the steps of the prior sweep, no policy over this memory does.

  PYTHONPATH=sdk/python:tools/bench/python /usr/bin/python3 -m htam_bench.quality_bounds [--tasks-dir configs/tasks]
      [--seeds 3] [--budgets 6,12]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import Counter
from typing import Dict, List, Optional, Tuple

from htam_agent.lineage import ROOT, Lineage, Task, discover_tasks

from .quality import Policy, run_one, usable


def improving_edges(lineage: Lineage) -> List[Tuple[str, str]]:
    """(previous direction or START, direction) of every step the replay world can take that
    raises the best."""
    out: List[Tuple[str, str]] = []

    def walk(node: str, prev: str, speedup: float) -> None:
        for v in lineage.children(node):
            if v.ok and v.speedup > speedup:
                out.append((prev, v.direction))
                walk(v.id, v.direction, v.speedup)

    walk(ROOT, "START", 1.0)
    return out


# ---- the state part of htamd's transition key at step 0 (daemon/memory/policy.cc TransitionKey)

def _index_key64(s: str) -> int:
    """base/hash.h IndexKey64: the category's slot in htamd's transition key."""
    h = 1469598103934665603
    for c in s.encode():
        h = ((h ^ c) * 1099511628211) & (2 ** 64 - 1)
    return h


def _bins(n: int, x: float, lo: float, hi: float) -> List[float]:
    step = (hi - lo) / (n - 1)
    x = min(max(x, lo), hi)
    return [math.exp(-((x - (lo + i * step)) / step) ** 2) for i in range(n)]


def _unit(v: List[float], w: float) -> List[float]:
    n = math.sqrt(sum(a * a for a in v))
    return [a * w / n for a in v] if n > 0 else v


def state_key(task: Task) -> List[float]:
    spec = task.spec
    shape = dict(spec["shapes"]["seen"][0])
    flops = float(eval(spec["flops"], {"__builtins__": {}}, shape))  # noqa: S307 (task files)
    nbytes = float(eval(spec["bytes"], {"__builtins__": {}}, shape))  # noqa: S307
    cat = [0.0] * 8
    if task.category:
        cat[_index_key64(task.category) % 8] = 1.0
    return (_unit(cat, 1.0) + _unit([1.0, 0, 0, 0, 0], 1.0) +
            _unit(_bins(5, math.log10(nbytes), 3, 11), 0.6) +
            _unit(_bins(5, math.log2(1 + flops / nbytes), 0, 8), 0.6) +
            _unit(_bins(4, 0.0, -0.5, 2.0), 0.5) + _unit(_bins(4, 0, 0, 12), 0.3) + [0.3])


def cosine(a: List[float], b: List[float]) -> float:
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) *
                                                       sum(y * y for y in b))


class SweepPolicy(Policy):
    """Follows known edges from the current kernel's last direction (most frequent first), then
    the seed priors; never repeats a direction on the same kernel."""

    def __init__(self, name: str, prior_order: List[str], edges: List[Tuple[str, str]]):
        self.name, self.prior_order, self.edges = name, prior_order, edges

    def begin(self, task, lineage, budget):
        self.prev, self.tried = "START", set()

    def choose(self, step):
        counts = Counter(b for a, b in self.edges if a == self.prev)
        for d, _ in counts.most_common():
            if d not in self.tried:
                return d
        for d in self.prior_order:
            if d not in self.tried:
                return d
        return self.prior_order[0]

    def feedback(self, direction, variant, outcome, before):
        if outcome.ok and outcome.speedup > before:
            self.prev, self.tried = direction, set()
        else:
            self.tried.add(direction)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m htam_bench.quality_bounds",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks-dir", default="configs/tasks")
    ap.add_argument("--seed-taxonomy", default="configs/seed_taxonomy.json")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budgets", default="6,12")
    ap.add_argument("--backend", default="cuda")
    args = ap.parse_args(argv)
    with open(args.seed_taxonomy, encoding="utf-8") as f:
        taxonomy = json.load(f)["directions"]
    prior_order = [d["name"] for d in sorted(taxonomy, key=lambda d: -d.get("prior", 0))]
    tasks = [t for t in discover_tasks(args.tasks_dir)
             if args.backend in t.lineages and usable(t.lineages[args.backend])]
    edges = {t.name: improving_edges(t.lineages[args.backend]) for t in tasks}
    keys = {t.name: state_key(t) for t in tasks}
    print("| budget | policy | median steps to best | mean steps | reached best | per task |")
    print("|---|---|---|---|---|---|")
    for budget in [int(b) for b in args.budgets.split(",") if b]:
        for name in ("prior-sweep", "edge-oracle", "near-oracle"):
            steps: List[int] = []
            per: Dict[str, List[int]] = {}
            for t in tasks:
                others = [o for o in tasks if o.name != t.name]
                if name == "near-oracle":
                    others = [o for o in others if cosine(keys[o.name], keys[t.name]) >= 0.9]
                known = [] if name == "prior-sweep" else [e for o in others for e in edges[o.name]]
                for seed in range(1, args.seeds + 1):
                    r = run_one(SweepPolicy(name, prior_order, known), t,
                                t.lineages[args.backend], budget, seed)
                    s = r.steps_to_best or budget + 1
                    steps.append(s)
                    per.setdefault(t.name, []).append(s)
            cells = ", ".join(f"{k} {statistics.median(v):g}" for k, v in per.items())
            print(f"| {budget} | {name} | {statistics.median(steps):g} | "
                  f"{statistics.mean(steps):.2f} | "
                  f"{sum(1 for s in steps if s <= budget) / len(steps):.0%} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
