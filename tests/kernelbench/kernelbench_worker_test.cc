// A KernelBench task through the daemon's evaluator: a sandboxed worker process (its user, limits
// and read-only root) starts the PyTorch helper for the golden data and runs the CPU candidate.
// Skips when /usr/bin/python3 cannot import torch.
#include <future>

#include "tests/integration/eval_test_util.h"

namespace htam::eval::testing {
namespace {

TEST(KernelBenchWorker, GoldenDataAndBaselineInsideTheSandboxedWorker) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "PyTorch is not importable by /usr/bin/python3: install python3-torch "
                    "(tools/setup.sh does)";
  TempDir dir;
  auto ev = StartEvaluator(TestConfig(dir.path()));
  ASSERT_NE(ev, nullptr);
  auto eval = [&](uint64_t id, const std::string& file) {
    auto p = std::make_shared<std::promise<EvalResult>>();
    auto f = p->get_future();
    Status st = ev->Submit(Job(id, "configs/tasks/kb_linear_relu", ReadSource(file)),
                           [p](EvalResult r) { p->set_value(std::move(r)); });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return f.get();
  };
  EvalResult ok = eval(1, "configs/tasks/kb_linear_relu/candidates/linear_relu.cpp");
  EXPECT_EQ(ok.status, fb::OutcomeStatus::Ok) << ok.diagnostics;
  EXPECT_GT(ok.baseline_us, 0) << "PyTorch eager baseline missing";
  EXPECT_GT(ok.speedup, 0);
  EvalResult wrong = eval(2, "tests/kernelbench/linear_relu_no_bias.cpp");
  EXPECT_EQ(wrong.status, fb::OutcomeStatus::Incorrect) << wrong.diagnostics;
}

}  // namespace
}  // namespace htam::eval::testing
