"""htam-bench world bench, smoke configuration over the committed H100 table: a held-out family,
one task, one seed, a short budget, the memory trained on one other family through a real htamd.
Checks what a user reads: every policy ran, the oracle bounds them, the sequence bound lies
between the oracle and every policy that names one strategy per step, the table and plot are
written."""

import io
import json
import os
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

from htam_bench import world_bench
from htam_agent.htamd import find_htamd

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_bench(test, tmp, args):
    """world bench with `args`, its results under tmp (res.json, .md, .svg; work/); asserts it
    succeeded and returns (what it printed, the results file)."""
    out = os.path.join(tmp, "res")
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = world_bench.main(args + ["--out", out, "--work", os.path.join(tmp, "work")])
    test.assertEqual(rc, 0, buf.getvalue())
    with open(out + ".json") as fh:
        return buf.getvalue(), json.load(fh)


def assert_refused(test, tmp, policy, leave, needs):
    """world bench asked for `policy` under --leave `leave` exits 2 saying it needs --leave
    `needs`, before it trains anything (its work folder is never made)."""
    err = io.StringIO()
    work = os.path.join(tmp, "refused-" + policy)
    with redirect_stderr(err), test.assertRaises(SystemExit) as cm:
        world_bench.main(["--on", "scan", "--leave", leave, "--policies", policy, "--work", work])
    test.assertEqual(cm.exception.code, 2)
    test.assertIn("needs --leave " + needs, err.getvalue())
    test.assertFalse(os.path.exists(work))


class WorldBenchSmokeTest(unittest.TestCase):
    def test_smoke(self):
        policies = ["ucb", "random", "oracle", "seq-bound"]
        if find_htamd(os.environ.get("HTAM_BUILD_DIR", "")):
            policies = ["full", "cold", "no-history", "flat"] + policies
        with tempfile.TemporaryDirectory(prefix="htam-world-") as tmp:
            text, res = run_bench(self, tmp, ["--on", "scan", "--max-tasks", "1", "--seeds", "1",
                                              "--budget", "6", "--train-families", "rowreduce",
                                              "--policies", ",".join(policies)])
            for p in policies:
                self.assertIn(f"| {p} |", text)
            rows = {r["policy"]: r for r in res["summary"]}
            self.assertEqual(set(rows), set(policies))
            oracle = rows["oracle"]["geo_speedup_at_6"]
            for p, r in rows.items():
                self.assertEqual(r["runs"], 1, p)
                self.assertLessEqual(r["geo_speedup_at_6"], oracle + 1e-9, p)
                self.assertGreaterEqual(r["geo_speedup_at_6"], 1.0, p)
            bound = rows["seq-bound"]["steps_to_5pct_at_6"]
            self.assertGreaterEqual(bound, rows["oracle"]["steps_to_5pct_at_6"])
            for p, r in rows.items():
                if p not in ("oracle", "seq-bound"):
                    self.assertGreaterEqual(r["steps_to_5pct_at_6"], bound, p)
            with open(os.path.join(tmp, "res.svg")) as fh:
                svg = fh.read()
            self.assertTrue(svg.startswith("<svg") and "polyline" in svg)

    def test_shape_transfer_is_a_row_of_leave_one_shape_out_only(self):
        """shape-transfer plays the best fixed order of the family's other shapes: a row beside
        the sequence bound, never below it, with the order it played in each run's trace; asked
        for without --leave shape, the command refuses before it trains anything."""
        with tempfile.TemporaryDirectory(prefix="htam-world-") as tmp:
            text, res = run_bench(self, tmp, ["--on", "scan", "--leave", "shape", "--max-tasks",
                                              "2", "--seeds", "1", "--budget", "6", "--policies",
                                              "seq-bound,shape-transfer"])
            self.assertIn("| shape-transfer |", text)
            runs = res["runs"]
            by = {(r["task"], r["policy"]): r for r in runs}
            tasks = {r["task"] for r in runs}
            self.assertEqual(len(tasks), 2)
            for t in tasks:
                st = by[(t, "shape-transfer")]
                self.assertTrue(st["trace"], st)
                self.assertGreaterEqual(st["steps_to_5"] or 7,
                                        by[(t, "seq-bound")]["steps_to_5"] or 7, t)
            assert_refused(self, tmp, "shape-transfer", "family", "shape")

    def test_family_transfer_is_a_row_of_leave_one_family_out_only(self):
        """family-transfer plays one ranked list learned from the training families' tables on
        every task of the evaluated family: the list is the same in every run, it names no
        strategy the training families do not apply, and no run beats the sequence bound."""
        with tempfile.TemporaryDirectory(prefix="htam-world-") as tmp:
            text, res = run_bench(self, tmp, ["--on", "scan", "--max-tasks", "2", "--seeds", "2",
                                              "--budget", "6", "--train-families", "rowreduce",
                                              "softmax", "--policies",
                                              "seq-bound,family-transfer"])
            self.assertIn("| family-transfer |", text)
            runs = [r for r in res["runs"] if r["policy"] == "family-transfer"]
            self.assertEqual(len(runs), 4)
            self.assertEqual(len({tuple(r["trace"]) for r in runs}), 1)
            from htam_bench import world_env as we
            world = we.WorldTable.load()
            known = set()
            for f in ("rowreduce", "softmax"):
                known |= set(we.family_strategies(world.families[f]))
            self.assertEqual(set(runs[0]["trace"]), known)
            bound = {r["task"]: r["steps_to_5"] or 7 for r in res["runs"]
                     if r["policy"] == "seq-bound"}
            for r in runs:
                self.assertGreaterEqual(r["steps_to_5"] or 7, bound[r["task"]], r["task"])
            assert_refused(self, tmp, "family-transfer", "shape", "family")

    def test_kin_transfer_and_the_order_bound_are_rows_beside_shape_transfer(self):
        """kin-transfer with one neighbour plays the order of the shape nearest by dimensions;
        order-bound plays one order, the same for every shape of the family, and no run of either
        beats the sequence bound; kin-transfer asked for without --leave shape is refused."""
        from htam_bench import world_env as we
        world = we.WorldTable.load()
        with tempfile.TemporaryDirectory(prefix="htam-world-") as tmp:
            text, res = run_bench(self, tmp, ["--on", "scan", "--leave", "shape", "--max-tasks",
                                              "2", "--seeds", "1", "--budget", "6",
                                              "--kin-neighbours", "1", "--policies",
                                              "seq-bound,order-bound,kin-transfer"])
            for p in ("order-bound", "kin-transfer"):
                self.assertIn(f"| {p} |", text)
            by = {(r["task"], r["policy"]): r for r in res["runs"]}
            tasks = sorted({r["task"] for r in res["runs"]})
            self.assertEqual(len(tasks), 2)
            family = world.family_tasks("scan")
            self.assertEqual(by[(tasks[0], "order-bound")]["trace"],
                             we.best_fixed_order(family, 6))
            self.assertEqual(by[(tasks[0], "order-bound")]["trace"],
                             by[(tasks[1], "order-bound")]["trace"])
            for t in tasks:
                task = world.tasks[t]
                near = min((o for o in family if o is not task),
                           key=lambda o: (we.dims_distance(task, o), o.name))
                self.assertEqual(by[(t, "kin-transfer")]["trace"], we.best_fixed_order([near], 6))
                for p in ("order-bound", "kin-transfer"):
                    self.assertGreaterEqual(by[(t, p)]["steps_to_5"] or 7,
                                            by[(t, "seq-bound")]["steps_to_5"] or 7, (t, p))
            assert_refused(self, tmp, "kin-transfer", "family", "shape")

    def test_cpu_tasks_with_a_memory_learned_on_cuda(self):
        """--on backend:cpu over both committed tables: the CPU family's task runs with the
        memory trained on a CUDA family (--train-backends cuda), sessions open on the CPU
        backend (htamd refuses a task whose reference is not for the session's backend)."""
        if not find_htamd(os.environ.get("HTAM_BUILD_DIR", "")):
            self.skipTest("no htamd built")
        tables = ",".join(os.path.join(REPO, "configs", "world", t)
                          for t in ("h100_table.jsonl.gz", "cpu_table.jsonl.gz"))
        with tempfile.TemporaryDirectory(prefix="htam-world-") as tmp:
            _, res = run_bench(self, tmp, ["--table", tables, "--on", "backend:cpu",
                                           "--only-families", "cpu_sgemm", "--max-tasks", "1",
                                           "--seeds", "1", "--budget", "4", "--train-families",
                                           "sgemm", "cpu_sgemm", "--train-backends", "cuda",
                                           "--policies", "full,cold,oracle"])
            self.assertEqual({r["task"] for r in res["runs"]}, {"world_cpu_sgemm_m128_n1k_k128"})
            self.assertTrue(all(not r["error"] for r in res["runs"]), res["runs"])
            rows = {r["policy"]: r for r in res["summary"]}
            self.assertEqual(set(rows), {"full", "cold", "oracle"})
            # Budget 4 on a task whose best is 12.85x: the first steps move it (ORDER alone is
            # 4x or more), and no policy passes the oracle.
            for p in ("full", "cold"):
                self.assertGreater(rows[p]["geo_speedup_at_6"], 1.0, p)
                self.assertLessEqual(rows[p]["geo_speedup_at_6"],
                                     rows["oracle"]["geo_speedup_at_6"] + 1e-9, p)

    def test_live_submits_each_answered_variant_through_htamds_gate(self):
        """--live on a CPU task: every variant the world answers with goes through htamd's gate
        on this machine (Submit). Whether a variant is correct does not depend on the machine, so
        each live status is the table's; an Ok variant comes back with a measured speedup."""
        if not find_htamd(os.environ.get("HTAM_BUILD_DIR", "")):
            self.skipTest("no htamd built")
        table = os.path.join(REPO, "configs", "world", "cpu_table.jsonl.gz")
        with tempfile.TemporaryDirectory(prefix="htam-world-") as tmp:
            text, res = run_bench(self, tmp, ["--table", table, "--on", "backend:cpu",
                                              "--only-families", "cpu_sgemm", "--max-tasks", "1",
                                              "--seeds", "1", "--budget", "3", "--policies",
                                              "cold", "--live"])
            self.assertIn("variants through htamd's gate", text)
            live = res["live"]
            outcomes = live["outcomes"]
            self.assertGreaterEqual(len(outcomes), 2, outcomes)
            self.assertEqual(live["agreement"]["submitted"], len(outcomes))
            for o in outcomes:
                self.assertEqual(o["task"], "world_cpu_sgemm_m128_n1k_k128")
                self.assertEqual(o["live_status"], o["table_status"], o)
                if o["live_status"] == "ok":
                    self.assertGreater(o["live_speedup"], 0.0, o)
            self.assertEqual(live["agreement"]["same_status"], 1.0)

    def test_bottleneck_state_option(self):
        if not find_htamd(os.environ.get("HTAM_BUILD_DIR", "")):
            self.skipTest("no htamd built")
        with tempfile.TemporaryDirectory(prefix="htam-world-") as tmp:
            buf = io.StringIO()
            with redirect_stdout(buf):
                rc = world_bench.main(["--on", "scan", "--max-tasks", "1", "--seeds", "1",
                                       "--budget", "4", "--train-families", "rowreduce",
                                       "--policies", "full,cold", "--bottleneck-state",
                                       "--bottleneck-thresholds", "50,60,5",
                                       "--work", os.path.join(tmp, "work")])
            self.assertEqual(rc, 0, buf.getvalue())
            self.assertIn("bottleneck state 50,60,5", buf.getvalue())
            self.assertIn("| full |", buf.getvalue())
            with redirect_stdout(io.StringIO()), self.assertRaises(SystemExit):
                world_bench.main(["--on", "scan", "--policies", "full", "--bottleneck-state",
                                  "--bottleneck-thresholds", "50,60"])

    def test_bootstrap_interval(self):
        """The 95 % interval holds the mean, narrows with more runs, and is a point for equal
        runs."""
        xs = [1, 7, 3, 7, 2, 5, 7, 1, 4, 6]
        lo, hi = world_bench.bootstrap_ci(xs)
        mean = sum(xs) / len(xs)
        self.assertLess(lo, mean)
        self.assertGreater(hi, mean)
        lo2, hi2 = world_bench.bootstrap_ci(xs * 10)
        self.assertLess(hi2 - lo2, hi - lo)
        self.assertEqual(world_bench.bootstrap_ci([3, 3, 3]), (3, 3))

    def test_learning_curve_families_never_include_the_evaluated_family(self):
        dev, _ = world_bench.load_split(world_bench.DEFAULT_SPLIT)
        for n in (1, 2, 4, 8):
            fams = world_bench.curve_families(str(n), world_bench.DEFAULT_SPLIT, ["sgemm"])
            self.assertEqual(len(fams), n)
            self.assertNotIn("sgemm", fams)
            self.assertTrue(set(fams) <= set(dev))
        # Nested: a point's families hold the previous point's.
        self.assertEqual(world_bench.curve_families("2", world_bench.DEFAULT_SPLIT, [])[:1],
                         world_bench.curve_families("1", world_bench.DEFAULT_SPLIT, []))
        self.assertEqual(world_bench.curve_families("all", world_bench.DEFAULT_SPLIT, []), [])


if __name__ == "__main__":
    unittest.main()
