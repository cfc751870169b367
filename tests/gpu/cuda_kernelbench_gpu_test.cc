// KernelBench tasks on the CUDA backend, on a real GPU: golden outputs and the eager baseline come
// from PyTorch on the GPU (a subprocess of the evaluation), the candidates are lean CUDA against
// the kernel ABI. Three problems: elementwise (kb_relu), reduction (kb_rowsum), a layer with
// weights (configs/tasks/kb_linear_relu: its nn.Linear parameters reach the candidate as inputs).
// Skipped where no CUDA device is present, or where the interpreter has no PyTorch with CUDA
// (set HTAM_KB_PYTHON to the one that has; default /usr/bin/python3).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/gpu/gpu_test_util.h"

namespace htam::gputest {
namespace {

std::string Python() {
  const char* e = getenv("HTAM_KB_PYTHON");
  return e && *e ? e : "/usr/bin/python3";
}

bool TorchHasCuda() {
  static const bool ok =
      std::system((Python() + " -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() "
                              "else 1)' >/dev/null 2>&1")
                      .c_str()) == 0;
  return ok;
}

// One CLI run per task (as one worker would): the candidates given, in order.
CliRun Evaluate(const std::string& task, const std::vector<std::string>& sources) {
  std::string args = "--task " + task + " --backend cuda --seeds 2 --reps 30 --compile-threads 2" +
                     " --option kernelbench_python=" + Python() +
                     // Each job draws its seeds from the pool (fresh inputs per evaluation); a pool
                     // of exactly --seeds makes every job ask for the same golden data, so that the
                     // second evaluation shows the cache at work.
                     " --option kernelbench_seed_pool=2";
  for (const auto& s : sources) args += " --source " + s;
  return RunCli(args, 400);
}

class CudaKernelBench : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!TorchHasCuda())
      GTEST_SKIP() << Python() << " has no PyTorch with CUDA here (set HTAM_KB_PYTHON)";
  }
  // Ok, timed, and measured against PyTorch eager on the GPU.
  void ExpectOkAgainstEager(const CliRun& run, const std::string& file) {
    auto it = run.by_source.find(file);
    ASSERT_NE(it, run.by_source.end()) << file << " missing from\n" << run.output;
    const nlohmann::json& r = it->second;
    ASSERT_EQ(r.value("status", ""), "Ok") << r.dump(2);
    EXPECT_GT(r.value("median_us", 0.0), 0.0);
    EXPECT_GT(r.value("baseline_us", 0.0), 0.0) << "PyTorch eager must be timed: " << r.dump(2);
    EXPECT_NE(r.value("baseline_note", "").find("PyTorch eager on cuda"), std::string::npos)
        << r.dump(2);
    EXPECT_GT(r.value("speedup", 0.0), 0.0);
    EXPECT_GT(r.value("sm_clock_mhz", -1), 0);
    printf("kernelbench %-14s %-18s candidate %8.2f us  eager %8.2f us  torch.compile %8.2f us  "
           "speedup %.2fx  compile %.0f ms  (%s)\n",
           r.value("task", "").c_str(), file.c_str(), r.value("median_us", 0.0),
           r.value("baseline_us", 0.0), r.value("baseline_compile_us", 0.0),
           r.value("speedup", 0.0), r.value("compile_ms", 0.0),
           r.value("baseline_note", "").c_str());
  }
};

TEST_F(CudaKernelBench, ElementwiseProblemPassesAndAWrongCandidateIsIncorrect) {
  const std::string dir = "tests/gpu/kernelbench/kb_relu";
  CliRun run = Evaluate(dir, {dir + "/relu_vec4.cu", dir + "/relu_wrong.cu"});
  if (run.exit_code == kCliNoDevice) GTEST_SKIP() << "no CUDA device here: " << run.output;
  ExpectOkAgainstEager(run, "relu_vec4.cu");
  auto wrong = run.by_source.find("relu_wrong.cu");
  ASSERT_NE(wrong, run.by_source.end()) << run.output;
  EXPECT_EQ(wrong->second.value("status", ""), "Incorrect") << wrong->second.dump(2);
  // The golden data of the first evaluation serve the second: PyTorch ran once.
  EXPECT_FALSE(wrong->second.value("golden_computed", true)) << wrong->second.dump(2);
}

TEST_F(CudaKernelBench, ReductionProblemPasses) {
  const std::string dir = "tests/gpu/kernelbench/kb_rowsum";
  CliRun run = Evaluate(dir, {dir + "/rowsum_block.cu"});
  if (run.exit_code == kCliNoDevice) GTEST_SKIP() << "no CUDA device here: " << run.output;
  ExpectOkAgainstEager(run, "rowsum_block.cu");
}

TEST_F(CudaKernelBench, LayerWithWeightsGetsItsParametersAsInputs) {
  const std::string dir = "configs/tasks/kb_linear_relu";
  CliRun run = Evaluate(dir, {dir + "/candidates/linear_relu.cu"});
  if (run.exit_code == kCliNoDevice) GTEST_SKIP() << "no CUDA device here: " << run.output;
  ExpectOkAgainstEager(run, "linear_relu.cu");
}

}  // namespace
}  // namespace htam::gputest
