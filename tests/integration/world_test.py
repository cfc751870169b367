"""The measured optimization world (configs/world): families, materializer, the committed H100 and
CPU tables, and the environment's answers. CPU only; the nvcc part is skipped where nvcc is
missing. The CPU families are compiled with g++ and evaluated through htam's CPU gate here."""

import gzip
import json
import math
import os
import shutil
import subprocess
import tempfile
import unittest

from htam_bench import world_build as wb
from htam_bench import world_env as we
from htam_bench import world_families as wf

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class FamiliesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fams = wf.load_families()
        cls.tax = wf.load_taxonomy()

    def test_world_has_the_size_the_issue_asks(self):
        self.assertGreaterEqual(len(self.fams), 12)
        self.assertGreaterEqual(sum(len(f.shapes) for f in self.fams), 80)
        for f in self.fams:
            self.assertGreaterEqual(len(f.shapes), 5, f.name)
            self.assertGreaterEqual(len(f.space()), 24, f.name)

    def test_every_knob_value_is_named_by_a_taxonomy_strategy_of_its_direction(self):
        for f in self.fams:
            for k in f.knobs:
                self.assertIn(k.baseline, k.values)
                for v in k.values:
                    s, d = k.names(v)
                    self.assertIn(s, self.tax.get(d, set()), f"{f.name}.{k.name}={v}")

    def test_a_family_that_names_an_unknown_strategy_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(REPO, "configs", "world", "families", "elemwise")
            dst = os.path.join(tmp, "elemwise")
            shutil.copytree(src, dst)
            with open(os.path.join(dst, "knobs.json")) as fh:
                kj = json.load(fh)
            kj["knobs"][0]["strategy"] = "make-it-fast"
            with open(os.path.join(dst, "knobs.json"), "w") as fh:
                json.dump(kj, fh)
            with self.assertRaisesRegex(wf.FamilyError, "make-it-fast"):
                wf.load_family(dst)

    def test_materialized_task_is_a_task_directory_the_gate_reads(self):
        f = next(x for x in self.fams if x.name == "softmax")
        sh = next(s for s in f.shapes if s.dtype == "f16")
        with tempfile.TemporaryDirectory() as tmp:
            paths = wf.materialize(f, sh, tmp)
            with open(os.path.join(tmp, "task.json")) as fh:
                t = json.load(fh)
            self.assertEqual(t["name"], "world_softmax_" + sh.id)
            self.assertEqual(t["inputs"][0]["dtype"], "f16")
            self.assertEqual(t["shapes"]["seen"], [sh.dims])
            self.assertEqual(t["references"], {"cuda": "reference.cu"})
            with open(os.path.join(tmp, "reference.cu")) as fh:
                ref = fh.read()
            self.assertIn("#define DT_F16 1", ref)
            self.assertIn("HTAM_KERNEL_ENTRY", ref)
            self.assertEqual(len(paths), len(f.space()))
            vid = wf.variant_id(f.baseline())
            with open(paths[vid]) as fh:
                self.assertEqual(fh.read(), ref)  # the baseline variant is the reference

    def test_shapes_of_a_family_share_variant_sources(self):
        f = next(x for x in self.fams if x.name == "sgemm")
        a = f.space()[3]
        self.assertEqual(wf.source_hash(f, a, "f32"), wf.source_hash(f, a, "f32"))
        self.assertNotEqual(wf.source(f, a, "f32"), wf.source(f, f.baseline(), "f32"))

    def test_task_json_parses_with_its_backends_evaluator_where_it_is_built(self):
        cli = os.path.join(os.environ.get("HTAM_BUILD_DIR", "build"), "tools", "eval",
                           "htam-eval")
        if not os.path.exists(cli):
            self.skipTest("htam-eval is not built here")
        with tempfile.TemporaryDirectory() as tmp:
            for f in self.fams:
                sh = f.shapes[0]
                d = os.path.join(tmp, f.task_name(sh))
                wf.materialize(f, sh, d, [f.baseline()])
                opts = ["--option", "cuda_roofline=false"] if f.backend == "cuda" else []
                r = subprocess.run([cli, "--task", d, "--reference", "--backend", f.backend]
                                   + opts, capture_output=True, text=True, timeout=120, cwd=REPO)
                # 2 = the task did not parse; 4 = parsed, but no GPU here; 0 = evaluated.
                self.assertNotEqual(r.returncode, 2, f"{f.name}: {r.stderr}")

    def test_variants_compile_with_nvcc_where_present(self):
        nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                         if os.path.exists("/usr/local/cuda/bin/nvcc") else "")
        if not nvcc:
            self.skipTest("nvcc not found: the families' CUDA sources are not compiled here")
        inc = os.path.join(REPO, "sdk", "include")
        with tempfile.TemporaryDirectory() as tmp:
            for f in [x for x in self.fams if x.backend == "cuda"]:
                # The variant with every knob at its last value: the most code paths at once.
                a = {k.name: k.values[-1] for k in f.knobs}
                dt = f.shapes[0].dtype
                src = os.path.join(tmp, f.name + ".cu")
                with open(src, "w") as fh:
                    fh.write(wf.source(f, a, dt))
                r = subprocess.run([nvcc, "-c", "-O1", "-gencode=arch=compute_90a,code=sm_90a",
                                    "-I", inc, "-o", src + ".o", src], capture_output=True,
                                   text=True, timeout=300)
                self.assertEqual(r.returncode, 0, f"{f.name} {a}: {r.stderr[-2000:]}")

    def test_cpu_family_materializes_cpp_for_the_cpu_backend(self):
        f = next(x for x in self.fams if x.name == "cpu_sgemm")
        self.assertEqual(f.backend, "cpu")
        with tempfile.TemporaryDirectory() as tmp:
            paths = wf.materialize(f, f.shapes[0], tmp)
            with open(os.path.join(tmp, "task.json")) as fh:
                self.assertEqual(json.load(fh)["references"], {"cpu": "reference.cpp"})
            self.assertTrue(os.path.exists(os.path.join(tmp, "reference.cpp")))
            self.assertTrue(all(p.endswith(".cpp") for p in paths.values()))

    def test_a_family_for_an_unknown_backend_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            dst = os.path.join(tmp, "cpu_sgemm")
            shutil.copytree(os.path.join(REPO, "configs", "world", "families", "cpu_sgemm"), dst)
            with open(os.path.join(dst, "family.json")) as fh:
                spec = json.load(fh)
            spec["backend"] = "tpu"
            with open(os.path.join(dst, "family.json"), "w") as fh:
                json.dump(spec, fh)
            with self.assertRaisesRegex(wf.FamilyError, "backend 'tpu'"):
                wf.load_family(dst)

    def test_cpu_variants_compile_with_the_cpu_backends_flags(self):
        gxx = shutil.which("g++")
        if not gxx:
            self.skipTest("g++ not found")
        inc = os.path.join(REPO, "sdk", "include")
        with tempfile.TemporaryDirectory() as tmp:
            for f in [x for x in self.fams if x.backend == "cpu"]:
                for a in (f.baseline(), {k.name: k.values[-1] for k in f.knobs}):
                    src = os.path.join(tmp, f.name + ".cpp")
                    with open(src, "w") as fh:
                        fh.write(wf.source(f, a, "f32"))
                    r = subprocess.run([gxx, "-O3", "-march=native", "-std=c++17", "-Wall",
                                        "-Werror", "-shared", "-fPIC", "-I", inc, "-o",
                                        src + ".so", src], capture_output=True, text=True,
                                       timeout=300)
                    self.assertEqual(r.returncode, 0, f"{f.name} {a}: {r.stderr[-2000:]}")

    def test_cpu_family_through_the_cpu_gate_fails_only_where_its_knobs_say(self):
        """A CPU task evaluated as the builder does (htam-eval, CPU plugin, sandboxed worker):
        the no-tail vector width is Incorrect on an odd length and Ok on an even one; the fast
        exp is Ok within the float tolerance."""
        cli = os.path.join(os.environ.get("HTAM_BUILD_DIR", "build"), "tools", "eval",
                           "htam-eval")
        if not os.path.exists(cli):
            self.skipTest("htam-eval is not built here")
        f = next(x for x in self.fams if x.name == "cpu_elemwise")
        base = f.baseline()
        vec = dict(base, VEC=8)
        fast = dict(base, F32MATH=1, FASTEXP=1)
        got = {}
        with tempfile.TemporaryDirectory() as tmp:
            for sid in ("n64k", "n1m_odd"):
                sh = next(s for s in f.shapes if s.id == sid)
                d = os.path.join(tmp, f.task_name(sh))
                paths = wf.materialize(f, sh, d, [vec, fast])
                r = subprocess.run([cli, "--task", d, "--backend", "cpu", "--seeds", "1",
                                    "--reps", "3", "--sets", "1", "--cache",
                                    os.path.join(tmp, "cache")] + list(paths.values()),
                                   capture_output=True, text=True, timeout=600, cwd=REPO)
                for line in r.stdout.splitlines():
                    try:
                        j = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    got[(sid, os.path.basename(j.get("source", "")))] = j.get("status")
        v, fa = wf.variant_id(vec) + ".cpp", wf.variant_id(fast) + ".cpp"
        self.assertEqual(got.get(("n1m_odd", v)), "Incorrect", got)
        self.assertEqual(got.get(("n64k", v)), "Ok", got)
        self.assertEqual(got.get(("n64k", fa)), "Ok", got)
        self.assertEqual(got.get(("n1m_odd", fa)), "Ok", got)


class TableTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.world = we.WorldTable.load()

    def test_committed_table_covers_every_task_and_variant(self):
        rows = wb.read_table(we.DEFAULT_TABLE)
        self.assertGreaterEqual(len(self.world.tasks), 80)
        for t in self.world.tasks.values():
            self.assertEqual(len(t.rows), len(t.family.space()), t.name)
        statuses = {r["status"] for r in rows}
        self.assertLessEqual(statuses, set(wb.STATUSES))
        ok = [r for r in rows if r["status"] == "Ok"]
        self.assertTrue(all(r["median_us"] > 0 and r["device"].startswith("NVIDIA H100")
                            for r in ok))
        self.assertTrue(all(r["date"] and r["commit"] for r in rows))

    def test_committed_cpu_table_covers_every_cpu_task_and_variant(self):
        path = os.path.join(REPO, "configs", "world", "cpu_table.jsonl.gz")
        world = we.WorldTable.load(path)
        cpu = [f for f in wf.load_families() if f.backend == "cpu"]
        self.assertEqual(len(world.tasks), sum(len(f.shapes) for f in cpu))
        for t in world.tasks.values():
            self.assertEqual(t.family.backend, "cpu")
            self.assertEqual(len(t.rows), len(t.family.space()), t.name)
        rows = wb.read_table(path)
        self.assertLessEqual({r["status"] for r in rows}, set(wb.STATUSES))
        self.assertTrue(all(r["median_us"] > 0 and r["arch"] == "x86_64"
                            for r in rows if r["status"] == "Ok"))
        # Every failure is a no-tail knob on a shape whose size it does not divide.
        no_tail = {"cpu_elemwise": ("VEC", "N"), "cpu_sgemm": ("REG", "M"),
                   "cpu_transpose": ("MICRO", "C")}
        for r in rows:
            if r["status"] == "Ok":
                continue
            knob, dim = no_tail[r["family"]]
            width = 4 if knob == "MICRO" else r["knobs"][knob]
            self.assertGreater(r["knobs"][knob], 0 if knob == "MICRO" else 1, r["variant"])
            self.assertNotEqual(r["dims"][dim] % width, 0, r["task"])
        # And such a knob is Ok where the size is a multiple of its width.
        t = world.tasks["world_cpu_elemwise_n1m"]
        self.assertTrue(all(r["status"] == "Ok" for r in t.rows.values()))

    def test_failures_are_the_real_ones_the_knobs_document(self):
        t = self.world.tasks["world_elemwise_n1m_odd"]
        vec4 = next(v for v, r in t.rows.items() if r["knobs"]["VEC"] == 4)
        self.assertEqual(t.rows[vec4]["status"], "Incorrect")   # no tail for N % 4 != 0
        t = self.world.tasks["world_elemwise_n1m"]
        self.assertEqual(t.rows[vec4]["status"], "Ok")          # N % 4 == 0: fine
        t = self.world.tasks["world_sgemm_m1024_n1024_k1024"]
        big = wf.variant_id({"TILE": 128, "REG": 1, "DBUF": 0})
        self.assertEqual(t.rows[big]["status"], "Crash")         # 16384 threads per block

    def test_table_round_trip_and_partial_rows_win(self):
        with tempfile.TemporaryDirectory() as tmp:
            p = os.path.join(tmp, "t.jsonl.gz")
            rows = [{"family": "f", "task": "t", "variant": "a", "status": "Ok"},
                    {"family": "f", "task": "t", "variant": "b", "status": "Crash"}]
            wb.write_table(p, rows)
            with open(p + ".partial", "w") as fh:
                fh.write(json.dumps({"family": "f", "task": "t", "variant": "b",
                                     "status": "Ok"}) + "\n{\"cut")
            got = {r["variant"]: r["status"] for r in wb.read_table(p)}
            self.assertEqual(got, {"a": "Ok", "b": "Ok"})
            with gzip.open(p, "rt") as fh:
                self.assertEqual(len(fh.read().splitlines()), 2)


class EnvTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.world = we.WorldTable.load()

    def test_step_applies_the_first_applicable_strategy(self):
        t = self.world.tasks["world_elemwise_n1m"]
        s = we.WorldSession(t)
        r = s.step("global-memory-access", ["padding-rows", "vectorized-16-byte-access"])
        self.assertEqual(r.applied, "vectorized-16-byte-access")
        self.assertEqual((r.knob, r.value), ("VEC", 2))     # the first untried value
        self.assertEqual(r.status, "ok")
        r2 = s.step("global-memory-access", ["vectorized-16-byte-access"])
        self.assertEqual(r2.value, 4)                        # then the next one

    def test_advice_naming_a_knob_setting_applies_that_setting(self):
        t = self.world.tasks["world_elemwise_n1m"]
        s = we.WorldSession(t)
        r = s.step("global-memory-access", ["vectorized-16-byte-access@VEC=4"])
        self.assertEqual((r.applied, r.knob, r.value), ("vectorized-16-byte-access", "VEC", 4))
        # A setting that is no move of the strategy here: the strategy's first move instead.
        s = we.WorldSession(t)
        r = s.step("global-memory-access", ["vectorized-16-byte-access@NOPE=8"])
        self.assertEqual((r.knob, r.value), ("VEC", 2))
        self.assertTrue(s.applicable("vectorized-16-byte-access@VEC=4"))
        self.assertEqual(we.split_advice("a@VEC=4"), ("a", ("VEC", 4)))
        self.assertEqual(we.split_advice("a"), ("a", None))
        # The bench reads the setting out of a learned summary only with value hints on.
        from htam_bench import world_bench as wb
        known = {"vectorized-16-byte-access": "global-memory-access"}
        title = "vectorized-16-byte-access: VEC=4 (VEC4_GS0)"
        self.assertEqual(wb.advice_item("learned-1", title, known, True),
                         "vectorized-16-byte-access@VEC=4")
        self.assertEqual(wb.advice_item("learned-1", title, known, False),
                         "vectorized-16-byte-access")
        self.assertEqual(wb.advice_item("vectorized-16-byte-access", "Vectorize", known, True),
                         "vectorized-16-byte-access")

    def test_step_with_nothing_to_apply_says_so(self):
        t = self.world.tasks["world_elemwise_n1m"]
        s = we.WorldSession(t)
        r = s.step("fusion", ["fuse-elementwise-epilogue"])
        self.assertFalse(r.applicable)
        self.assertIn("not applicable here", r.note)
        self.assertEqual(s.best, 1.0)

    def test_failure_leaves_the_kernel_and_improvement_moves_it(self):
        t = self.world.tasks["world_elemwise_n1m_odd"]
        s = we.WorldSession(t)
        r = s.step("global-memory-access", ["vectorized-16-byte-access"])
        self.assertEqual(r.status, "incorrect")
        self.assertEqual(s.current, wf.variant_id(t.family.baseline()))
        t = self.world.tasks["world_sgemm_m1024_n1024_k1024"]
        s = we.WorldSession(t)
        r = s.step("on-chip-reuse-tiling", ["register-blocking"])
        self.assertEqual((r.knob, r.value), ("REG", 2))
        if r.improved:
            self.assertEqual(s.knobs["REG"], 2)
            self.assertAlmostEqual(s.best, t.speedup(r.variant))

    def test_bottleneck_derived_as_the_roofline_would(self):
        roof = we.H100_ROOFLINE
        self.assertEqual((roof.memory_pct, roof.compute_pct, roof.launch_us), (60, 60, 5))
        # 2.36 GB in 1 ms = 2360 GB/s = 80 % of the copy ceiling; 1 GFLOP in 1 ms = 1.6 % of fp32.
        self.assertEqual(we.classify_bottleneck(2.36e9, 1e9, 1000.0, False), "Memory")
        # 50 GFLOP in 1 ms = 50 TFLOP/s = 78 % of fp32 FMA; 0.3 GB = 10 % of the bandwidth.
        self.assertEqual(we.classify_bottleneck(0.3e9, 50e9, 1000.0, False), "Compute")
        # The same FLOPs with 16-bit inputs are 8 % of the tensor cores: neither unit near peak.
        self.assertEqual(we.classify_bottleneck(0.3e9, 50e9, 1000.0, True), "Latency")
        # Neither near peak and shorter than 5 us: launch-bound.
        self.assertEqual(we.classify_bottleneck(1e6, 1e6, 3.0, False), "Launch")
        # Both over their threshold: the larger names the class.
        self.assertEqual(we.classify_bottleneck(2.0e9, 60e9, 1000.0, False), "Compute")
        self.assertEqual(we.classify_bottleneck(2.8e9, 45e9, 1000.0, False), "Memory")
        self.assertEqual(we.classify_bottleneck(1e9, 1e9, 0.0, False), "Unknown")
        m, c = we.roofline_fractions(2.95e9, 64.5e9, 1000.0, False)
        self.assertAlmostEqual(m, 100.0)
        self.assertAlmostEqual(c, 100.0)
        # Thresholds are the caller's.
        lax = we.Roofline(memory_pct=30, compute_pct=30, launch_us=5)
        self.assertEqual(we.classify_bottleneck(1.2e9, 1e9, 1000.0, False, lax), "Memory")
        self.assertEqual(we.classify_bottleneck(1.2e9, 1e9, 1000.0, False), "Latency")

    def test_bottleneck_of_table_rows(self):
        # elemwise n4m, fp32: 3 x 4M x 4 bytes; the baseline runs at about 75 % of the copy
        # ceiling (memory-bound); the 64K-element task runs in a few microseconds (launch-bound).
        t = self.world.tasks["world_elemwise_n4m"]
        base = wf.variant_id(t.family.baseline())
        self.assertAlmostEqual(t.bytes, 3 * (4 << 20) * 4)
        m, _ = we.roofline_fractions(t.bytes, t.flops, t.median_us(base), t.is16)
        self.assertGreater(m, 60)
        self.assertEqual(t.bottleneck(base), "Memory")
        self.assertEqual(we.WorldSession(t).bottleneck(), "Memory")
        self.assertEqual(self.world.tasks["world_elemwise_n64k"].bottleneck(base), "Launch")
        # The naive fp32 GEMM reaches neither ceiling; hgemm's compute ceiling is the tensor cores'.
        g = self.world.tasks["world_sgemm_m1024_n1024_k1024"]
        self.assertFalse(g.is16)
        self.assertEqual(g.bottleneck(wf.variant_id(g.family.baseline())), "Latency")
        self.assertTrue(self.world.tasks["world_hgemm_m1024_n1024_k1024"].is16)
        self.assertTrue(self.world.tasks["world_elemwise_n2m_f16"].is16)
        self.assertFalse(self.world.tasks["world_elemwise_n1m"].is16)
        # A failed variant has no time: Unknown (4-wide access on a length it does not divide).
        odd = self.world.tasks["world_elemwise_n1m_odd"]
        bad = [v for v, r in odd.rows.items() if r["status"] != "Ok"]
        self.assertTrue(bad)
        self.assertEqual({odd.bottleneck(v) for v in bad}, {"Unknown"})
        # The session's state follows its current kernel.
        s = we.WorldSession(self.world.tasks["world_transpose_m2048_n2048"])
        self.assertEqual(s.bottleneck(), "Latency")
        for _ in range(6):
            s.step("x", ["structure-of-arrays-layout", "padding-rows", "tile-size-sweep",
                         "thread-coarsening"])
        self.assertEqual(s.bottleneck(), s.task.bottleneck(s.current))
        self.assertEqual(s.bottleneck(), "Memory")   # the tiled transpose streams at > 60 %

    def test_bench_passes_the_current_kernels_bottleneck_in_next_step(self):
        from htam_bench import world_bench as wb
        from htam_agent.model import SessionView, StepView, StrategyView

        class FakeDaemon:
            def __init__(self):
                self.asked = []

            def open_session(self, *a, **k):
                return SessionView(session_id=1, task="t", backend="cuda")

            def next_step(self, session_id, bottleneck="", full=False):
                self.asked.append(bottleneck)
                return StepView(session_id=1, step=0, direction_id=1,
                                direction="global-memory-access",
                                strategies=[StrategyView(name="vectorized-16-byte-access")])

            def record(self, *a, **k):
                pass

            def close(self, *a):
                pass

        t = self.world.tasks["world_elemwise_n2m_f16"]
        seen = []
        for roof in (None, we.H100_ROOFLINE):
            d = FakeDaemon()
            r = wb.run_session(wb.DaemonPolicy("full", d, {}, roofline=roof), t, 3, 0)
            seen.append(d.asked)
            self.assertEqual(len(r.best_at), 3)
        self.assertEqual(seen[0], ["", "", ""])    # without the option: Unknown
        # f16 baseline at about 38 % of the bandwidth (latency); the vectorized kernel streams.
        s = we.WorldSession(t)
        expect = [s.bottleneck()]
        for _ in range(2):
            s.step("global-memory-access", ["vectorized-16-byte-access"])
            expect.append(s.bottleneck())
        self.assertEqual(seen[1], expect)
        self.assertEqual(seen[1][0], "Latency")
        self.assertIn("Memory", seen[1])

    def test_oracle_bounds_every_session(self):
        t = self.world.tasks["world_scan_m16_n65536"]
        best_at, steps = we.oracle(t, 12)
        self.assertIsNotNone(steps)
        self.assertGreaterEqual(best_at[-1], 0.95 * t.best)
        self.assertEqual(best_at, sorted(best_at))

    def test_best_fixed_order_of_one_task_is_its_sequence_bound(self):
        """Over one task the search is exhaustive: its order reaches the task as soon as the
        sequence bound does (both within the budget), on every task of a family."""
        for t in self.world.family_tasks("layernorm"):
            order = we.best_fixed_order([t], 6)
            _, bound = we.strategy_bound(t, 6)
            _, reached, played = we.shape_transfer(t, [t], 6)
            self.assertEqual(played, order)
            self.assertEqual(reached, bound, (t.name, order))

    def test_best_priority_list_is_a_local_optimum_no_policy_of_its_kind_beats(self):
        """The list found over a family's tasks: no single move of one strategy improves it, it
        is no worse than the order it starts from, and on every task it reaches no sooner than
        the task's own sequence bound (a list hands the world one strategy per step)."""
        tasks = sorted(self.world.family_tasks("layernorm"), key=lambda t: t.name)

        def mean(ranked):
            return sum(r if r is not None else 7
                       for r in (we.list_steps(t, ranked, 6)[1] for t in tasks)) / len(tasks)

        ranked, value = we.best_priority_list(tasks, 6)
        self.assertEqual(sorted(ranked), sorted(we.family_strategies(tasks[0].family)))
        self.assertAlmostEqual(mean(ranked), value)
        start, _ = we.best_priority_list(tasks, 6, max_sweeps=0)
        self.assertLessEqual(value, mean(start))
        for i in range(len(ranked)):
            for j in range(len(ranked)):
                moved = list(ranked)
                moved.insert(j, moved.pop(i))
                self.assertGreaterEqual(mean(moved), value - 1e-12, (i, j))
        for t in tasks:
            _, reached = we.list_steps(t, ranked, 6)
            _, bound = we.strategy_bound(t, 6)
            self.assertGreaterEqual(reached or 7, bound or 7, t.name)

    def test_shape_transfer_never_sees_the_task_it_plays(self):
        """The order comes from the other shapes alone: it is their best fixed order, it is no
        better on the left-out shape than that shape's own sequence bound, and on scan (whose
        shapes disagree on the best order) it is worse on at least one shape."""
        tasks = sorted(self.world.family_tasks("scan"), key=lambda t: t.name)
        worse = 0
        for t in tasks:
            others = [o for o in tasks if o is not t]
            curve, reached, order = we.shape_transfer(t, others, 6)
            self.assertEqual(order, we.best_fixed_order(others, 6))
            self.assertEqual(len(curve), 6)
            self.assertEqual(curve, sorted(curve))
            _, bound = we.strategy_bound(t, 6)
            self.assertGreaterEqual(reached or 7, bound or 7, t.name)
            worse += (reached or 7) > (bound or 7)
        self.assertGreater(worse, 0)

    def test_kin_transfer_fits_on_the_shapes_nearest_by_dimensions(self):
        """kin_transfer's order is the best fixed order of the k shapes whose dimensions lie
        nearest: with every sibling it is shape_transfer, with one it is that sibling's own
        order, and the nearest of scan's m16384_n64 is m4096_n256 (log2 distance sqrt(8))."""
        tasks = sorted(self.world.family_tasks("scan"), key=lambda t: t.name)
        t = self.world.tasks["world_scan_m16384_n64"]
        others = [o for o in tasks if o is not t]
        near = self.world.tasks["world_scan_m4096_n256"]
        self.assertAlmostEqual(we.dims_distance(t, near), math.sqrt(8))
        self.assertEqual(min(others, key=lambda o: we.dims_distance(t, o)), near)
        self.assertEqual(we.kin_transfer(t, others, 6, k=len(others)),
                         we.shape_transfer(t, others, 6))
        _, _, one = we.kin_transfer(t, others, 6, k=1)
        self.assertEqual(one, we.best_fixed_order([near], 6))

    def test_one_order_for_every_shape_is_bounded_by_the_family_order(self):
        """The family's best fixed order over all its shapes (the order-bound policy) does no
        worse on average than any order shape_transfer chose for one of them, played on every
        shape; and it is not each shape's own best: on scan some shape reaches later than its
        sequence bound."""
        tasks = sorted(self.world.family_tasks("scan"), key=lambda t: t.name)
        order = we.best_fixed_order(tasks, 6)

        def mean(o):
            return sum(we.play_order(t, o, 6)[1] or 7 for t in tasks) / len(tasks)

        best = mean(order)
        for t in tasks:
            _, _, theirs = we.shape_transfer(t, [o for o in tasks if o is not t], 6)
            self.assertLessEqual(best, mean(theirs) + 1e-12, theirs)
        self.assertTrue(any((we.play_order(t, order, 6)[1] or 7) > (we.strategy_bound(t, 6)[1] or 7)
                            for t in tasks))

class OrderWorldTest(unittest.TestCase):
    """The synthetic order world (configs/world/synthetic-order): what its generator writes, kept
    apart from the measured world, and moves that pay only in their order."""

    DIR = os.path.join(REPO, "configs", "world", "synthetic-order")

    @classmethod
    def setUpClass(cls):
        cls.world = we.WorldTable.load(os.path.join(cls.DIR, "table.jsonl.gz"),
                                       os.path.join(cls.DIR, "families"))

    def test_committed_folder_is_what_the_generator_writes(self):
        with tempfile.TemporaryDirectory() as out:
            subprocess.run(["/usr/bin/python3", os.path.join(REPO, "tools", "bench", "world",
                                                             "synth_order.py"), out],
                           check=True, capture_output=True)
            for root, _, files in os.walk(out):
                for f in files:
                    rel = os.path.relpath(os.path.join(root, f), out)
                    with open(os.path.join(out, rel), "rb") as a, \
                            open(os.path.join(self.DIR, rel), "rb") as b:
                        self.assertEqual(a.read(), b.read(), rel)

    def test_every_row_says_synthetic_and_the_measured_world_does_not_see_it(self):
        rows = [json.loads(x) for x in gzip.open(os.path.join(self.DIR, "table.jsonl.gz"), "rt")]
        self.assertEqual(len(rows), 8 * 6 * 16)
        self.assertTrue(all(r["synthetic"] and r["device"] == "synthetic" for r in rows))
        measured = we.WorldTable.load()
        self.assertFalse([t for t in measured.tasks if t.startswith("world_ord_")])
        dev, held = we.load_split()
        self.assertFalse([f for f in dev + held if f.startswith("ord_")])

    def test_the_payoff_pays_only_after_its_enabler(self):
        tile = self.world.tasks["world_ord_g_m1024_n1024"]
        align = self.world.tasks["world_ord_h_m1024_n1024"]
        s = we.WorldSession(tile)
        self.assertFalse(s.step("", ["double-buffering"]).improved)  # nothing to overlap yet
        self.assertTrue(s.step("", ["shared-memory-tiling"]).improved)
        self.assertTrue(s.step("", ["double-buffering"]).improved)
        self.assertFalse(s.step("", ["unroll-and-vector-width"]).improved)  # never here
        a = we.WorldSession(align)
        a.step("", ["aligned-body-masked-tail"])
        fresh = we.WorldSession(tile)
        fresh.step("", ["shared-memory-tiling"])
        self.assertEqual(a.best, fresh.best)  # the same state after either first move
        self.assertFalse(we.WorldSession(align).step("", ["double-buffering"]).improved)
        self.assertTrue(a.step("", ["unroll-and-vector-width"]).improved)
        for t in (tile, align):
            self.assertEqual(we.oracle(t, 6)[1], 3)  # enabler, payoff, block size

    def test_tile_and_align_tasks_look_the_same_to_the_state(self):
        tile = self.world.tasks["world_ord_a_m4096_n512"]
        align = self.world.tasks["world_ord_b_m4096_n512"]
        self.assertEqual(tile.family.spec["category"], align.family.spec["category"])
        self.assertEqual((tile.flops, tile.bytes), (align.flops, align.bytes))
        self.assertEqual(tile.best, align.best)

if __name__ == "__main__":
    unittest.main()
