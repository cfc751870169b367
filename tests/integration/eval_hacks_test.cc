// The CPU reward-hack catalogue (tests/hacks/cpu) through the whole pipeline: Evaluator,
// sandboxed worker, CPU plugin (g++), verification gate, timing. Every hack is rejected with the
// right class and reason; honest kernels (including the lineage variants) are never rejected.
#include <future>
#include <vector>

#include "tests/integration/eval_test_util.h"

namespace htam::eval::testing {
namespace {

struct Case {
  const char* file;
  const char* task;
  fb::OutcomeStatus status;
  const char* phrase;  // must appear in the diagnostics
};

const char* kRelu = "configs/tasks/cpu_relu";
const char* kTiny = "tests/hacks/cpu/tiny_task";

TEST(EvalHacks, CatalogueIsRejectedAndHonestKernelsPass) {
  TempDir dir;
  auto ev = StartEvaluator(TestConfig(dir.path()));
  ASSERT_NE(ev, nullptr);
  const std::vector<Case> cases = {
      {"stale_static_output.cpp", kRelu, fb::OutcomeStatus::Incorrect, "outside tolerance"},
      {"mutate_inputs.cpp", kRelu, fb::OutcomeStatus::Incorrect, "modified input 'x'"},
      {"partial_computation.cpp", kRelu, fb::OutcomeStatus::Incorrect, "not written"},
      {"shape_specialized.cpp", kRelu, fb::OutcomeStatus::Incorrect, "held-out shape"},
      {"zeros_small_output.cpp", kTiny, fb::OutcomeStatus::Incorrect, "all zeros"},
      {"out_of_bounds_write.cpp", kRelu, fb::OutcomeStatus::Incorrect,
       "out of bounds of output 'y'"},
      {"race_detached_thread.cpp", kRelu, fb::OutcomeStatus::Nondeterministic, "race"},
      {"skip_repeated_calls.cpp", kRelu, fb::OutcomeStatus::Incorrect, "repeated call"},
      {"timing_aware.cpp", kRelu, fb::OutcomeStatus::Incorrect, "timed call"},
      {"nan_output.cpp", kRelu, fb::OutcomeStatus::Incorrect, "NaN"},
      {"honest_static_scratch.cpp", kRelu, fb::OutcomeStatus::Ok, "passed"},
      {"honest_threads_joined.cpp", kRelu, fb::OutcomeStatus::Ok, "passed"},
      {"honest_output_as_scratch.cpp", kRelu, fb::OutcomeStatus::Ok, "passed"},
      {"honest_tiny.cpp", kTiny, fb::OutcomeStatus::Ok, "passed"},
  };
  std::vector<std::future<EvalResult>> results;
  uint64_t id = 1;
  for (const auto& c : cases) {
    auto p = std::make_shared<std::promise<EvalResult>>();
    results.push_back(p->get_future());
    Status st = ev->Submit(Job(id++, c.task, ReadSource(std::string("tests/hacks/cpu/") + c.file)),
                           [p](EvalResult r) { p->set_value(std::move(r)); });
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    EvalResult r = results[i].get();
    EXPECT_EQ(Name(r.status), std::string(Name(cases[i].status)))
        << cases[i].file << ": " << r.diagnostics;
    EXPECT_NE(r.diagnostics.find(cases[i].phrase), std::string::npos)
        << cases[i].file << ": " << r.diagnostics;
    if (r.status == fb::OutcomeStatus::Ok) {
      EXPECT_GT(r.median_us, 0) << cases[i].file;
      EXPECT_GT(r.baseline_us, 0) << cases[i].file;
      EXPECT_EQ(r.repetitions, 10u) << cases[i].file;
    }
    // Held-out dims never appear in what an agent is told.
    EXPECT_EQ(r.diagnostics.find("999983"), std::string::npos) << r.diagnostics;
  }
}

TEST(EvalHacks, LineageVariantsMeetTheirExpectations) {
  TempDir dir;
  auto ev = StartEvaluator(TestConfig(dir.path(), {{"eval.seeds", "2"}}));
  ASSERT_NE(ev, nullptr);
  struct V {
    const char* task;
    const char* file;
    fb::OutcomeStatus status;
  };
  const std::vector<V> variants = {
      {"configs/tasks/cpu_relu", "variants/cpu/v1_avx2_max.cpp", fb::OutcomeStatus::Ok},
      {"configs/tasks/cpu_relu", "variants/cpu/v2_threads.cpp", fb::OutcomeStatus::Ok},
      {"configs/tasks/cpu_relu", "variants/cpu/v3_streaming_stores.cpp", fb::OutcomeStatus::Ok},
      {"configs/tasks/cpu_relu", "variants/cpu/v4_no_tail.cpp", fb::OutcomeStatus::Incorrect},
      {"configs/tasks/cpu_relu", "variants/cpu/v5_avx512_guess.cpp",
       fb::OutcomeStatus::CompileError},
      {"configs/tasks/cpu_rowsum", "variants/cpu/v2_avx2_unrolled.cpp", fb::OutcomeStatus::Ok},
      {"configs/tasks/cpu_rowsum", "variants/cpu/v4_threads_avx2.cpp", fb::OutcomeStatus::Ok},
      {"configs/tasks/cpu_matmul", "variants/cpu/v2_tiled_ikj.cpp", fb::OutcomeStatus::Ok},
      {"configs/tasks/cpu_matmul", "variants/cpu/v3_unroll_k4.cpp", fb::OutcomeStatus::Incorrect},
  };
  uint64_t id = 100;
  for (const auto& v : variants) {
    auto r = ev->Evaluate(Job(id++, v.task, ReadSource(std::string(v.task) + "/" + v.file)));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Name(r->status), std::string(Name(v.status))) << v.file << ": " << r->diagnostics;
    if (v.status == fb::OutcomeStatus::CompileError) {
      EXPECT_NE(r->diagnostics.find("error"), std::string::npos) << r->diagnostics;
    }
  }
}

}  // namespace
}  // namespace htam::eval::testing
