// KernelBench tasks end to end on the CPU backend: golden data from PyTorch (a subprocess of this
// process, cached on disk), parameters as further inputs named as in the state_dict, the gate's
// verdicts and PyTorch's baseline. Tests that need PyTorch skip when /usr/bin/python3 cannot
// import torch (tools/setup.sh installs python3-torch, so CI runs them).
#include <fcntl.h>
#include <signal.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/common/plugin_host.h"
#include "base/process.h"
#include "daemon/eval/gate/gate.h"
#include "daemon/eval/gate/task_spec.h"
#include "daemon/eval/gate/timing_lock.h"
#include "daemon/eval/kernelbench/kernelbench.h"
#include "tests/integration/eval_test_util.h"

namespace htam {
namespace {

namespace fs = std::filesystem;
using eval::testing::ReadSource;
using eval::testing::TempDir;

const char* kTask = "configs/tasks/kb_linear_relu";
const char* kProblems = "tests/kernelbench/problems";

bool HaveTorch() {
  static const bool have = std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
  return have;
}
// baseline.json of a cache directory ({} while missing or half written).
nlohmann::json ReadBaseline(const std::string& dir) {
  std::ifstream f(dir + "/baseline.json");
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

// Polls until the background torch.compile measurement has rewritten baseline.json.
nlohmann::json WaitUntilNotPending(const std::string& dir, int seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  nlohmann::json j = ReadBaseline(dir);
  while (j.value("compile_pending", true) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    j = ReadBaseline(dir);
  }
  return j;
}

// Waits for every process holding `lock` to end (the background measurement); false on timeout.
bool WaitForLock(const std::string& lock, int seconds) {
  int fd = open(lock.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return true;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  bool free = false;
  while (!(free = flock(fd, LOCK_EX | LOCK_NB) == 0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  close(fd);
  return free;
}

#define REQUIRE_TORCH()                                                                   \
  if (!HaveTorch())                                                                       \
  GTEST_SKIP() << "PyTorch is not importable by /usr/bin/python3: install python3-torch " \
                  "(tools/setup.sh does)"

class KernelBenchGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto lib = PluginLibrary::Open(HTAM_CPU_PLUGIN_PATH);
    ASSERT_TRUE(lib.ok()) << lib.status().ToString();
    lib_ = std::move(*lib);
    HostOptions host;
    host.sdk_include_dir = fs::absolute("sdk/include").string();
    host.cache_dir = tmp_.path() + "/cache";
    host.work_dir = tmp_.path() + "/work";
    fs::create_directories(host.cache_dir);
    fs::create_directories(host.work_dir);
    auto b = BackendInstance::Create(lib_->api(), host);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(*b);
    ASSERT_TRUE(backend_->description().num_devices >= 1);
    ASSERT_TRUE(
        ConsumeError(backend_->api().device_open(
                         backend_->handle(), backend_->description().devices[0].index, &device_),
                     "device_open")
            .ok());
  }
  void TearDown() override {
    if (device_) backend_->api().device_close(device_);
    // No background torch.compile measurement outlives the test's directory.
    std::error_code ec;
    for (fs::recursive_directory_iterator it(tmp_.path(), ec), end; !ec && it != end;
         it.increment(ec))
      if (it->path().filename() == "compile.lock") {
        EXPECT_TRUE(WaitForLock(it->path().string(), 120)) << it->path();
      }
  }
  GateOptions Options() const {
    GateOptions o;
    o.seeds = 2;
    o.repetitions = 5;
    o.warmup_reps = 1;
    o.warmup_ms = 1;
    o.input_sets = 2;
    o.flush_bytes = 1 << 20;
    o.golden_cache_dir = tmp_.path() + "/golden";
    return o;
  }
  GateResult Eval(const TaskSpec& task, const std::string& source, GateOptions o) {
    Gate gate(backend_.get(), device_, task, o);
    return gate.Evaluate(source, {});
  }
  // The linear + ReLU problem (kTask) and its honest candidate.
  static void LoadLinearRelu(std::optional<TaskSpec>* task, std::string* src) {
    auto t = ParseTaskFile(kTask);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    task->emplace(std::move(*t));
    *src = ReadSource(std::string(kTask) + "/candidates/linear_relu.cpp");
  }
  // The linear + ReLU task and its honest candidate, evaluated once with Options(): Ok.
  void EvalLinearReluOk(std::optional<TaskSpec>* task, std::string* src, GateResult* r) {
    ASSERT_NO_FATAL_FAILURE(LoadLinearRelu(task, src));
    *r = Eval(**task, *src, Options());
    ASSERT_EQ(r->status, fb::OutcomeStatus::Ok) << r->diagnostics;
  }
  // A task directory holding `problem` and a task.json for x f32[4096] -> out f32[4096].
  // `problem`: a file of tests/kernelbench/problems, or a path with a directory.
  std::string MakeTask(const std::string& problem) {
    const std::string from =
        problem.find('/') == std::string::npos ? std::string(kProblems) + "/" + problem : problem;
    std::string dir = tmp_.path() + "/task_" + fs::path(problem).filename().string() + "_" +
                      std::to_string(++tasks_made_);
    fs::create_directories(dir);
    fs::copy_file(from, dir + "/problem.py");
    std::ofstream(dir + "/task.json") << R"({"name": "kb_t", "dims": [],
  "inputs": [{"name": "x", "dtype": "f32", "shape": [4096]}],
  "outputs": [{"name": "out", "dtype": "f32", "shape": [4096]}],
  "shapes": {"seen": [{}]}, "tolerance": {"rtol": 0, "atol": 0},
  "flops": "4096", "bytes": "32768", "kernelbench": "problem.py"})";
    return dir;
  }

  TempDir tmp_;
  int tasks_made_ = 0;
  std::unique_ptr<PluginLibrary> lib_;
  std::unique_ptr<BackendInstance> backend_;
  htam_device* device_ = nullptr;
};

TEST_F(KernelBenchGateTest, CorrectCandidateIsOkWithPyTorchBaselineAndGoldenDataIsCached) {
  REQUIRE_TORCH();
  std::optional<TaskSpec> task;
  std::string src;
  GateResult r;
  ASSERT_NO_FATAL_FAILURE(EvalLinearReluOk(&task, &src, &r));
  EXPECT_TRUE(r.golden_computed);
  EXPECT_EQ(r.cases, 2);
  EXPECT_GT(r.median_us, 0);
  EXPECT_GT(r.baseline_us, 0) << "PyTorch eager baseline missing";
  EXPECT_GT(r.speedup, 0);
  EXPECT_NE(r.baseline_note.find("PyTorch eager on cpu"), std::string::npos) << r.baseline_note;
  // torch 1.13 has no torch.compile: the note says so instead of a figure.
  if (r.baseline_compile_us == 0) {
    EXPECT_NE(r.baseline_note.find("torch.compile"), std::string::npos) << r.baseline_note;
  }

  // Second evaluation: everything comes from the cache. A Python that cannot even start proves
  // that no subprocess runs.
  GateOptions o = Options();
  o.golden_python = "/nonexistent/python3";
  GateResult r2 = Eval(*task, src, o);
  ASSERT_EQ(r2.status, fb::OutcomeStatus::Ok) << r2.diagnostics;
  EXPECT_FALSE(r2.golden_computed);
  EXPECT_EQ(r2.baseline_us, r.baseline_us);

  // Another device kind is another cache entry: the CPU's files are not served for it.
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(o.golden_cache_dir))
    files += e.path().filename().string().rfind("seed_", 0) == 0;
  EXPECT_EQ(files, 4);  // 2 verification seeds + 2 timing input sets
}

// A baseline.json timed before the precision was recorded (with PyTorch's defaults, where cuDNN
// may use TF32 while a candidate runs in fp32) is timed again, once; its figure never reaches a
// verdict. kb_baseline_test.py checks the helper's side (TF32 off while timing).
TEST_F(KernelBenchGateTest, ABaselineTimedInAnotherPrecisionIsTimedAgain) {
  REQUIRE_TORCH();
  std::optional<TaskSpec> task;
  std::string src;
  GateResult r;
  ASSERT_NO_FATAL_FAILURE(EvalLinearReluOk(&task, &src, &r));
  GoldenOptions go;
  go.cache_dir = Options().golden_cache_dir;
  const std::string dir = KernelBenchGolden(*task, go).dir();
  nlohmann::json base = WaitUntilNotPending(dir, 90);
  EXPECT_EQ(base.value("precision", std::string()), "fp32") << base.dump();

  // The file as an older htam left it: no precision, an eager figure of 1000 s.
  base.erase("precision");
  base["eager_us"] = 1e9;
  std::ofstream(dir + "/baseline.json") << base.dump();
  EXPECT_FALSE(KernelBenchGolden(*task, go).HasCurrentBaseline());
  GateResult r2 = Eval(*task, src, Options());
  ASSERT_EQ(r2.status, fb::OutcomeStatus::Ok) << r2.diagnostics;
  EXPECT_GT(r2.baseline_us, 0);
  EXPECT_LT(r2.baseline_us, 1e9) << "the old figure reached the verdict";
  EXPECT_TRUE(KernelBenchGolden(*task, go).HasCurrentBaseline());

  // Timed again once: the next evaluation reads it (a Python that cannot start runs nothing).
  GateOptions o = Options();
  o.golden_python = "/nonexistent/python3";
  GateResult r3 = Eval(*task, src, o);
  ASSERT_EQ(r3.status, fb::OutcomeStatus::Ok) << r3.diagnostics;
  EXPECT_FALSE(r3.golden_computed);
}

// The verdict never waits for torch.compile: the first evaluation reports PyTorch eager and says
// torch.compile is being measured; a detached process measures it (torch 1.13: "unavailable")
// and rewrites baseline.json, which the next evaluation reports.
TEST_F(KernelBenchGateTest, TorchCompileIsMeasuredInTheBackgroundAfterTheFirstVerdict) {
  REQUIRE_TORCH();
  std::optional<TaskSpec> task;
  std::string src;
  GateResult r;
  ASSERT_NO_FATAL_FAILURE(EvalLinearReluOk(&task, &src, &r));
  EXPECT_GT(r.baseline_us, 0) << "PyTorch eager baseline missing";
  EXPECT_EQ(r.baseline_compile_us, 0);
  EXPECT_EQ(r.baseline_note,
            "PyTorch eager on cpu; torch.compile: being measured in the background");

  GoldenOptions go;
  go.cache_dir = Options().golden_cache_dir;
  const std::string dir = KernelBenchGolden(*task, go).dir();
  nlohmann::json base = WaitUntilNotPending(dir, 90);
  ASSERT_FALSE(base.value("compile_pending", true)) << base.dump();
  EXPECT_EQ(base.value("eager_us", 0.0), r.baseline_us) << "the eager figure was timed again";
  const double compile_us = base.value("compile_us", 0.0);
  const std::string note = base.value("compile_note", std::string());
  if (compile_us == 0) {  // torch 1.13 has no torch.compile
    EXPECT_NE(note.find("torch.compile unavailable"), std::string::npos) << base.dump();
  }

  GateResult r2 = Eval(*task, src, Options());
  ASSERT_EQ(r2.status, fb::OutcomeStatus::Ok) << r2.diagnostics;
  EXPECT_FALSE(r2.golden_computed);
  EXPECT_EQ(r2.baseline_us, r.baseline_us);
  EXPECT_EQ(r2.baseline_compile_us, compile_us);
  EXPECT_EQ(r2.baseline_note.find("being measured"), std::string::npos) << r2.baseline_note;
  EXPECT_NE(r2.baseline_note.find(compile_us > 0 ? "torch.compile measured" : note),
            std::string::npos)
      << r2.baseline_note;
}

// One measurement per (task, device) cache directory at a time: compile.lock. A lock nobody holds
// (its process died) does not block the next try; a measurement killed at the time limit leaves
// a note and no pending state.
TEST_F(KernelBenchGateTest, OneBackgroundCompileMeasurementAtATimeAndATimeoutLeavesANote) {
  REQUIRE_TORCH();
  auto task = ParseTaskFile(kTask);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  GoldenOptions go;
  go.cache_dir = tmp_.path() + "/golden";
  KernelBenchGolden g(*task, go);
  ASSERT_TRUE(g.Prepare({0}, {1000}, true).ok());
  auto b = g.Baseline();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_GT(b->eager_us, 0);
  EXPECT_TRUE(b->compile_pending);
  const std::string lock = g.dir() + "/compile.lock";

  // Another process measuring (this test holding the lock): nothing more starts.
  int held = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX | LOCK_NB), 0);
  EXPECT_FALSE(g.MeasureCompileInBackground({1000}));
  close(held);  // as when that process dies

  // A measurement that passes its limit is killed; the note says so.
  GoldenOptions quick = go;
  quick.timeout_s = 0.2;  // less than importing torch
  EXPECT_TRUE(KernelBenchGolden(*task, quick).MeasureCompileInBackground({1000}));
  nlohmann::json base = WaitUntilNotPending(g.dir(), 90);
  ASSERT_FALSE(base.value("compile_pending", true)) << base.dump();
  EXPECT_NE(base.value("compile_note", std::string()).find("passed its limit of 0.2 s"),
            std::string::npos)
      << base.dump();
  EXPECT_EQ(base.value("eager_us", 0.0), b->eager_us);
  ASSERT_TRUE(WaitForLock(lock, 60));

  // Pending again: the first caller starts one, a second caller while it runs does not.
  base["compile_pending"] = true;
  std::ofstream(g.dir() + "/baseline.json") << base.dump();
  EXPECT_TRUE(g.MeasureCompileInBackground({1000}));
  EXPECT_FALSE(KernelBenchGolden(*task, go).MeasureCompileInBackground({1000}));
  base = WaitUntilNotPending(g.dir(), 90);
  ASSERT_FALSE(base.value("compile_pending", true)) << base.dump();
  EXPECT_EQ(base.value("compile_note", std::string()).find("passed its limit"), std::string::npos)
      << base.dump();
  ASSERT_TRUE(WaitForLock(lock, 60));
  EXPECT_FALSE(g.MeasureCompileInBackground({1000})) << "nothing is pending any more";
}

TEST_F(KernelBenchGateTest, ParametersReachTheCandidateNamedAsInTheStateDict) {
  REQUIRE_TORCH();
  auto task = ParseTaskFile(kTask);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  ASSERT_EQ(task->inputs.size(), 3u);
  EXPECT_EQ(task->inputs[0].name, "x");
  EXPECT_EQ(task->inputs[1].name, "linear.weight");
  EXPECT_EQ(task->inputs[2].name, "linear.bias");
  GoldenOptions go;
  go.cache_dir = tmp_.path() + "/golden";
  KernelBenchGolden g(*task, go);
  ASSERT_TRUE(g.Prepare({0, 1}, {}, false).ok());
  EXPECT_EQ(g.helper_runs(), 1);
  auto a = g.Load(0);
  auto b = g.Load(1);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(a->inputs.size(), 3u);
  EXPECT_EQ(a->inputs[1].name, "linear.weight");
  EXPECT_EQ(a->inputs[1].shape, (std::vector<int64_t>{48, 64}));
  EXPECT_EQ(a->inputs[2].name, "linear.bias");
  // get_inputs() differs per seed; the parameters are the model's, the same for every seed.
  EXPECT_NE(a->inputs[0].bytes, b->inputs[0].bytes);
  EXPECT_EQ(a->inputs[1].bytes, b->inputs[1].bytes);
  EXPECT_EQ(a->inputs[2].bytes, b->inputs[2].bytes);
  // The outputs really depend on the bias: out = relu(x W^T + b) checked on one element.
  double acc = a->inputs[2].At(5);
  for (int p = 0; p < 64; ++p) acc += a->inputs[0].At(3 * 64 + p) * a->inputs[1].At(5 * 64 + p);
  EXPECT_NEAR(a->outputs[0].At(3 * 48 + 5), acc > 0 ? acc : 0, 1e-4);
  ASSERT_TRUE(g.Prepare({0, 1}, {}, false).ok());
  EXPECT_EQ(g.helper_runs(), 1) << "cached seeds were computed again";
}

TEST_F(KernelBenchGateTest, WrongCandidateIsIncorrect) {
  REQUIRE_TORCH();
  auto task = ParseTaskFile(kTask);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  GateResult r = Eval(*task, ReadSource("tests/kernelbench/linear_relu_no_bias.cpp"), Options());
  EXPECT_EQ(r.status, fb::OutcomeStatus::Incorrect) << r.diagnostics;
  EXPECT_NE(r.diagnostics.find("of 'out' outside tolerance"), std::string::npos) << r.diagnostics;
}

TEST_F(KernelBenchGateTest, MalformedProblemFilesGiveClearErrorsAndTheProcessGoesOn) {
  REQUIRE_TORCH();
  const std::string relu = ReadSource("configs/tasks/cpu_relu/reference.cpp");
  struct Case {
    const char* file;
    const char* says;
  } cases[] = {{"syntax_error.py", "syntax error at line 2"},
               {"no_model.py", "defines no Model"},
               {"inputs_raise.py", "get_inputs() raised RuntimeError: no inputs today"}};
  for (const auto& c : cases) {
    auto task = ParseTaskFile(MakeTask(c.file));
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    GateResult r = Eval(*task, relu, Options());
    EXPECT_EQ(r.status, fb::OutcomeStatus::InfraError) << c.file;
    EXPECT_NE(r.diagnostics.find(c.says), std::string::npos) << c.file << ": " << r.diagnostics;
  }
  // The same process evaluates a good KernelBench task right after.
  auto task = ParseTaskFile(MakeTask("relu.py"));
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  GateResult r = Eval(*task, relu, Options());
  EXPECT_EQ(r.status, fb::OutcomeStatus::Ok) << r.diagnostics;
}

TEST_F(KernelBenchGateTest, ImporterWritesATaskTheGateAccepts) {
  REQUIRE_TORCH();
  const std::string dir = tmp_.path() + "/imported";
  std::string cmd = "/usr/bin/python3 tools/kernelbench/kb_helper.py import " +
                    std::string(kProblems) + "/relu.py " + dir + " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto task = ParseTaskFile(dir);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_EQ(task->name, "kb_relu");
  EXPECT_EQ(task->kernelbench, "problem.py");
  ASSERT_EQ(task->inputs.size(), 1u);
  EXPECT_EQ(task->inputs[0].name, "x");  // forward's parameter name
  EXPECT_EQ(task->outputs[0].name, "out");
  GateResult r = Eval(*task, ReadSource("configs/tasks/cpu_relu/reference.cpp"), Options());
  EXPECT_EQ(r.status, fb::OutcomeStatus::Ok) << r.diagnostics;
}

TEST_F(KernelBenchGateTest, ATaskThatDisagreesWithItsProblemFileIsAnInfraError) {
  REQUIRE_TORCH();
  // The shipped task's problem (nn.Linear) under a task.json that says x f32[4096] only.
  std::string dir = MakeTask(std::string(kTask) + "/problem.py");
  auto task = ParseTaskFile(dir);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  GateResult r = Eval(*task, ReadSource("configs/tasks/cpu_relu/reference.cpp"), Options());
  EXPECT_EQ(r.status, fb::OutcomeStatus::InfraError);
  EXPECT_NE(r.diagnostics.find("re-run kb_helper.py import"), std::string::npos) << r.diagnostics;
}

// The profiling run (htam-eval-worker --single-call under ncu): one call, no reference, no timing.
TEST_F(KernelBenchGateTest, SingleCallRunsTheCandidateOnceAndChecksNothing) {
  auto task = ParseTaskFile("configs/tasks/cpu_relu");
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  GateOptions o = Options();
  o.single_call = true;
  // A failing call is still reported (this candidate wants 3 inputs and returns 1).
  GateResult r = Eval(*task, ReadSource("tests/kernelbench/linear_relu_no_bias.cpp"), o);
  EXPECT_EQ(r.status, fb::OutcomeStatus::Crash) << r.diagnostics;
  EXPECT_NE(r.diagnostics.find("htam_kernel returned 1"), std::string::npos) << r.diagnostics;
  r = Eval(*task, ReadSource("configs/tasks/cpu_relu/reference.cpp"), o);
  EXPECT_EQ(r.status, fb::OutcomeStatus::Ok) << r.diagnostics;
  EXPECT_EQ(r.cases, 0);
  EXPECT_EQ(r.repetitions, 0u);
  EXPECT_EQ(r.diagnostics, "single call (profiling run)");
}

// The host-wide timing lock (timing_lock.h), on an ordinary task (no PyTorch): while the
// background torch.compile measurement (here: this test) holds timing.lock exclusive, the timing
// of a candidate and of the reference waits for it; the other stages do not.
class TimingLockTest : public KernelBenchGateTest {
 protected:
  void SetUp() override {
    KernelBenchGateTest::SetUp();
    fs::create_directories(Options().golden_cache_dir);
    lock_path_ = Options().golden_cache_dir + "/timing.lock";
  }
  void TearDown() override {
    for (auto& t : releases_) t.join();
    KernelBenchGateTest::TearDown();
  }
  // Takes timing.lock exclusive through a descriptor of its own (flock: one holder each).
  int LockExclusive() {
    int fd = open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    EXPECT_GE(fd, 0) << lock_path_;
    EXPECT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0) << "timing.lock held by someone else";
    return fd;
  }
  // Closes `fd` (releasing the lock) `after` from now, from another thread.
  void ReleaseLater(int fd, std::chrono::milliseconds after) {
    releases_.emplace_back([fd, after] {
      std::this_thread::sleep_for(after);
      close(fd);
    });
  }
  static double StageMs(const GateResult& r, const std::string& name) {
    for (const fb::StageTimeT& t : r.stage_ms)
      if (t.name == name) return t.ms;
    return -1;
  }

  std::string lock_path_;
  std::vector<std::thread> releases_;
};

TEST_F(TimingLockTest, TimedPhasesWaitWhileTheBackgroundMeasurementHoldsTheLock) {
  auto task = ParseTaskFile("configs/tasks/cpu_relu");
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  const std::string src = ReadSource("configs/tasks/cpu_relu/reference.cpp");
  const auto hold = std::chrono::milliseconds(1500);
  // Held from before the evaluation; released 1.5 s after the candidate's timing has begun.
  // The reference's timing finds it taken again (from the progress callback, which runs on the
  // evaluating thread just before that phase) and released 1.5 s later.
  int fd = LockExclusive();
  auto progress = [&](const std::string& stage) {
    if (stage == "time candidate") ReleaseLater(fd, hold);
    if (stage == "time baseline") ReleaseLater(LockExclusive(), hold);
  };
  const auto start = std::chrono::steady_clock::now();
  Gate gate(backend_.get(), device_, *task, Options());
  GateResult r = gate.Evaluate(src, progress);
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.status, fb::OutcomeStatus::Ok) << r.diagnostics;
  EXPECT_EQ(r.diagnostics.find("overlapped"), std::string::npos) << r.diagnostics;
  EXPECT_GE(StageMs(r, "time candidate"), 1500) << "the candidate was timed under the lock";
  EXPECT_GE(StageMs(r, "time baseline"), 1500) << "the reference was timed under the lock";
  EXPECT_LT(StageMs(r, "compile candidate"), 1500) << "only timed phases wait";
  EXPECT_GE(wall_ms, 3000);
  EXPECT_GT(r.median_us, 0);
  EXPECT_GT(r.baseline_us, 0);
}

TEST_F(TimingLockTest, PastTheWaitBoundItTimesAnywayWithANote) {
  auto task = ParseTaskFile("configs/tasks/cpu_relu");
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  const std::string src = ReadSource("configs/tasks/cpu_relu/reference.cpp");
  GateOptions o = Options();
  o.timing_lock_wait_s = 0.3;
  int fd = LockExclusive();  // held through the whole evaluation
  GateResult r = Eval(*task, src, o);
  close(fd);
  ASSERT_EQ(r.status, fb::OutcomeStatus::Ok) << r.diagnostics;
  EXPECT_GT(r.median_us, 0);
  EXPECT_NE(r.diagnostics.find("the timing may have overlapped the background torch.compile "
                               "measurement (timing.lock still held after 0.3 s"),
            std::string::npos)
      << r.diagnostics;
  EXPECT_GE(StageMs(r, "time candidate"), 300);
  EXPECT_LT(StageMs(r, "time candidate"), 10000) << "waited past the bound";

  // No golden cache directory (nothing can hold the lock there): timed at once, no note.
  o.golden_cache_dir = tmp_.path() + "/no-such-dir";
  o.timing_lock_wait_s = 30;
  fd = LockExclusive();
  r = Eval(*task, src, o);
  close(fd);
  ASSERT_EQ(r.status, fb::OutcomeStatus::Ok) << r.diagnostics;
  EXPECT_EQ(r.diagnostics.find("overlapped"), std::string::npos) << r.diagnostics;
  EXPECT_FALSE(fs::exists(o.golden_cache_dir));
}

// Test data on the device (GateOptions::device_data, the plugin's buffer_fill): every input is
// filled by the plugin and none is generated on the host and uploaded (a fill check that read
// "all zeros" from every comparison once sent every input back to the host generator).
TEST_F(KernelBenchGateTest, DeviceDataFillsEveryInputThroughThePlugin) {
  auto task = ParseTaskFile("configs/tasks/cpu_relu");
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  GateResult r = Eval(*task, ReadSource("configs/tasks/cpu_relu/reference.cpp"), Options());
  ASSERT_EQ(r.status, fb::OutcomeStatus::Ok) << r.diagnostics;
  auto by_name = [](const std::vector<fb::StageTimeT>& v) {
    std::map<std::string, double> m;
    for (const fb::StageTimeT& t : v) m[t.name] = t.ms;
    return m;
  };
  std::map<std::string, double> ops = by_name(r.op_ms);
  EXPECT_GT(ops.count("fill"), 0u) << "inputs were not filled on the device";
  EXPECT_EQ(ops.count("generate on the host"), 0u) << ops["generate on the host"] << " ms";
  EXPECT_EQ(ops.count("upload"), 0u) << ops["upload"] << " ms";
  GateOptions host = Options();
  host.device_data = false;
  r = Eval(*task, ReadSource("configs/tasks/cpu_relu/reference.cpp"), host);
  ASSERT_EQ(r.status, fb::OutcomeStatus::Ok) << r.diagnostics;
  ops = by_name(r.op_ms);
  EXPECT_GT(ops.count("generate on the host"), 0u) << "device_data false generates on the host";
}

// A worker times a task's reference once per eval.baseline_reuse_s, not beside every candidate:
// the second candidate of the same task and shape gets the first one's baseline, says so, and
// skips the timing; with reuse off, another task, or no cache of the worker's, the reference is
// timed again.
TEST_F(TimingLockTest, ABaselineIsReusedWithinItsWindowAndSaidSo) {
  auto task = ParseTaskFile("configs/tasks/cpu_relu");
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  const std::string src = ReadSource("configs/tasks/cpu_relu/reference.cpp");
  BaselineCache worker_baselines;  // the worker's (htam-eval-worker keeps one for its life)
  GateOptions o = Options();
  o.baseline_reuse_s = 600;
  o.baselines = &worker_baselines;
  GateResult first = Eval(*task, src, o);
  ASSERT_EQ(first.status, fb::OutcomeStatus::Ok) << first.diagnostics;
  EXPECT_GE(StageMs(first, "time baseline"), 0) << "the first candidate times the reference";
  EXPECT_EQ(first.diagnostics.find("eval.baseline_reuse_s"), std::string::npos);
  GateResult second = Eval(*task, src, o);
  ASSERT_EQ(second.status, fb::OutcomeStatus::Ok) << second.diagnostics;
  EXPECT_LT(StageMs(second, "time baseline"), 0) << "timed the reference again";
  EXPECT_EQ(second.baseline_us, first.baseline_us);
  EXPECT_NE(second.diagnostics.find("s earlier by this worker (eval.baseline_reuse_s)"),
            std::string::npos)
      << second.diagnostics;
  EXPECT_GT(second.speedup, 0);
  o.baseline_reuse_s = 0;
  GateResult third = Eval(*task, src, o);
  ASSERT_EQ(third.status, fb::OutcomeStatus::Ok) << third.diagnostics;
  EXPECT_GE(StageMs(third, "time baseline"), 0) << "reuse off: the reference is timed";
  o.baseline_reuse_s = 600;
  auto other = ParseTaskFile("configs/tasks/cpu_rowsum");
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  GateResult rowsum = Eval(*other, ReadSource("configs/tasks/cpu_rowsum/reference.cpp"), o);
  ASSERT_EQ(rowsum.status, fb::OutcomeStatus::Ok) << rowsum.diagnostics;
  EXPECT_GE(StageMs(rowsum, "time baseline"), 0) << "another task's reference is its own";
  o.baselines = nullptr;  // a process that keeps no figures times every baseline
  GateResult unkept = Eval(*task, src, o);
  ASSERT_EQ(unkept.status, fb::OutcomeStatus::Ok) << unkept.diagnostics;
  EXPECT_GE(StageMs(unkept, "time baseline"), 0) << "reused a figure nobody kept";
}

// Turns on one device (timing_lock.h DeviceLock; htamd's lanes, eval.device_workers): another
// lane's verification (here: this test, holding the device shared) delays a timed phase, never
// the stages around it, and the timing waits for it to end.
TEST_F(TimingLockTest, TimedPhasesWaitForAnotherLaneOnTheSameDevice) {
  auto task = ParseTaskFile("configs/tasks/cpu_relu");
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  const std::string src = ReadSource("configs/tasks/cpu_relu/reference.cpp");
  GateOptions o = Options();
  o.device_index = 0;
  const std::string path = DeviceLockPath(o.golden_cache_dir, "cpu", 0);
  ASSERT_FALSE(path.empty());
  const auto hold = std::chrono::milliseconds(1500);
  DeviceLock other(path, 30);
  other.Shared();
  std::thread releaser;
  auto progress = [&](const std::string& stage) {
    if (stage == "time candidate")
      releaser = std::thread([&] {
        std::this_thread::sleep_for(hold);
        other.Release();
      });
  };
  Gate gate(backend_.get(), device_, *task, o);
  GateResult r = gate.Evaluate(src, progress);
  releaser.join();
  ASSERT_EQ(r.status, fb::OutcomeStatus::Ok) << r.diagnostics;
  EXPECT_GE(StageMs(r, "time candidate"), 1400) << "timed while another lane held the device";
  // The release only began once the candidate's timing was reached: verification ran while the
  // other lane held the device (shared), without waiting out the bound (no note).
  EXPECT_GT(StageMs(r, "verify"), 0);
  EXPECT_EQ(r.diagnostics.find("overlapped"), std::string::npos) << r.diagnostics;
  EXPECT_GT(r.median_us, 0);
}

// A waiting timer goes before verifiers that come after it: holders of the device shared that
// overlap one another cannot keep a timed phase waiting for ever.
TEST(DeviceLockTest, AWaitingExclusiveTakerGoesBeforeLaterSharedTakers) {
  TempDir t;
  const std::string path = DeviceLockPath(t.path(), "cuda", 3);
  EXPECT_EQ(path, t.path() + "/device-cuda-3.lock");
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto ms = [&] { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); };
  DeviceLock a(path, 30), b(path, 30), c(path, 30);
  a.Shared();
  double b_got = -1, b_released = -1, c_got = -1;
  std::thread tb([&] {
    b.Exclusive();
    b_got = ms();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    b_released = ms();
    b.Release();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // b waits for a
  std::thread tc([&] {
    c.Shared();  // would be compatible with a, but b is waiting
    c_got = ms();
    c.Release();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LT(c_got, 0) << "a later shared taker passed the waiting exclusive one";
  a.Release();
  tb.join();
  tc.join();
  EXPECT_GE(b_got, 450);
  EXPECT_GE(c_got, b_released);
  EXPECT_TRUE(b.Note().empty());
  // No path: no lock, every call returns at once.
  DeviceLock none("", 30);
  none.Exclusive();
  none.Shared();
  EXPECT_TRUE(none.Note().empty());
}

// Past its bound a taker goes on without the lock, and says so.
TEST(DeviceLockTest, PastTheBoundItGoesOnWithANote) {
  TempDir t;
  const std::string path = DeviceLockPath(t.path() + "/made", "cuda", 0);
  DeviceLock holder(path, 30), late(path, 0.2);
  holder.Exclusive();
  const auto t0 = std::chrono::steady_clock::now();
  late.Shared();
  const double waited =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 180);
  EXPECT_LT(waited, 5000);
  EXPECT_NE(late.Note().find("went on without its turn"), std::string::npos) << late.Note();
}

// An exclusive turn may have its own bound (the eager baseline's, whose figure stays): that bound,
// not the constructor's, ends its wait, and the note names it.
TEST(DeviceLockTest, AnExclusiveTurnWaitsForItsOwnBound) {
  TempDir t;
  const std::string path = DeviceLockPath(t.path(), "cuda", 1);
  DeviceLock holder(path, 30), other(path, 30);
  holder.Exclusive();
  const auto t0 = std::chrono::steady_clock::now();
  other.Exclusive(0.3);
  const double waited =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 280);
  EXPECT_LT(waited, 5000);
  EXPECT_NE(other.Note().find("longer than 0.3 s;"), std::string::npos) << other.Note();
  // Its next turns wait for the constructor's bound again: one the holder releases in time.
  holder.Release();
  other.Release();
  holder.Exclusive();
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    holder.Release();
  });
  const auto t1 = std::chrono::steady_clock::now();
  other.Exclusive();
  const double second =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
  later.join();
  EXPECT_GE(second, 400);
  EXPECT_LT(second, 5000);
}

// The device's memory between jobs (timing_lock.h MemoryReservation): a job waits while the
// others' reservations and its own pass the limit, goes on once they are released, and a
// reservation whose holder was killed counts for nothing.
TEST(MemoryReservationTest, AJobWaitsForMemoryOthersReservedAndADeadHoldersCountsForNothing) {
  TempDir t;
  const std::string path = DeviceMemoryPath(t.path(), "cuda", 0);
  EXPECT_EQ(path, t.path() + "/device-cuda-0.memory");
  const uint64_t limit = 100;
  using Clock = std::chrono::steady_clock;
  {
    auto first = std::make_unique<MemoryReservation>(path, 60, limit, 5);
    ASSERT_TRUE(first->held());
    EXPECT_TRUE(first->Note().empty()) << first->Note();
    MemoryReservation small(path, 40, limit, 0.2);  // 60 + 40 fit
    EXPECT_TRUE(small.held());
    // 60 + 40 + 30 do not: past its bound the job is told why, and holds nothing.
    MemoryReservation late(path, 30, limit, 0.3);
    EXPECT_FALSE(late.held());
    EXPECT_TRUE(late.waited_out());
    EXPECT_NE(late.Note().find("eval.device_memory_wait_s"), std::string::npos) << late.Note();
    // Released while another waits: it goes on.
    const auto t0 = Clock::now();
    std::thread release([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      first.reset();
    });
    MemoryReservation next(path, 50, limit, 10);
    release.join();
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_TRUE(next.held());
    EXPECT_GE(waited, 0.35);
    EXPECT_LT(waited, 5.0);
    EXPECT_NE(next.Note().find("waited"), std::string::npos) << next.Note();
  }
  // A job larger than the limit alone is admitted once nobody else holds memory.
  EXPECT_TRUE(MemoryReservation(path, 500, limit, 0.2).held());

  // A holder killed with SIGKILL leaves its file; the next job ignores it and removes it.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    MemoryReservation r(path, 90, limit, 5);
    char c = r.held() ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_EQ(c, 'y');
  EXPECT_FALSE(MemoryReservation(path, 50, limit, 0.2).held()) << "the live holder's 90 ignored";
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  MemoryReservation after(path, 50, limit, 0.2);
  EXPECT_TRUE(after.held()) << "a killed holder's reservation still counted";
  EXPECT_EQ(after.others_bytes(), 0u);
  // No path: no reservation, no wait.
  EXPECT_FALSE(MemoryReservation("", 50, limit, 10).held());
}

// A reservation handed to a detached process (a job's background torch.compile measurement,
// which runs the model after the job's verdict) holds until that process ends, not the job.
TEST(MemoryReservationTest, AReservationHandedToADetachedProcessHoldsUntilItEnds) {
  TempDir t;
  const std::string path = DeviceMemoryPath(t.path(), "cuda", 0);
  const uint64_t limit = 100;
  auto job = std::make_unique<MemoryReservation>(path, 80, limit, 5);
  ASSERT_TRUE(job->held());
  const std::string lock = t.path() + "/compile.lock";
  int lock_fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(lock_fd, 0);
  DetachedOptions d;
  d.keep_fd = lock_fd;
  d.also_keep_fd = job->fd();
  ASSERT_TRUE(StartDetached({"/bin/sleep", "1.5"}, d).ok());
  job->HandOver();
  job.reset();  // the job ends; the measurement goes on
  close(lock_fd);
  const auto t0 = std::chrono::steady_clock::now();
  MemoryReservation next(path, 50, limit, 20);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(next.held());
  EXPECT_GE(waited, 0.8) << "the detached process's reservation did not hold";
  EXPECT_LT(waited, 15);
  EXPECT_EQ(next.others_bytes(), 80u);
}

// No PyTorch needed below.
TEST(KernelBenchGoldenFileTest, CorruptFilesAreRefused) {
  TempDir t;
  const std::string p = t.path() + "/seed_0.bin";
  GoldenCase g;
  std::ofstream(p) << "NOTGOLD!";
  EXPECT_EQ(ReadGoldenFile(p, &g).code(), Status::Code::kCorruption);
  // Right magic, one tensor whose byte count disagrees with its shape.
  std::string s = "HTAMGLD1";
  auto u32 = [&](uint32_t v) { s.append(reinterpret_cast<char*>(&v), 4); };
  u32(1);
  u32(0);
  u32(1);
  s += "x";
  u32(3);
  s += "f32";
  u32(1);
  int64_t dim = 4;
  s.append(reinterpret_cast<char*>(&dim), 8);
  uint64_t nb = 12;
  s.append(reinterpret_cast<char*>(&nb), 8);
  s.append(12, '\0');
  std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
  Status st = ReadGoldenFile(p, &g);
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_NE(st.message().find("byte count"), std::string::npos) << st.ToString();
}

TEST(KernelBenchGoldenFileTest, AMissingHelperIsAClearError) {
  TempDir t;
  auto task = ParseTaskFile(kTask);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  GoldenOptions go;
  go.cache_dir = t.path();
  go.helper = "/nonexistent/kb_helper.py";
  KernelBenchGolden g(*task, go);
  Status st = g.Prepare({0}, {}, false);
  EXPECT_TRUE(st.IsNotFound()) << st.ToString();
  EXPECT_NE(st.message().find("HTAM_KERNELBENCH_HELPER"), std::string::npos);
}

// A Python float in get_inputs() (KernelBench's 5_Matrix_scalar_multiplication): the importer
// makes it a one-element f64 input, the golden data carries its value, the candidate reads it.
TEST_F(KernelBenchGateTest, APythonFloatInputReachesTheCandidateAsADouble) {
  REQUIRE_TORCH();
  const std::string dir = tmp_.path() + "/scalar";
  std::string cmd = "/usr/bin/python3 tools/kernelbench/kb_helper.py import " +
                    std::string(kProblems) + "/scalar_mul.py " + dir + " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto task = ParseTaskFile(dir);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  ASSERT_EQ(task->inputs.size(), 2u);
  EXPECT_EQ(task->inputs[1].name, "s");
  EXPECT_EQ(task->inputs[1].dtype, HTAM_F64);
  auto candidate = [](const char* factor) {
    return std::string(R"(#include <htam/kernel_abi.h>
HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 2 || nout != 1) return 1;
  const float* a = static_cast<const float*>(in[0].data);
  const double s = *static_cast<const double*>(in[1].data);
  float* y = static_cast<float*>(out[0].data);
  for (long i = 0; i < htam_numel(&in[0]); ++i) y[i] = a[i] * static_cast<float>()") +
           factor + R"();
  return 0;
}
)";
  };
  GateResult r = Eval(*task, candidate("s"), Options());
  EXPECT_EQ(r.status, fb::OutcomeStatus::Ok) << r.diagnostics;
  r = Eval(*task, candidate("s + 1.0"), Options());
  EXPECT_EQ(r.status, fb::OutcomeStatus::Incorrect) << r.diagnostics;
}

}  // namespace
}  // namespace htam
