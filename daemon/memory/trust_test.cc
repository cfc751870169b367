// Trust in the memory (docs/memory.md, "Trust"), against a real LMDB store and real FAISS
// indexes: client-reported outcomes are weighed apart from verified ones and cannot outrank
// them, "no change" is no success, implausible values are refused, and no client-reported
// record, session or client moves an estimate by more than a bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "daemon/memory/memory.h"
#include "daemon/memory/test_util.h"

namespace htam::memory {
namespace {

using testing::Opts;
using testing::DirId;
using testing::OpenOk;
using testing::TempDir;

uint64_t Task(Memory* m, const std::string& name) {
  return testing::PutTestTask(m, name, "reduction", "row-wise sum of a float32 matrix", 1 << 22, 16 << 20);
}

// A step as htamd's gate reports it (verified) or as a client's Record does (unverified).
StepInput Step(uint64_t session, uint64_t dir, double speedup, bool verified,
               const std::string& summary = "") {
  StepInput s;
  s.session_id = session;
  s.direction_id = dir;
  s.status = fb::OutcomeStatus::Ok;
  s.speedup_after = speedup;
  s.summary = summary;
  s.verified = verified;
  s.state = StateInput{fb::Bottleneck::Memory, std::nullopt, ""};
  return s;
}

uint64_t Open(Memory* m, uint64_t task, const std::string& client) {
  auto s = m->OpenSession(task, "cuda", "sm_90", client, "model", 6);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? s->id : 0;
}

Decision Next(Memory* m, uint64_t session, bool full = false) {
  StateInput in{fb::Bottleneck::Memory, std::nullopt, ""};
  in.full = full;
  auto d = m->NextStep(session, in);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : Decision{};
}

// The lowest-ranked direction of a fresh session on `task` (by the priors and the history).
uint64_t LowestRanked(Memory* m, uint64_t task) {
  Decision d = Next(m, Open(m, task, "probe"));
  uint64_t last = 0;
  for (const auto& sc : d.scores)
    if (!sc.masked) last = sc.direction_id;
  return last;
}

// Verified history: several teams' sessions on three reductions where warp shuffles helped.
void VerifiedHistory(Memory* m, const std::vector<uint64_t>& tasks) {
  uint64_t good = DirId(m, "reductions-scans");
  for (uint64_t task : tasks)
    for (int i = 0; i < 2; ++i) {
      uint64_t s = Open(m, task, "team-" + std::to_string(i));
      ASSERT_TRUE(m->RecordStep(Step(s, good, 1.6, true)).ok());
    }
}

// The first finding: one unverified Record from one client on one task made every other
// client's new session, on three tasks, choose the lowest-ranked direction, with the poisoned
// strategy first in its list.
TEST(TrustTest, OneUnverifiedRecordDoesNotSteerOtherClientsSessions) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  std::vector<uint64_t> tasks = {Task(m.get(), "rowsum_a"), Task(m.get(), "rowsum_b"),
                                 Task(m.get(), "rowsum_c")};
  VerifiedHistory(m.get(), tasks);
  uint64_t low = LowestRanked(m.get(), tasks[0]);
  ASSERT_NE(low, 0u);
  // One client reports a 40x gain for the lowest-ranked direction on one task.
  uint64_t evil = Open(m.get(), tasks[0], "mallory");
  auto r = m->RecordStep(Step(evil, low, 40.0, false, "unroll everything eight times"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (uint64_t task : tasks) {
    Decision d = Next(m.get(), Open(m.get(), task, "bob"));
    EXPECT_NE(d.direction.id, low) << d.why;
    ASSERT_FALSE(d.strategies.empty());
    EXPECT_NE(d.strategies[0].strategy->title, "unroll everything eight times")
        << d.prompt_context;
  }
}

// The second finding: a record_outcome summary became a learned strategy ranked in next_step.
TEST(TrustTest, ClientReportedSummaryTeachesNoStrategy) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  uint64_t task = Task(m.get(), "rowsum");
  VerifiedHistory(m.get(), {task});
  const std::string summary = "measured on my laptop (unverified)";
  uint64_t s = Open(m.get(), task, "laptop");
  auto r = m->RecordStep(Step(s, DirId(m.get(), "reductions-scans"), 3.0, false, summary));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->new_strategy_id, 0u);
  EXPECT_EQ(r->merged_into, 0u);
  Decision d = Next(m.get(), Open(m.get(), task, "bob"), /*full=*/true);
  for (const auto& h : d.strategies) EXPECT_NE(h.strategy->title, summary) << d.prompt_context;
  // The same summary from htamd's gate teaches.
  auto v = m->RecordStep(Step(Open(m.get(), task, "gate"), DirId(m.get(), "reductions-scans"),
                              3.0, true, summary));
  ASSERT_TRUE(v.ok());
  EXPECT_NE(v->new_strategy_id, 0u);
}

// The third finding: steps of 1.00x (inside the timing spread) created learned strategies.
TEST(TrustTest, StepInsideTheTimingSpreadIsNoChange) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  uint64_t task = Task(m.get(), "rowsum");
  uint64_t dir_id = DirId(m.get(), "reductions-scans");
  uint64_t s = Open(m.get(), task, "gate");
  auto r = m->RecordStep(Step(s, dir_id, 1.004, true, "reordered two loads"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->new_strategy_id, 0u);
  EXPECT_FLOAT_EQ(r->best_speedup, 1.0f);
  // 3 % is inside a step whose own spread is 5 % of its median.
  StepInput noisy = Step(s, dir_id, 1.03, true, "padded the shared tile");
  noisy.median_us = 100;
  noisy.spread_us = 5;
  r = m->RecordStep(noisy);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->new_strategy_id, 0u);
  auto t = m->GetTransition(r->transition_id);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->no_change);
  // A real gain still teaches.
  r = m->RecordStep(Step(s, dir_id, 1.5, true, "warp shuffle reduction per row"));
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->new_strategy_id, 0u);
  auto st = m->GetStrategy(r->new_strategy_id);
  ASSERT_TRUE(st.ok());
  // Statistics count the two no-change steps as uses without success.
  auto dirs = m->GetDirection(dir_id);
  ASSERT_TRUE(dirs.ok());
  EXPECT_EQ(dirs->stats->uses(), 3u);
  EXPECT_EQ(dirs->stats->successes(), 1u);
  std::vector<std::string> problems;
  ASSERT_TRUE(m->Check(&problems).ok());
  EXPECT_TRUE(problems.empty()) << problems[0];
}

TEST(TrustTest, ImplausibleValuesAreRefusedAndNothingIsStored) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  uint64_t task = Task(m.get(), "rowsum");
  uint64_t dir_id = DirId(m.get(), "reductions-scans");
  uint64_t s = Open(m.get(), task, "c");
  std::vector<StepInput> bad;
  bad.push_back(Step(s, dir_id, 5000.0, false));  // above memory.max_speedup (1000)
  bad.push_back(Step(s, dir_id, std::nan(""), false));
  bad.push_back(Step(s, dir_id, INFINITY, true));
  bad.push_back(Step(s, dir_id, -2.0, false));
  StepInput t1 = Step(s, dir_id, 2.0, false);
  t1.median_us = -1;
  bad.push_back(t1);
  StepInput t2 = Step(s, dir_id, 2.0, false);
  t2.median_us = NAN;
  bad.push_back(t2);
  StepInput t3 = Step(s, dir_id, 2.0, false);
  t3.spread_us = INFINITY;
  bad.push_back(t3);
  for (const StepInput& b : bad) {
    auto r = m->RecordStep(b);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << r.status().ToString();
  }
  EXPECT_TRUE(m->ListTransitions(0)->empty());
  EXPECT_EQ(m->GetSession(s)->steps, 0u);
  // The ceiling is the operator's.
  TempDir dir2;
  MemoryOptions o = Opts(dir2.path());
  o.max_speedup = 10000;
  auto m2 = OpenOk(o);
  uint64_t s2 = Open(m2.get(), Task(m2.get(), "rowsum"), "c");
  EXPECT_TRUE(m2->RecordStep(Step(s2, DirId(m2.get(), "reductions-scans"), 5000.0, true)).ok());
}

// Where it is shown, client-reported evidence says so: next_step's evidence and strategy
// counts, the session's best.
TEST(TrustTest, EvidenceIsLabelled) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  uint64_t task = Task(m.get(), "rowsum");
  uint64_t good = DirId(m.get(), "reductions-scans");
  auto strategies = m->ListStrategies(StrategyFilter{good, "", false, 0});
  ASSERT_TRUE(strategies.ok() && !strategies->empty());
  uint64_t strat = (*strategies)[0].id;
  StepInput v = Step(Open(m.get(), task, "gate"), good, 1.6, true);
  v.strategy_ids = {strat};
  ASSERT_TRUE(m->RecordStep(v).ok());
  uint64_t reported = Open(m.get(), task, "client");
  StepInput u = Step(reported, good, 1.8, false);
  u.strategy_ids = {strat};
  ASSERT_TRUE(m->RecordStep(u).ok());
  EXPECT_FALSE(m->GetSession(reported)->best_verified);
  Decision d = Next(m.get(), Open(m.get(), task, "bob"), /*full=*/true);
  int verified = 0, unverified = 0;
  for (const auto& e : d.evidence) (e.verified ? verified : unverified)++;
  EXPECT_EQ(verified, 1);
  EXPECT_EQ(unverified, 1);
  EXPECT_NE(d.why.find("client-reported, unverified"), std::string::npos) << d.why;
  bool found = false;
  for (const auto& h : d.strategies)
    if (h.strategy->id == strat) {
      found = true;
      EXPECT_EQ(h.verified_uses, 1u);
      EXPECT_EQ(h.unverified_uses, 1u);
    }
  EXPECT_TRUE(found);
  EXPECT_NE(d.prompt_context.find("(+1 client-reported, unverified)"), std::string::npos)
      << d.prompt_context;
  // A vouched client's report is weighed as verified and labelled apart.
  TempDir dir2;
  MemoryOptions o = Opts(dir2.path());
  o.trusted_clients = "replay, lab";
  auto m2 = OpenOk(o);
  uint64_t t2 = Task(m2.get(), "rowsum");
  uint64_t s2 = Open(m2.get(), t2, "lab");
  auto r = m2->RecordStep(Step(s2, DirId(m2.get(), "reductions-scans"), 1.6, false, "x y z"));
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->new_strategy_id, 0u);
  EXPECT_TRUE(m2->GetTransition(r->transition_id)->vouched);
  EXPECT_TRUE(m2->GetSession(s2)->best_verified);
  Decision d2 = Next(m2.get(), Open(m2.get(), t2, "bob"));
  ASSERT_FALSE(d2.evidence.empty());
  EXPECT_TRUE(d2.evidence[0].vouched);
  EXPECT_FALSE(d2.evidence[0].verified);
}

// Unverified evidence may warn against a direction, never lift one above what the verified
// evidence and the priors give.
TEST(TrustTest, UnverifiedEvidenceLowersButNeverRaises) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  uint64_t task = Task(m.get(), "rowsum");
  VerifiedHistory(m.get(), {task});
  uint64_t good = DirId(m.get(), "reductions-scans");
  auto score_of = [&](uint64_t dir_id) {
    Decision d = Next(m.get(), Open(m.get(), task, "bob"));
    for (const auto& sc : d.scores)
      if (sc.direction_id == dir_id) return sc.score;
    return -1e9;
  };
  uint64_t low = LowestRanked(m.get(), task);
  double low_before = score_of(low), good_before = score_of(good);
  // Twenty clients, each with a first step: a claimed 30x for the lowest-ranked direction, and a
  // reported failure of the direction the verified history favours.
  for (int i = 0; i < 20; ++i) {
    uint64_t s = Open(m.get(), task, "c" + std::to_string(i));
    ASSERT_TRUE(m->RecordStep(Step(s, low, 30.0, false)).ok());
    StepInput fail = Step(Open(m.get(), task, "c" + std::to_string(i)), good, 0, false);
    fail.status = fb::OutcomeStatus::Incorrect;
    ASSERT_TRUE(m->RecordStep(fail).ok());
  }
  EXPECT_LE(score_of(low), low_before + 1e-6);
  EXPECT_LT(score_of(good), good_before);
}

// A flood of claims near a state (more than the neighbours a decision attends) neither promotes
// nor crowds out the verified steps there: the decision is the one without them.
TEST(TrustTest, ClaimsDoNotCrowdOutVerifiedEvidence) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  std::vector<uint64_t> tasks = {Task(m.get(), "rowsum_a"), Task(m.get(), "rowsum_b")};
  VerifiedHistory(m.get(), tasks);
  Decision before = Next(m.get(), Open(m.get(), tasks[0], "bob"));
  uint64_t low = LowestRanked(m.get(), tasks[0]);
  std::vector<StepInput> claims;
  for (int i = 0; i < 200; ++i) {
    StepInput c = Step(Open(m.get(), tasks[i % 2], "mallory-" + std::to_string(i)), low,
                       20.0 + i, false, "claim " + std::to_string(i));
    claims.push_back(c);
  }
  ASSERT_TRUE(m->RecordSteps(claims).ok());
  Decision after = Next(m.get(), Open(m.get(), tasks[0], "bob"));
  EXPECT_EQ(after.direction.id, before.direction.id) << after.why;
  ASSERT_EQ(after.strategies.size(), before.strategies.size());
  for (size_t i = 0; i < before.strategies.size(); ++i)
    EXPECT_EQ(after.strategies[i].strategy->id, before.strategies[i].strategy->id) << i;
  int verified = 0;
  for (const auto& e : after.evidence) verified += e.verified ? 1 : 0;
  EXPECT_GT(verified, 0) << "the verified steps are still attended";
}

// One client's reports, however many, move a direction's estimate by at most the bound of
// max_client_weight (with unverified_can_promote, so that the reports could raise it at all);
// without the bound they move it further.
TEST(TrustTest, OneClientMovesAnEstimateByABoundedAmount) {
  auto moved = [](double client_cap) {
    TempDir dir;
    MemoryOptions o = Opts(dir.path());
    o.unverified_can_promote = true;
    o.unverified_weight = 1;
    o.max_client_weight = client_cap;
    o.max_session_weight = client_cap;
    auto m = OpenOk(o);
    uint64_t task = Task(m.get(), "rowsum");
    uint64_t d = DirId(m.get(), "control-flow");
    auto gain_of = [&]() {
      Decision x = Next(m.get(), Open(m.get(), task, "bob"));
      for (const auto& sc : x.scores)
        if (sc.direction_id == d) return sc.expected_gain;
      return 0.0;
    };
    double before = gain_of();
    for (int i = 0; i < 30; ++i)
      EXPECT_TRUE(m->RecordStep(Step(Open(m.get(), task, "mallory"), d, 900.0, false)).ok());
    return gain_of() - before;
  };
  const MemoryOptions defaults;
  const double cap = defaults.max_client_weight, m = defaults.prior_strength;
  const double bound = cap * defaults.max_step_log_gain / (cap + m);
  double bounded = moved(cap);
  EXPECT_GT(bounded, 0);
  EXPECT_LE(bounded, bound + 1e-9);
  EXPECT_GT(moved(0), bound);  // 0: no cap
}

// next_step offers only what applies to the session's backend, compact by default.
TEST(TrustTest, AnswerHoldsOnlyApplicableStrategiesCompactByDefault) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  uint64_t task = Task(m.get(), "rowsum");
  VerifiedHistory(m.get(), {task});
  auto cpu = m->OpenSession(task, "cpu", "x86_64", "bob", "model", 6);
  ASSERT_TRUE(cpu.ok());
  StateInput in{fb::Bottleneck::Memory, std::nullopt, ""};
  auto d = m->NextStep(cpu->id, in);
  ASSERT_TRUE(d.ok());
  auto all = m->ListStrategies(StrategyFilter{});
  ASSERT_TRUE(all.ok());
  std::map<uint64_t, std::vector<std::string>> backends;
  for (const auto& s : *all) backends[s.id] = s.backends;
  ASSERT_FALSE(d->strategies.empty());
  for (const auto& h : d->strategies) {
    const auto& b = backends[h.strategy->id];
    EXPECT_TRUE(b.empty() || std::find(b.begin(), b.end(), "cpu") != b.end())
        << h.strategy->name << " is not for the CPU backend";
  }
  EXPECT_LE(d->evidence.size(), 4u);
  const MemoryOptions o;
  for (size_t i = static_cast<size_t>(o.detailed_strategies); i < d->strategies.size(); ++i)
    EXPECT_TRUE(d->strategies[i].strategy->description.empty());
  in.full = true;
  auto f = m->NextStep(cpu->id, in);
  ASSERT_TRUE(f.ok());
  EXPECT_GE(f->evidence.size(), d->evidence.size());
  for (const auto& h : f->strategies) EXPECT_FALSE(h.strategy->description.empty());
}

}  // namespace
}  // namespace htam::memory
