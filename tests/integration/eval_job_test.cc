// What a job carries reaches its worker's gate (the CPU backend through the Evaluator htamd uses):
// the candidate's content key is computed once per job (by htamd, or by the evaluator when the
// job comes without one) and the gate names that key instead of hashing the source again. And a
// job's language is refused at htamd's Submit with the plugin's own language, by the scheduler
// as by the evaluator.
#include <string>

#include "base/hash.h"
#include "daemon/eval/scheduler/scheduler.h"
#include "tests/integration/eval_test_util.h"

namespace htam::eval::testing {
namespace {

const char* kRelu = "configs/tasks/cpu_relu";

std::string Honest() {
  return ReadSource("configs/tasks/cpu_relu/variants/cpu/v1_avx2_max.cpp");
}

TEST(EvalJob, TheJobsCandidateKeyIsTheOneTheResultNames) {
  TempDir dir;
  auto ev = StartEvaluator(TestConfig(dir.path(), {{"eval.seeds", "1"}}));
  ASSERT_NE(ev, nullptr);
  // A key that no hash of this source gives: a result naming it took the job's key, so the
  // worker's gate did not hash the source again (before the key travelled, the gate's own hash
  // replaced it).
  const std::string marker = Sha256Hex("not the source");
  ASSERT_NE(marker, CandidateKey("cpp", Honest()));
  EvalJob keyed = Job(1, kRelu, Honest());
  keyed.candidate_hash = marker;
  auto r = ev->Evaluate(keyed);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Name(r->status), std::string("Ok")) << r->diagnostics;
  EXPECT_EQ(r->candidate_hash, marker);
  // Without a key, the one computed for the job is the candidate's content key.
  auto plain = ev->Evaluate(Job(2, kRelu, Honest()));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(Name(plain->status), std::string("Ok")) << plain->diagnostics;
  EXPECT_EQ(plain->candidate_hash, CandidateKey("cpp", Honest()));
}

TEST(EvalJob, AWrongLanguageIsRefusedAtSubmitWithThePluginsLanguage) {
  TempDir dir;
  auto local = StartEvaluator(TestConfig(dir.path(), {{"eval.seeds", "1"}}));
  ASSERT_NE(local, nullptr);
  EXPECT_EQ(local->BackendLanguage("cpu"), "cpp");  // the CPU plugin's description
  EXPECT_EQ(local->BackendLanguage("tpu"), "");
  // The evaluator alone (htam-eval, a remote worker) and htamd's scheduler in front of it give
  // the same refusal, at once, naming what the backend takes.
  EvalJob j = Job(1, kRelu, Honest());
  j.language = "cuda";
  Status alone = local->Submit(j, nullptr);
  EXPECT_EQ(alone.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(alone.message(), "backend 'cpu' takes cpp, not cuda");
  scheduler::SchedulerOptions so;  // no worker endpoint, no durable queue: the local devices
  auto sched = scheduler::StartScheduler(so, std::move(local));
  ASSERT_TRUE(sched.ok()) << sched.status().ToString();
  int called = 0;
  Status st = (*sched)->Submit(j, [&](EvalResult) { ++called; });
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "backend 'cpu' takes cpp, not cuda");
  // The job's own language, or none, is taken and evaluated.
  j.job_id = 2;
  j.language = "cpp";
  auto ok = (*sched)->Evaluate(j);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(Name(ok->status), std::string("Ok")) << ok->diagnostics;
  (*sched)->Shutdown();
  EXPECT_EQ(called, 0) << "a refused job never calls back";
}

}  // namespace
}  // namespace htam::eval::testing
