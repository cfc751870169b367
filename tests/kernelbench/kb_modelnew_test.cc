// ModelNew candidates (language "kernelbench") through the daemon's evaluator: a sandboxed
// worker (the verifier, with the golden data) and its runner, whose child Python runs the
// candidate (tools/kernelbench/kb_runner.py). Honest, wrong, broken and hacking ModelNew files
// of tests/kernelbench/modelnew on the CPU backend. Skips when /usr/bin/python3 cannot import
// torch.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "base/hash.h"
#include "tests/integration/eval_test_util.h"

namespace htam::eval::testing {
namespace {

bool HaveTorch() {
  return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

// One evaluator for the suite (each job is a fresh worker; golden data is computed once).
class kb_modelnew : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HaveTorch()) return;
    dir_ = new TempDir;
    // The task inside the data dir: hidden from the runner like a daemon's task suite.
    task_ = dir_->path() + "/tasks/kb_linear_relu_open";
    forbid_ = dir_->path() + "/tasks/kb_linear_relu_forbid";
    for (const auto& t : {task_, forbid_}) {
      std::string cmd = "mkdir -p " + t + " && cp tests/kernelbench/tasks/kb_linear_relu_open/* " +
                        t + " && chmod -R a+rX " + dir_->path();
      EXPECT_EQ(std::system(cmd.c_str()), 0);
    }
    // The same problem where PyTorch compute operators are forbidden (KernelBench's strict policy).
    std::string patch =
        "/usr/bin/python3 -c \"import json,sys; p=sys.argv[1]; t=json.load(open(p));"
        " t['kernelbench_policy']['torch_ops']='forbid'; json.dump(t,open(p,'w'))\" " +
        forbid_ + "/task.json";
    EXPECT_EQ(std::system(patch.c_str()), 0);
    ev_ = StartEvaluator(TestConfig(dir_->path())).release();
  }
  static void TearDownTestSuite() {
    delete ev_;
    delete dir_;
    ev_ = nullptr;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!HaveTorch())
      GTEST_SKIP() << "PyTorch is not importable by /usr/bin/python3: install python3-torch "
                      "(tools/setup.sh does)";
    ASSERT_NE(ev_, nullptr);
  }

  static EvalResult Eval(const std::string& task, const std::string& source,
                         const std::string& language = "kernelbench") {
    static uint64_t id = 1;
    EvalJob j = Job(id++, task, source);
    j.language = language;
    auto p = std::make_shared<std::promise<EvalResult>>();
    auto f = p->get_future();
    Status st = ev_->Submit(j, [p](EvalResult r) { p->set_value(std::move(r)); });
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) return EvalResult{};
    return f.get();
  }
  static EvalResult File(const std::string& name, const std::string& task = "") {
    return Eval(task.empty() ? task_ : task, ReadSource("tests/kernelbench/modelnew/" + name));
  }

  static TempDir* dir_;
  static Evaluator* ev_;
  static std::string task_, forbid_;
};
TempDir* kb_modelnew::dir_ = nullptr;
Evaluator* kb_modelnew::ev_ = nullptr;
std::string kb_modelnew::task_, kb_modelnew::forbid_;

#define EXPECT_OUTCOME(r, st, text)                                              \
  do {                                                                           \
    EXPECT_EQ(Name((r).status), std::string(Name(st))) << (r).diagnostics;       \
    EXPECT_NE((r).diagnostics.find(text), std::string::npos) << (r).diagnostics; \
  } while (0)

TEST_F(kb_modelnew, HonestModelNewIsOkWithASpeedupAgainstEagerPyTorch) {
  EvalResult r = File("honest_torch.py");
  EXPECT_OUTCOME(r, fb::OutcomeStatus::Ok, "passed 3 correctness trials");
  EXPECT_GT(r.median_us, 0);
  EXPECT_GT(r.baseline_us, 0) << "PyTorch eager baseline missing";
  EXPECT_GT(r.speedup, 0);
  EXPECT_EQ(r.candidate_hash,
            CandidateKey("kernelbench", ReadSource("tests/kernelbench/modelnew/honest_torch.py")));
  // Timed calls go on past eval.repetitions (10 here) until they add up to
  // eval.kernelbench_min_timed_ms: a short call's median rests on many calls.
  // (The calls' wall times add up to it; their median times the count may be far less on a
  // loaded machine, so only the count is checked against the 10.)
  ASSERT_GT(Config::Defaults().GetInt("eval.kernelbench_min_timed_ms"), 0);
  EXPECT_GT(r.repetitions, 10) << r.diagnostics;
}

TEST_F(kb_modelnew, WrongBrokenAndRaisingModelNewAreReportedAsSuch) {
  EXPECT_OUTCOME(File("wrong_no_bias.py"), fb::OutcomeStatus::Incorrect, "outside tolerance");
  EXPECT_OUTCOME(File("syntax_error.py"), fb::OutcomeStatus::CompileError, "does not parse");
  EXPECT_OUTCOME(File("forward_raises.py"), fb::OutcomeStatus::Crash,
                 "ModelNew.forward raised RuntimeError");
}

TEST_F(kb_modelnew, KernelBenchHacksAreRejectedWithTheirReasons) {
  // Static checks (kb_static.py), before anything runs.
  EXPECT_OUTCOME(File("try_except_fallback.py"), fb::OutcomeStatus::Incorrect, "[fallback]");
  EXPECT_OUTCOME(File("inherit_pass.py"), fb::OutcomeStatus::Incorrect, "[inheritance]");
  EXPECT_OUTCOME(File("result_cache.py"), fb::OutcomeStatus::Incorrect, "[caching]");
  // At run time: what the static checks cannot see.
  EXPECT_OUTCOME(File("result_reuse_hidden.py"), fb::OutcomeStatus::Incorrect, "(trial 1)");
  EXPECT_OUTCOME(File("zeroed_output.py"), fb::OutcomeStatus::Incorrect, "all zeros");
  EXPECT_OUTCOME(File("mutates_input.py"), fb::OutcomeStatus::Incorrect, "modified its input 'x'");
}

TEST_F(kb_modelnew, PyTorchOperatorsTheTaskForbidsAreCaughtAtRunTime) {
  // Allowed by the open task, rejected where torch_ops is "forbid" although the source spells
  // the operator in a way the static checks do not read.
  EXPECT_OUTCOME(File("hidden_torch_op.py"), fb::OutcomeStatus::Ok, "passed");
  EXPECT_OUTCOME(File("hidden_torch_op.py", forbid_), fb::OutcomeStatus::Incorrect,
                 "rejected by the task's policy at run time: [torch_ops]");
  // KernelBench's default policy requires a custom kernel: plain PyTorch is not one.
  EXPECT_OUTCOME(Eval("configs/tasks/kb_linear_relu",
                      ReadSource("tests/kernelbench/modelnew/honest_torch.py")),
                 fb::OutcomeStatus::Incorrect, "[require_kernel]");
}

TEST_F(kb_modelnew, TheAnswerKeyIsOutOfTheCandidatesReach) {
  // Golden data exists (an earlier job computed it) and the verifier reads it; the candidate,
  // looking from inside the runner, finds neither it nor the task's problem file.
  const std::string golden = dir_->path() + "/eval-cache/kernelbench";
  if (Eval(task_, ReadSource("tests/kernelbench/modelnew/honest_torch.py")).status !=
      fb::OutcomeStatus::Ok)
    FAIL() << "the honest candidate must pass first";
  struct stat st;
  ASSERT_TRUE(stat(golden.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) << golden;
  std::string src = ReadSource("tests/kernelbench/modelnew/reads_answer_key.py");
  src.replace(src.find("@GOLDEN_DIR@"), 12, golden);
  src.replace(src.find("@PROBLEM@"), 9, task_ + "/problem.py");
  EvalResult r = Eval(task_, src);
  EXPECT_OUTCOME(r, fb::OutcomeStatus::CompileError, "answer key not in reach");
}

// The host-wide timing lock on the ModelNew path: while the background torch.compile measurement
// (here: this test) holds <golden cache>/timing.lock exclusive, the verifier does not let the
// runner time; it times once the lock is free.
TEST_F(kb_modelnew, TheTimingWaitsWhileTheBackgroundMeasurementHoldsTheTimingLock) {
  if (File("honest_torch.py").status != fb::OutcomeStatus::Ok)  // the golden cache exists
    FAIL() << "the honest candidate must pass first";
  const std::string lock = dir_->path() + "/eval-cache/kernelbench/timing.lock";
  int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << lock;
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  // Released 1.5 s after the worker says its timing stage has begun; the result comes after.
  using Clock = std::chrono::steady_clock;
  std::promise<Clock::time_point> timing_began;
  std::atomic<bool> told{false};
  std::shared_future<Clock::time_point> began = timing_began.get_future().share();
  std::thread release([&] {
    began.wait_for(std::chrono::seconds(300));  // never told (a failure below): released at once
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    close(fd);
  });
  EvalJob j = Job(9001, task_, ReadSource("tests/kernelbench/modelnew/honest_torch.py"));
  j.language = "kernelbench";
  j.on_stage = [&](uint64_t, const std::string& stage, const std::string&) {
    if (stage.rfind("time kernelbench candidate", 0) == 0 && !told.exchange(true))
      timing_began.set_value(Clock::now());
  };
  auto p = std::make_shared<std::promise<EvalResult>>();
  auto result = p->get_future();
  Status st = ev_->Submit(j, [p](EvalResult r) { p->set_value(std::move(r)); });
  EXPECT_TRUE(st.ok()) << st.ToString();
  EvalResult r = st.ok() ? result.get() : EvalResult{};
  const auto done = Clock::now();
  if (!told.exchange(true)) timing_began.set_value(done);
  release.join();
  EXPECT_OUTCOME(r, fb::OutcomeStatus::Ok, "passed 3 correctness trials");
  EXPECT_EQ(r.diagnostics.find("overlapped"), std::string::npos) << r.diagnostics;
  const double after_ms = std::chrono::duration<double, std::milli>(done - began.get()).count();
  EXPECT_GE(after_ms, 1500) << "the runner timed while the lock was held exclusive";
}

TEST_F(kb_modelnew, TheLanguageIsRefusedOnTasksThatAreNotKernelBenchProblems) {
  EvalJob j =
      Job(999, "configs/tasks/cpu_relu", ReadSource("tests/kernelbench/modelnew/honest_torch.py"));
  j.language = "kernelbench";
  Status st = ev_->Submit(j, [](EvalResult) {});
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("is for KernelBench tasks"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace htam::eval::testing
