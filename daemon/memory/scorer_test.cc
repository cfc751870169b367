// The learned scorer (docs/memory.md, "Learned scorer"): it learns a planted rule from records,
// only verified (or vouched) records train it, its predictions survive a restart of the store,
// and a store too thin to learn from decides as without it. Real LMDB and FAISS.
#include "daemon/memory/scorer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "daemon/memory/memory.h"
#include "daemon/memory/policy.h"
#include "daemon/memory/test_util.h"

namespace htam::memory {
namespace {

using testing::Opts;
using testing::DirId;
using testing::OpenOk;
using testing::TempDir;

// A state key of a kernel of this bottleneck class, with a random size, intensity and step.
std::vector<float> Key(fb::Bottleneck b, std::mt19937* rng) {
  std::uniform_real_distribution<double> u(0, 1);
  PolicyState s;
  s.category = "gemm";
  s.bottleneck = b;
  s.log_size = 5 + 4 * u(*rng);
  s.intensity = 64 * u(*rng);
  s.step = static_cast<uint32_t>(6 * u(*rng));
  return TransitionKey(s, MemoryOptions());
}

// The planted rule: direction 1 improves memory-bound kernels (log gain 0.4) and fails on
// compute-bound ones; direction 2 the reverse.
void Plant(Scorer* sc, int n, bool trusted, std::mt19937* rng) {
  MemoryOptions o;
  for (int i = 0; i < n; ++i) {
    fb::Bottleneck b = i % 2 ? fb::Bottleneck::Memory : fb::Bottleneck::Compute;
    std::vector<float> k = Key(b, rng);
    for (uint64_t dir : {1, 2}) {
      bool good = (dir == 1) == (b == fb::Bottleneck::Memory);
      sc->MaybeTrain(k.data(), dir, good ? fb::OutcomeStatus::Ok : fb::OutcomeStatus::Incorrect,
                     good ? 0.4 : 0.0, trusted, o);
    }
  }
}

TEST(ScorerTest, LearnsAPlantedRule) {
  Scorer sc;
  std::mt19937 rng(7);
  Plant(&sc, 300, /*trusted=*/true, &rng);
  EXPECT_EQ(sc.records(), 600u);
  for (int i = 0; i < 20; ++i) {
    std::vector<float> mem = Key(fb::Bottleneck::Memory, &rng);
    std::vector<float> cmp = Key(fb::Bottleneck::Compute, &rng);
    Scorer::Prediction a_mem, b_mem, a_cmp, b_cmp;
    ASSERT_TRUE(sc.Predict(mem.data(), 1, &a_mem, 3));
    ASSERT_TRUE(sc.Predict(mem.data(), 2, &b_mem));
    ASSERT_TRUE(sc.Predict(cmp.data(), 1, &a_cmp));
    ASSERT_TRUE(sc.Predict(cmp.data(), 2, &b_cmp));
    EXPECT_GT(a_mem.p_improve, 0.8);
    EXPECT_LT(b_mem.p_improve, 0.2);
    EXPECT_LT(a_cmp.p_improve, 0.2);
    EXPECT_GT(b_cmp.p_improve, 0.8);
    EXPECT_GT(a_mem.expected_gain, b_mem.expected_gain + 0.2);
    EXPECT_GT(b_cmp.expected_gain, a_cmp.expected_gain + 0.2);
    // Why: the bottleneck class is among the largest contributions.
    bool named = false;
    for (const auto& [name, v] : a_mem.top) named |= name.rfind("bottleneck=", 0) == 0;
    EXPECT_TRUE(named);
  }
  Scorer::Prediction none;
  EXPECT_FALSE(sc.Predict(Key(fb::Bottleneck::Memory, &rng).data(), 3, &none));
}

TEST(ScorerTest, UnverifiedRecordsDoNotTrainIt) {
  Scorer sc;
  std::mt19937 rng(7);
  Plant(&sc, 300, /*trusted=*/false, &rng);
  EXPECT_EQ(sc.records(), 0u);
  Scorer::Prediction p;
  EXPECT_FALSE(sc.Predict(Key(fb::Bottleneck::Memory, &rng).data(), 1, &p));
  // Verified ones then train it; further unverified ones, claiming the reverse, change nothing.
  Plant(&sc, 100, /*trusted=*/true, &rng);
  std::vector<float> k = Key(fb::Bottleneck::Memory, &rng);
  Scorer::Prediction before, after;
  ASSERT_TRUE(sc.Predict(k.data(), 1, &before));
  MemoryOptions o;
  for (int i = 0; i < 200; ++i)
    EXPECT_FALSE(sc.MaybeTrain(k.data(), 2, fb::OutcomeStatus::Ok, 3.0, /*trusted=*/false, o));
  ASSERT_TRUE(sc.Predict(k.data(), 1, &after));
  EXPECT_EQ(before.p_improve, after.p_improve);
  EXPECT_EQ(before.expected_gain, after.expected_gain);
  // Infrastructure errors say nothing about a direction.
  EXPECT_FALSE(sc.MaybeTrain(k.data(), 1, fb::OutcomeStatus::InfraError, 0, true, o));
}

// ---------------------------------------------------------------- through the memory

uint64_t Task(Memory* m, const std::string& name) {
  return testing::PutTestTask(m, name, "gemm", "matrix multiply", 1 << 24, 16 << 20);
}

// Sessions where global-memory-access helps memory-bound kernels and compute-throughput-precision compute-bound
// ones, each direction failing in the other class; verified (gate) or client-reported.
void History(Memory* m, uint64_t task, int sessions, bool verified) {
  uint64_t a = DirId(m, "global-memory-access"), b = DirId(m, "compute-throughput-precision");
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  for (int i = 0; i < sessions; ++i) {
    fb::Bottleneck cls = i % 2 ? fb::Bottleneck::Memory : fb::Bottleneck::Compute;
    for (uint64_t dir : {a, b}) {
      // One step per session: both directions are seen at a session's start.
      auto s = m->OpenSession(task, "cuda", "sm_90", "team", "model", 6);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      bool good = (dir == a) == (cls == fb::Bottleneck::Memory);
      StepInput st;
      st.session_id = s->id;
      st.direction_id = dir;
      st.status = good ? fb::OutcomeStatus::Ok : fb::OutcomeStatus::Incorrect;
      st.speedup_after = good ? 1.5 : 0;
      st.verified = verified;
      st.state = StateInput{cls, std::nullopt, ""};
      auto r = m->RecordStep(st);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  }
}

Decision Next(Memory* m, uint64_t task, fb::Bottleneck cls) {
  auto s = m->OpenSession(task, "cuda", "sm_90", "probe", "model", 6);
  EXPECT_TRUE(s.ok());
  auto d = m->NextStep(s.ok() ? s->id : 0, StateInput{cls, std::nullopt, ""});
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : Decision{};
}

std::string LearnedPart(const std::string& why) {
  size_t at = why.find("Learned scorer");
  return at == std::string::npos ? "" : why.substr(at, why.find('.', why.find("records", at)) - at);
}

MemoryOptions ScorerOpts(const std::string& dir, int min_records) {
  MemoryOptions o = Opts(dir);
  o.scorer = true;
  o.scorer_min_records = min_records;
  return o;
}

TEST(ScorerMemoryTest, PredictionsSurviveARestart) {
  TempDir dir;
  std::string before;
  uint64_t task = 0;
  {
    auto m = OpenOk(ScorerOpts(dir.path(), 20));
    task = Task(m.get(), "sgemm_1024");
    History(m.get(), task, 40, /*verified=*/true);
    Decision d = Next(m.get(), task, fb::Bottleneck::Memory);
    before = LearnedPart(d.why);
    ASSERT_NE(before, "") << d.why;
    EXPECT_NE(before.find("p(improve)"), std::string::npos) << d.why;
  }
  auto m = OpenOk(ScorerOpts(dir.path(), 20));
  Decision d = Next(m.get(), task, fb::Bottleneck::Memory);
  EXPECT_EQ(LearnedPart(d.why), before) << d.why;
  // And after the indexes are rebuilt from the records.
  ASSERT_TRUE(m->RebuildDerived().ok());
  EXPECT_EQ(LearnedPart(Next(m.get(), task, fb::Bottleneck::Memory).why), before);
}

TEST(ScorerMemoryTest, ThinOrUnverifiedStoresFallBackToThePolicy) {
  TempDir dir;
  // 40 verified records: below scorer_min_records 1000 the decision is the policy's own.
  auto thin = OpenOk(ScorerOpts(dir.path() + "/thin", 1000));
  uint64_t task = Task(thin.get(), "sgemm_1024");
  History(thin.get(), task, 20, /*verified=*/true);
  Decision d = Next(thin.get(), task, fb::Bottleneck::Memory);
  EXPECT_EQ(d.why.find("Learned scorer"), std::string::npos) << d.why;
  // Only client-reported records, many: nothing trains the scorer, so it stays out.
  auto unv = OpenOk(ScorerOpts(dir.path() + "/unverified", 1));
  uint64_t task2 = Task(unv.get(), "sgemm_1024");
  History(unv.get(), task2, 50, /*verified=*/false);
  Decision u = Next(unv.get(), task2, fb::Bottleneck::Memory);
  EXPECT_EQ(u.why.find("Learned scorer"), std::string::npos) << u.why;
  // The same store with scorer_min_records 1 and verified records: the scorer speaks.
  auto on = OpenOk(ScorerOpts(dir.path() + "/on", 1));
  uint64_t task3 = Task(on.get(), "sgemm_1024");
  History(on.get(), task3, 20, /*verified=*/true);
  Decision o = Next(on.get(), task3, fb::Bottleneck::Memory);
  EXPECT_NE(o.why.find("Learned scorer"), std::string::npos) << o.why;
}

// Through the memory, the planted rule decides: with the scorer on, a memory-bound state's
// p(success) for global-memory-access exceeds the compute-bound state's, and the reverse for
// compute-throughput-precision.
TEST(ScorerMemoryTest, PlantedRuleReachesTheDecision) {
  TempDir dir;
  auto m = OpenOk(ScorerOpts(dir.path(), 20));
  uint64_t task = Task(m.get(), "sgemm_1024");
  History(m.get(), task, 60, /*verified=*/true);
  auto p = [&](const Decision& d, const std::string& name) {
    for (const auto& s : d.scores)
      if (s.name == name) return s.p_success;
    return -1.0;
  };
  Decision mem = Next(m.get(), task, fb::Bottleneck::Memory);
  Decision cmp = Next(m.get(), task, fb::Bottleneck::Compute);
  EXPECT_GT(p(mem, "global-memory-access"), p(cmp, "global-memory-access") + 0.2) << mem.why;
  EXPECT_GT(p(cmp, "compute-throughput-precision"), p(mem, "compute-throughput-precision") + 0.2) << cmp.why;
}

}  // namespace
}  // namespace htam::memory
