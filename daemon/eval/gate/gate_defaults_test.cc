// The gate's option defaults (daemon/eval/gate/gate.h) are the configuration table's
// (daemon/config/options.inc): a tool or test that builds a Gate without the table gets the same
// verification and timing as htamd's workers. A drift between the two fails here.
#include <gtest/gtest.h>

#include "daemon/config/config.h"
#include "daemon/eval/gate/gate.h"

namespace htam {
namespace {

TEST(GateDefaults, AreTheConfigurationTablesDefaults) {
  const Config c = Config::Defaults();
  const GateOptions g;
  EXPECT_EQ(g.seeds, c.GetInt("eval.seeds"));
  EXPECT_EQ(int64_t(g.guard_bytes), c.GetInt("eval.guard_bytes"));
  EXPECT_EQ(g.check_threads, c.GetBool("eval.check_threads"));
  EXPECT_EQ(g.thread_grace_ms, double(c.GetInt("eval.thread_grace_ms")));
  EXPECT_EQ(g.warmup_reps, c.GetInt("eval.warmup_reps"));
  EXPECT_EQ(g.warmup_ms, double(c.GetInt("eval.warmup_ms")));
  EXPECT_EQ(g.repetitions, c.GetInt("eval.repetitions"));
  EXPECT_EQ(g.input_sets, c.GetInt("eval.input_sets"));
  EXPECT_EQ(int64_t(g.flush_bytes), c.GetInt("eval.flush_bytes"));
  EXPECT_EQ(g.flush_max_bytes, uint64_t(c.GetInt("eval.flush_max_mb")) << 20);
  EXPECT_EQ(g.compile_timeout_s, double(c.GetInt("eval.compile_timeout_s")));
  EXPECT_EQ(g.time_baseline, c.GetBool("eval.time_baseline"));
  EXPECT_EQ(g.golden_python, c.GetString("eval.kernelbench_python"));
  EXPECT_EQ(g.golden_timeout_s, double(c.GetInt("eval.kernelbench_timeout_s")));
  EXPECT_EQ(g.device_data, c.GetBool("eval.device_data"));
  EXPECT_EQ(g.baseline_reuse_s, double(c.GetInt("eval.baseline_reuse_s")));
  EXPECT_EQ(g.buffer_pool_bytes, uint64_t(c.GetInt("eval.buffer_pool_mb")) << 20);
  EXPECT_EQ(g.timing_lock_wait_s, double(c.GetInt("eval.timing_lock_wait_s")));
  EXPECT_EQ(g.kernelbench_fast_path, c.GetBool("eval.kernelbench_fast_path"));
  EXPECT_EQ(g.kernelbench_nvcc, c.GetString("eval.kernelbench_nvcc"));
  EXPECT_EQ(g.kernelbench_compile_timeout_s,
            double(c.GetInt("eval.kernelbench_compile_timeout_s")));
  EXPECT_EQ(g.kernelbench_memory_headroom, c.GetDouble("eval.kernelbench_memory_headroom"));
  EXPECT_EQ(g.kernelbench_cache_bytes, uint64_t(c.GetInt("eval.kernelbench_cache_mb")) << 20);
  EXPECT_EQ(g.kernelbench_warmup_ms, double(c.GetInt("eval.kernelbench_warmup_ms")));
  EXPECT_EQ(g.kernelbench_min_timed_ms, double(c.GetInt("eval.kernelbench_min_timed_ms")));
  // Deliberately different, each for a reason the gate's header states: seed_base (the worker
  // draws one per job; eval.seed 0 means "draw"), golden_seed_pool (a Gate built by hand uses
  // seeds 0..seeds-1 unless given a pool), kernelbench_call_timeout_s (htamd passes
  // eval.case_timeout_s).
}

}  // namespace
}  // namespace htam
