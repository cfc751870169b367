"""The replay proposer, the lineage walk order and the quality benchmark's replay world, on the
fixture tasks in tests/integration/agent_fixtures (no daemon needed)."""

import json
import os
import random
import tempfile
import unittest

from htam_agent.importer import walk_order
from htam_agent.lineage import Lineage, LineageError, Variant, discover_tasks, load_task
from htam_agent.model import DirectionScoreView, OutcomeView, SessionView, StepView
from htam_agent.proposers import AgentContext, ReplayProposer
from htam_bench.quality_bounds import SweepPolicy, improving_edges
from htam_bench.quality import (Policy, RandomPolicy, UCBPolicy, World, markdown, reachable_best,
                                run_one, summarize, usable)

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_fixtures", "tasks")


def step(direction, ranked=()):
    scores = [DirectionScoreView(id=i + 1, name=n, score=1.0 - 0.1 * i)
              for i, n in enumerate([direction] + list(ranked))]
    return StepView(session_id=1, step=0, direction_id=1, direction=direction, scores=scores)


def ctx():
    return AgentContext(session=SessionView(session_id=1, task="fx_scale", backend="cpu"),
                        best_source="", best_speedup=1.0)


class Scripted(Policy):
    name = "scripted"

    def __init__(self, seq):
        self.seq = list(seq)

    def choose(self, i):
        return self.seq[i % len(self.seq)]


class ReplayProposerTest(unittest.TestCase):
    def setUp(self):
        self.task = load_task(os.path.join(FIXTURES, "fx_scale"))
        self.lin = self.task.lineages["cpu"]

    def test_follows_the_chosen_direction_from_the_current_best(self):
        p = ReplayProposer(self.task, self.lin, fallback=False)
        a = p.propose(ctx(), step("global-memory-access"))
        self.assertEqual(a.variant_id, "v1")
        self.assertIn("HTAM_KERNEL_ENTRY", a.source)
        self.assertTrue(a.summary.startswith("restrict-unrolled-contiguous-access: "))
        self.assertEqual(a.recorded.status, "ok")
        self.assertAlmostEqual(a.recorded.speedup, 1.4)
        p.observe(a, OutcomeView(status="ok", speedup=1.38))
        self.assertEqual(p.node, "v1")
        # A dead end under control-flow: proposed, fails, the current best stays.
        b = p.propose(ctx(), step("control-flow"))
        self.assertEqual(b.variant_id, "v2")
        self.assertEqual(b.recorded.status, "incorrect")
        p.observe(b, OutcomeView(status="incorrect", diagnostics="tail not written"))
        self.assertEqual(p.node, "v1")
        self.assertIsNone(p.propose(ctx(), step("control-flow")).source)  # tried already
        c = p.propose(ctx(), step("latency-hiding"))
        self.assertEqual(c.variant_id, "v3")
        p.observe(c, OutcomeView(status="ok", speedup=1.9))
        self.assertEqual(p.node, "v3")
        # Nothing below the best: no proposal, as an agent with nothing left would answer.
        none = p.propose(ctx(), step("global-memory-access"))
        self.assertIsNone(none.source)
        self.assertIn("no untried variant", none.note)

    def test_falls_back_to_the_next_ranked_direction(self):
        p = ReplayProposer(self.task, self.lin, fallback=True)
        a = p.propose(ctx(), step("fusion", ranked=["parameter-tuning", "global-memory-access"]))
        self.assertEqual(a.variant_id, "v1")
        self.assertEqual(a.direction, "global-memory-access")
        self.assertIn("no variant for the memory's choice fusion", a.note)

    def test_slower_measurement_within_noise_still_moves_along_the_lineage(self):
        p = ReplayProposer(self.task, self.lin, fallback=False)
        a = p.propose(ctx(), step("global-memory-access"))
        p.observe(a, OutcomeView(status="ok", speedup=0.97))  # timing noise on a busy host
        self.assertEqual(p.node, "v1")


class LineageTest(unittest.TestCase):
    def test_walk_order_puts_parents_first_and_the_best_path_last(self):
        lin = load_task(os.path.join(FIXTURES, "fx_scale")).lineages["cpu"]
        self.assertEqual([v.id for v in walk_order(lin)], ["v4", "v1", "v2", "v3"])
        self.assertEqual(lin.best().id, "v3")
        self.assertEqual(lin.ancestors("v3"), ["reference", "v1", "v3"])

    def test_discover_and_spec_hides_held_out_shapes(self):
        tasks = discover_tasks(FIXTURES)
        self.assertEqual([t.name for t in tasks], ["fx_relu", "fx_scale", "fx_square"])
        spec = tasks[1].spec_text()
        self.assertNotIn("4099", spec)
        self.assertIn("65536", spec)

    def test_bad_lineage_is_refused_with_its_path(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "task.json"), "w") as f:
                json.dump({"name": "bad", "lineage": "lineage.json"}, f)
            with open(os.path.join(d, "lineage.json"), "w") as f:
                json.dump({"task": "bad", "variants": [{"id": "v1", "file": "x.cu"}]}, f)
            with self.assertRaises(LineageError) as e:
                load_task(d)
            self.assertIn("lineage.json", str(e.exception))
            self.assertIn("parent", str(e.exception))


class QualityWorldTest(unittest.TestCase):
    def setUp(self):
        self.task = load_task(os.path.join(FIXTURES, "fx_relu"))
        self.lin = self.task.lineages["cpu"]

    def test_world_answers_directions_with_recorded_outcomes(self):
        self.assertTrue(usable(self.lin))
        w = World(self.lin, random.Random(1))
        v, o = w.act("fusion")
        self.assertIsNone(v)
        self.assertEqual(o.status, "ok")
        self.assertEqual(o.speedup, 1.0)
        v, o = w.act("on-chip-reuse-tiling")
        self.assertEqual((v.id, o.status), ("v4", "compile_error"))
        v, o = w.act("global-memory-access")
        self.assertEqual(v.id, "v1")
        self.assertFalse(w.reached)
        v, o = w.act("latency-hiding")
        self.assertEqual(v.id, "v3")
        self.assertTrue(w.reached)

    def test_target_is_the_best_the_world_can_reach(self):
        def var(vid, parent, direction, speedup):
            return Variant(vid, "x.cu", parent, direction, "s", expected="ok",
                           measured={"speedup": speedup})
        # v3 (2.0x) lies below v2, a detour slower than its parent v1: the world never moves to
        # v2, so v3 is nobody's target; v1 (1.5x) is.
        lin = Lineage("t", "cuda", [var("v1", "reference", "fusion", 1.5),
                                    var("v2", "v1", "algorithmic", 0.5),
                                    var("v3", "v2", "latency-hiding", 2.0)])
        self.assertEqual(lin.best_speedup(), 2.0)
        self.assertEqual(reachable_best(lin), 1.5)
        w = World(lin, random.Random(1))
        self.assertEqual(w.target, 1.5)
        w.act("fusion")
        self.assertTrue(w.reached)
        w.act("algorithmic")
        self.assertEqual(w.node, "v1")  # a slower variant does not become the current kernel
        self.assertEqual(reachable_best(self.lin), self.lin.best_speedup())

    def test_reference_bounds_follow_known_edges_then_priors(self):
        edges = improving_edges(self.lin)
        self.assertEqual(edges, [("START", "global-memory-access"),
                                 ("global-memory-access", "latency-hiding")])
        order = ["fusion", "global-memory-access", "latency-hiding"]
        sweep = run_one(SweepPolicy("prior-sweep", order, []), self.task, self.lin, 6, 1)
        # fusion (nothing), GMA (v1); on v1's kernel: fusion and GMA (nothing), latency-hiding (v3).
        self.assertEqual(sweep.directions[:5], ["fusion", "global-memory-access", "fusion",
                                                "global-memory-access", "latency-hiding"])
        self.assertEqual(sweep.steps_to_best, 5)
        lines = []
        oracle = run_one(SweepPolicy("edge-oracle", order, edges), self.task, self.lin, 6, 1,
                         trace=lines.append)
        self.assertEqual(oracle.steps_to_best, 2)
        self.assertEqual(len(lines), 6)
        self.assertIn("step 0: kernel reference (1.00x), offered global-memory-access,"
                      "on-chip-reuse-tiling; chose global-memory-access", lines[0])
        self.assertIn("step 1: kernel v1 (1.50x)", lines[1])

    def test_runs_and_summary(self):
        good = run_one(Scripted(["global-memory-access", "latency-hiding"]), self.task,
                       self.lin, 6, 1)
        self.assertEqual(good.steps_to_best, 2)
        self.assertAlmostEqual(good.best, self.lin.best_speedup())
        bad = run_one(Scripted(["on-chip-reuse-tiling", "fusion"]), self.task, self.lin, 6, 1)
        self.assertIsNone(bad.steps_to_best)
        self.assertEqual(bad.failures, 1)
        self.assertEqual(bad.noops, 5)
        ucb = run_one(UCBPolicy(random.Random(3)), self.task, self.lin, 12, 3)
        self.assertEqual(len(set(ucb.directions)), 12)  # explores a new direction each step
        rnd = run_one(RandomPolicy(random.Random(3)), self.task, self.lin, 12, 3)
        self.assertEqual(len(rnd.directions), 12)
        rows = summarize([good, bad])
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0].median_steps, (2 + 7) / 2)
        self.assertIn("| 6 | scripted |", markdown(rows))


if __name__ == "__main__":
    unittest.main()
