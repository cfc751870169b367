// The Memory against a real LMDB store and real FAISS indexes in temporary directories.
#include "daemon/memory/memory.h"

#include <gtest/gtest.h>
#include <lmdb.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "base/hash.h"
#include "base/paths.h"
#include "daemon/config/sections.h"
#include "daemon/memory/codec.h"
#include "daemon/memory/seed.h"
#include "daemon/memory/store.h"
#include "daemon/memory/test_util.h"
#include "daemon/memory/transition_table.h"
#include "daemon/memory/vector_index.h"

namespace htam::memory {
namespace {

namespace fs = std::filesystem;

using testing::Opts;
using testing::TempDir;

std::unique_ptr<Memory> OpenOk(const MemoryOptions& o) {
  auto m = Memory::Open(o);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

uint64_t Task(Memory* m, const std::string& name = "relu",
              const std::string& category = "elementwise") {
  fb::TaskT t;
  t.name = name;
  t.category = category;
  t.description = "y = max(x, 0) over a float32 vector";
  t.flops = 1 << 20;
  t.bytes = 8 << 20;
  auto id = m->PutTask(t);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  return id.ok() ? *id : 0;
}

uint64_t DirId(Memory* m, const std::string& name) {
  auto d = m->FindDirection(name);
  EXPECT_TRUE(d.ok()) << name;
  return d.ok() ? d->id : 0;
}

StepInput Step(uint64_t session, uint64_t dir, fb::OutcomeStatus st, double speedup,
               const std::string& summary = "", fb::Bottleneck b = fb::Bottleneck::Memory) {
  StepInput s;
  s.session_id = session;
  s.direction_id = dir;
  s.status = st;
  s.speedup_after = speedup;
  s.summary = summary;
  s.verified = true;
  s.state = StateInput{b, std::nullopt, ""};
  return s;
}

// A value of either kind, for comparing a MemoryOptions field with the table's typed field.
template <typename T>
auto Comparable(const T& v) {
  if constexpr (std::is_arithmetic_v<T>)
    return static_cast<double>(v);
  else
    return std::string(v);
}

// Every row of the table's section memory is a field of MemoryOptions (else this does not
// compile), and a default-constructed MemoryOptions holds the table's default of each: tests,
// benchmarks and htamd all start from the same values, written in one place.
TEST(MemoryTest, DefaultOptionsAreTheTables) {
  const MemoryOptions o;
  const config::Memory table = config::Memory::From(Config::Defaults());
  int compared = 0;
#define HTAM_OPTION(section, name, type, def, help) HTAM_CMP_##section(name)
#define HTAM_CMP_general(name)
#define HTAM_CMP_server(name)
#define HTAM_CMP_eval(name)
#define HTAM_CMP_worker(name)
#define HTAM_CMP_pool(name)
#define HTAM_CMP_memory(name)                                                 \
  if (std::string(#name) != "seed_file") {                                    \
    EXPECT_EQ(Comparable(o.name), Comparable(table.name)) << "memory." #name; \
  }                                                                           \
  ++compared;
#include "daemon/config/options.inc"
#undef HTAM_CMP_memory
#undef HTAM_CMP_worker
#undef HTAM_CMP_pool
#undef HTAM_CMP_eval
#undef HTAM_CMP_server
#undef HTAM_CMP_general
#undef HTAM_OPTION
  EXPECT_GE(compared, 44) << "rows of section memory";
  // "" in the table is the taxonomy shipped with htam.
  EXPECT_EQ(table.seed_file, "");
  EXPECT_EQ(o.seed_file, ShippedPath("", "seed_taxonomy.json"));
  EXPECT_EQ(o.top_k_strategies, 64);
  EXPECT_EQ(o.listed_strategies, 12);
  EXPECT_EQ(o.detailed_strategies, 4);
  EXPECT_EQ(o.answer_example_bytes, 3072);
  EXPECT_TRUE(o.dir.empty());
}

TEST(MemoryTest, SeedTaxonomyHasTheThirteenDirections) {
  auto seed = LoadSeedFile("configs/seed_taxonomy.json");
  ASSERT_TRUE(seed.ok()) << seed.status().ToString();
  ASSERT_EQ(seed->size(), 13u);
  std::vector<std::string> names;
  for (const auto& d : *seed) {
    names.push_back(d.direction.name);
    EXPECT_GE(d.strategies.size(), 4u) << d.direction.name;
    EXPECT_LE(d.strategies.size(), 10u) << d.direction.name;
    EXPECT_FALSE(d.direction.description.empty());
    for (const auto& s : d.strategies) {
      EXPECT_FALSE(s.title.empty());
      EXPECT_FALSE(s.failure_modes.empty()) << s.name;
      EXPECT_FALSE(s.preconditions.empty()) << s.name;
    }
  }
  auto want = SeedDirectionSlugs();
  std::sort(names.begin(), names.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(names, want);
  EXPECT_FALSE(ParseSeed("{\"directions\": []}", "x").ok());  // slugs missing
  EXPECT_FALSE(ParseSeed("not json", "x").ok());
}

TEST(MemoryTest, SeedLoadedOnceNeverReAddedOnRestart) {
  TempDir dir;
  size_t strategies = 0;
  {
    auto m = OpenOk(Opts(dir.path()));
    ASSERT_TRUE(m);
    auto dirs = m->ListDirections();
    ASSERT_TRUE(dirs.ok());
    EXPECT_EQ(dirs->size(), 13u);
    strategies = m->ListStrategies({})->size();
    EXPECT_GE(strategies, 13u * 4);
  }
  for (int i = 0; i < 2; ++i) {
    auto m = OpenOk(Opts(dir.path()));
    ASSERT_TRUE(m);
    EXPECT_EQ(m->ListDirections()->size(), 13u);
    EXPECT_EQ(m->ListStrategies({})->size(), strategies);
  }
}

TEST(MemoryTest, MissingSeedFileIsAClearError) {
  TempDir dir;
  MemoryOptions o = Opts(dir.path());
  o.seed_file = dir.path() + "/nope.json";
  auto m = Memory::Open(o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("seed"), std::string::npos) << m.status().ToString();
}

TEST(MemoryTest, StepLoopRecordsEverythingInOneTransaction) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  uint64_t task = Task(m.get());
  auto s = m->OpenSession(task, "cuda", "sm_90", "test", "model-x", 6);
  ASSERT_TRUE(s.ok());
  auto d = m->NextStep(s->id, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d->direction.name.empty());
  EXPECT_EQ(d->scores.size(), 13u);
  EXPECT_FALSE(d->why.empty());
  EXPECT_FALSE(d->strategies.empty());
  EXPECT_NE(d->prompt_context.find(d->direction.title), std::string::npos);
  StepInput in = Step(s->id, d->direction.id, fb::OutcomeStatus::Ok, 1.5, "");
  in.state.reset();  // default: the state of the last NextStep
  in.strategy_ids = {d->strategies[0].strategy->id};
  in.language = "cuda";
  in.source = "__global__ void k() {}";
  auto r = m->RecordStep(in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->step, 0u);
  EXPECT_FLOAT_EQ(r->best_speedup, 1.5);
  auto rec = m->GetTransition(r->transition_id);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->state->bottleneck, fb::Bottleneck::Memory);
  EXPECT_EQ(rec->candidate_hash, CandidateHash("cuda", in.source));
  auto cand = m->GetCandidate(rec->candidate_hash);
  ASSERT_TRUE(cand.ok());
  EXPECT_EQ(cand->source, in.source);
  auto sess = m->GetSession(s->id);
  EXPECT_EQ(sess->steps, 1u);
  EXPECT_EQ(sess->history, std::vector<uint64_t>{d->direction.id});
  EXPECT_EQ(sess->best_candidate, rec->candidate_hash);
  auto strat = m->GetStrategy(in.strategy_ids[0]);
  EXPECT_EQ(strat->stats->uses(), 1u);
  EXPECT_EQ(strat->stats->successes(), 1u);
  EXPECT_EQ(strat->example_candidate, rec->candidate_hash);
  EXPECT_EQ(m->ListTransitions(s->id, 0)->size(), 1u);
  EXPECT_EQ(m->ListSessions(task, 0)->size(), 1u);
  EXPECT_EQ(m->ListEdges(0)->size(), 1u);
  std::vector<std::string> problems;
  EXPECT_TRUE(m->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
  // Bad input is refused with a clear error, nothing written.
  EXPECT_TRUE(
      m->RecordStep(Step(999, d->direction.id, fb::OutcomeStatus::Ok, 1.0)).status().IsNotFound());
  EXPECT_FALSE(m->RecordStep(Step(s->id, 9999, fb::OutcomeStatus::Ok, 1.0)).ok());
  StepInput bad_strategy = Step(s->id, d->direction.id, fb::OutcomeStatus::Ok, 1.0);
  bad_strategy.strategy_ids = {123456};
  EXPECT_FALSE(m->RecordStep(bad_strategy).ok());
  EXPECT_EQ(m->GetSession(s->id)->steps, 1u);
  ASSERT_TRUE(m->CloseSession(s->id).ok());
  EXPECT_FALSE(m->RecordStep(Step(s->id, d->direction.id, fb::OutcomeStatus::Ok, 2.0)).ok());
  EXPECT_NE(m->StatusText().find("transitions: 1\n"), std::string::npos) << m->StatusText();
}

TEST(MemoryTest, LearnsFromExperienceWhatFollowsADirection) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  uint64_t task = Task(m.get());
  uint64_t a = DirId(m.get(), "global-memory-access");
  uint64_t bad = DirId(m.get(), "fusion");  // seed prior higher than good's
  uint64_t good = DirId(m.get(), "shared-memory-banks");
  // Experience: after A, "bad" always failed; "good" always gained.
  std::vector<StepInput> steps;
  for (int i = 0; i < 8; ++i) {
    auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
    ASSERT_TRUE(s.ok());
    steps = {Step(s->id, a, fb::OutcomeStatus::Ok, 1.2),
             Step(s->id, i % 2 ? bad : good,
                  i % 2 ? fb::OutcomeStatus::Incorrect : fb::OutcomeStatus::Ok, i % 2 ? 0 : 1.8)};
    ASSERT_TRUE(m->RecordSteps(steps).ok());
  }
  auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
  ASSERT_TRUE(m->RecordStep(Step(s->id, a, fb::OutcomeStatus::Ok, 1.2)).ok());
  auto d = m->NextStep(s->id, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  size_t pos_good = 99, pos_bad = 99;
  for (size_t i = 0; i < d->scores.size(); ++i) {
    if (d->scores[i].direction_id == good) pos_good = i;
    if (d->scores[i].direction_id == bad) pos_bad = i;
  }
  EXPECT_LT(pos_good, pos_bad) << d->why;
  EXPECT_EQ(d->direction.id, good) << d->why;
  EXPECT_FALSE(d->evidence.empty());
  EXPECT_NE(d->why.find("Attended"), std::string::npos);
}

TEST(MemoryTest, FailuresOnTheCurrentKernelKeepTheirPenalty) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  uint64_t task = Task(m.get());
  uint64_t a = DirId(m.get(), "global-memory-access"), b = DirId(m.get(), "fusion"),
           c = DirId(m.get(), "latency-hiding");
  auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 8);
  ASSERT_TRUE(s.ok());
  // A improves; then B, C and B again fail on A's kernel.
  ASSERT_TRUE(m->RecordSteps({Step(s->id, a, fb::OutcomeStatus::Ok, 1.2),
                              Step(s->id, b, fb::OutcomeStatus::Incorrect, 0),
                              Step(s->id, c, fb::OutcomeStatus::CompileError, 0),
                              Step(s->id, b, fb::OutcomeStatus::Incorrect, 0)})
                  .ok());
  auto got = m->GetSession(s->id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->path_steps, (std::vector<uint32_t>{0}));  // where the current kernel was made
  auto next = m->NextStep(s->id, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  const double p = MemoryOptions{}.failure_penalty;
  for (const auto& x : next->scores) {
    if (x.direction_id == b) {
      EXPECT_NEAR(x.penalty, 2 * p, 1e-9) << "both failures count";
    }
    if (x.direction_id == c) {
      EXPECT_NEAR(x.penalty, p, 1e-9);
    }
    // A made the kernel: no penalty, though its gain is older than the last failure_memory steps.
    if (x.direction_id == a) {
      EXPECT_NEAR(x.penalty, 0, 1e-12);
    }
  }
  EXPECT_NE(next->direction.id, b) << next->why;
}

// Position of a strategy in a decision's list (npos when absent).
size_t Rank(const Decision& d, uint64_t strategy) {
  for (size_t i = 0; i < d.strategies.size(); ++i)
    if (d.strategies[i].strategy->id == strategy) return i;
  return std::string::npos;
}

// One step that passed advice over: the agent applied the third piece of advice it was given
// and the first two did not fit its kernel.
struct PassedOverStep {
  uint64_t passed = 0, passed_dir = 0;  // the first piece of advice and its direction
  uint64_t second = 0;                  // the second piece
  uint64_t used = 0;                    // the third, the one applied
  uint64_t transition_id = 0;           // the recorded step
};

// Advises `session` in `state` (at least `min_advice` pieces) and records a step that applied the
// third piece at `speedup`. Fatal failures stop only this function: call it inside
// ASSERT_NO_FATAL_FAILURE.
void ApplyTheThirdAdvice(Memory* m, uint64_t session, const StateInput& state, size_t min_advice,
                         double speedup, PassedOverStep* out) {
  auto d = m->NextStep(session, state);
  ASSERT_TRUE(d.ok() && d->strategies.size() >= min_advice);
  out->passed = d->strategies[0].strategy->id;
  out->passed_dir = d->strategies[0].strategy->direction_id;
  out->second = d->strategies[1].strategy->id;
  const fb::StrategyT& used = *d->strategies[2].strategy;
  out->used = used.id;
  StepInput st = Step(session, used.direction_id, fb::OutcomeStatus::Ok, speedup);
  st.strategy_ids = {used.id};
  auto rec = m->RecordStep(st);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  out->transition_id = rec->transition_id;
}

uint64_t StrategyId(Memory* m, const std::string& name) {
  auto all = m->ListStrategies(StrategyFilter{});
  EXPECT_TRUE(all.ok());
  for (const auto& s : *all)
    if (s.name == name) return s.id;
  ADD_FAILURE() << "no strategy " << name;
  return 0;
}

TEST(MemoryTest, StrategyThatWorkedInSimilarStatesIsAdvisedFirstOnANewTask) {
  TempDir dir;
  MemoryOptions head = Opts(dir.path());
  head.detailed_strategies = 8;  // a head long enough to reach other directions' strategies
  auto m = OpenOk(head);
  // XOR swizzles doubled the speed of several matmuls; nothing else was tried on them.
  uint64_t banks = DirId(m.get(), "shared-memory-banks");
  uint64_t swizzle = StrategyId(m.get(), "xor-swizzle");
  for (int i = 0; i < 4; ++i) {
    uint64_t task = Task(m.get(), "matmul_" + std::to_string(i), "matmul");
    auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
    ASSERT_TRUE(s.ok());
    StepInput st = Step(s->id, banks, fb::OutcomeStatus::Ok, 2.0);
    st.strategy_ids = {swizzle};
    ASSERT_TRUE(m->RecordStep(st).ok());
  }
  // A matmul the memory never saw: the swizzle comes first, with the evidence that put it there.
  auto s = m->OpenSession(Task(m.get(), "matmul_new", "matmul"), "cuda", "sm_90", "t", "m", 6);
  auto d = m->NextStep(s->id, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_FALSE(d->strategies.empty());
  EXPECT_EQ(d->strategies[0].strategy->id, swizzle) << d->prompt_context;
  EXPECT_NE(d->prompt_context.find("In similar states: attended steps that applied it weigh"),
            std::string::npos)
      << d->prompt_context;
  // The list draws on other directions too (each marked with its own).
  bool other = false;
  for (const auto& h : d->strategies) other = other || h.strategy->direction_id != banks;
  EXPECT_TRUE(other);
  EXPECT_NE(d->prompt_context.find("   Direction: "), std::string::npos);
  // Scoped to the chosen direction, the answer holds only that direction's strategies.
  MemoryOptions o = Opts(dir.path());
  o.strategy_scope = "direction";
  m.reset();
  m = OpenOk(o);
  d = m->NextStep(s->id, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
  ASSERT_TRUE(d.ok());
  for (const auto& h : d->strategies) EXPECT_EQ(h.strategy->direction_id, d->direction.id);
}

TEST(MemoryTest, StrategyTriedWithoutSuccessIsNotAdvisedFirstAgain) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  auto s = m->OpenSession(Task(m.get()), "cuda", "sm_90", "t", "m", 6);
  const StateInput mem{fb::Bottleneck::Memory, std::nullopt, ""};
  auto first = m->NextStep(s->id, mem);
  ASSERT_TRUE(first.ok() && !first->strategies.empty());
  const fb::StrategyT& tried = *first->strategies[0].strategy;
  StepInput st = Step(s->id, tried.direction_id, fb::OutcomeStatus::Incorrect, 0);
  st.strategy_ids = {tried.id};
  ASSERT_TRUE(m->RecordStep(st).ok());
  auto next = m->NextStep(s->id, mem);
  ASSERT_TRUE(next.ok());
  size_t r = Rank(*next, tried.id);
  EXPECT_NE(r, 0u) << next->prompt_context;
  if (r != std::string::npos) {
    EXPECT_LT(next->strategies[r].score, first->strategies[0].score - 0.4);
    // The prompt says why where it shows the strategy in full (the detailed head).
    if (r < static_cast<size_t>(MemoryOptions().detailed_strategies))
      EXPECT_NE(next->prompt_context.find("Tried in this session without success"),
                std::string::npos)
          << "rank " << r << ": " << next->prompt_context;
  }
  // A new session learns of the failure from the memory (as experience), not as its own try.
  auto s2 = m->OpenSession(Task(m.get()), "cuda", "sm_90", "t", "m", 6);
  auto fresh = m->NextStep(s2->id, mem);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->prompt_context.find("Tried in this session"), std::string::npos);
}

// Moves that pay only in an order: wider vectors pay after the alignment step and fail after the
// tiling step, which leads to the same speedup. A learned strategy ("unroll-and-vector-width:
// VEC=4 ...", taught by the successes) is the advice its parent strategy is: the parent's
// failures after the tiling count against it too, and the block-size move that paid there ranks
// above it. Each on its own evidence (shared_evidence off), the
// learned strategy sees only the successes that taught it and leads the list.
TEST(MemoryTest, ALearnedStrategyCarriesTheFailuresOfTheStrategyItWasLearnedAs) {
  auto ranks = [](bool shared) -> std::pair<size_t, size_t> {
    TempDir dir;
    MemoryOptions o = Opts(dir.path());
    o.shared_evidence = shared;
    auto m = OpenOk(o);
    if (!m) return {0, 0};
    const uint64_t task = Task(m.get(), "rowop", "rowop");
    struct Move {
      uint64_t dir, strategy;
    };
    auto move = [&](const std::string& d, const std::string& s) {
      return Move{DirId(m.get(), d), StrategyId(m.get(), s)};
    };
    const Move tile = move("on-chip-reuse-tiling", "shared-memory-tiling");
    const Move align = move("global-memory-access", "aligned-body-masked-tail");
    const Move vec = move("parameter-tuning", "unroll-and-vector-width");
    const Move block = move("parallel-mapping-occupancy", "block-size-choice");
    const std::string vec_summary = "unroll-and-vector-width: VEC=4 four-wide loads and stores";
    auto step = [&](uint64_t session, const Move& mv, double speedup, const std::string& summary) {
      StepInput st = Step(session, mv.dir, fb::OutcomeStatus::Ok, speedup, summary);
      st.strategy_ids = {mv.strategy};
      auto r = m->RecordStep(st);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
    };
    for (int i = 0; i < 6; ++i) {
      auto a = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);  // align, then vectors: 2.86x
      step(a->id, align, 1.3, "aligned-body-masked-tail: ALIGN=1");
      step(a->id, vec, 2.86, vec_summary);
      // Tile, then vectors: slower; the block size pays there, before the vectors or after.
      auto t = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
      step(t->id, tile, 1.3, "shared-memory-tiling: SMEM=1");
      if (i % 2) step(t->id, vec, 0.91, vec_summary);
      step(t->id, block, 1.6, "block-size-choice: BLOCK=256");
      if (i % 2 == 0) step(t->id, vec, 1.26, vec_summary);
    }
    uint64_t learned = 0;
    auto all = m->ListStrategies(StrategyFilter{});
    EXPECT_TRUE(all.ok());
    for (const auto& s : *all)
      if (s.name != "unroll-and-vector-width" && s.direction_id == vec.dir &&
          s.title.rfind("unroll-and-vector-width", 0) == 0)
        learned = s.id;
    EXPECT_NE(learned, 0u) << "the successes teach a strategy";
    auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
    step(s->id, tile, 1.3, "shared-memory-tiling: SMEM=1");
    auto d = m->NextStep(s->id, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (!d.ok()) return {0, 0};
    // The vector advice ranks where its best entry (learned or the parent) does.
    return {std::min(Rank(*d, learned), Rank(*d, vec.strategy)), Rank(*d, block.strategy)};
  };
  auto [vec_shared, block_shared] = ranks(true);
  EXPECT_LT(block_shared, vec_shared) << "after the tiling, the block size before the vectors";
  auto [vec_own, block_own] = ranks(false);
  EXPECT_LT(vec_own, block_own) << "on its own successes, the learned strategy leads";
}

// A new kind of kernel: the store measured only warp shuffles, on row sums (1.65x each time).
// Advice written for this kind (atomics reduced locally first, for a histogram) has no use
// anywhere. On the seed's prior gain it starts far below any measured record and the warp
// shuffle's record from another kind of kernel leads the list; with pooled_strategy_prior both
// start from what the store's strategies measure per use, and the text that fits the kernel
// decides, as in an empty store.
TEST(MemoryTest, AdviceForANewKindOfKernelIsNotBuriedUnderRecordsFromOtherKinds) {
  struct Ranks {
    size_t atomics = 0, shuffle = 0;
    double atomics_gain = 0;
  };
  auto ranks = [](bool pooled, bool experience, double record_weight = 1) -> Ranks {
    TempDir dir;
    MemoryOptions o = Opts(dir.path());
    o.pooled_strategy_prior = pooled;
    o.record_weight = record_weight;
    o.applied_weight = 0;  // the records alone: no bonus for advice applied in similar states
    auto m = OpenOk(o);
    if (!m) return {};
    auto task = [&](const std::string& name, const std::string& category,
                    const std::string& description) {
      fb::TaskT t;
      t.name = name;
      t.category = category;
      t.description = description;
      t.flops = 1 << 22;
      t.bytes = 16 << 20;
      auto id = m->PutTask(t);
      EXPECT_TRUE(id.ok()) << id.status().ToString();
      return id.ok() ? *id : 0;
    };
    const uint64_t rows = task("rowsum", "reduction", "row sums of a row-major matrix");
    const uint64_t hist = task("histogram", "scatter",
                               "histogram of int32 values: many threads add to the same bins "
                               "with atomics; reduce locally before atomics");
    const uint64_t red = DirId(m.get(), "reductions-scans");
    const uint64_t shuffle = StrategyId(m.get(), "warp-shuffle-reduction");
    const uint64_t atomics = StrategyId(m.get(), "hierarchical-atomics");
    for (int i = 0; experience && i < 8; ++i) {
      auto s = m->OpenSession(rows, "cuda", "sm_90", "t", "m", 6);
      StepInput st = Step(s->id, red, fb::OutcomeStatus::Ok, 1.65);
      st.strategy_ids = {shuffle};
      auto r = m->RecordStep(st);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
    }
    auto s = m->OpenSession(hist, "cuda", "sm_90", "t", "m", 6);
    auto d = m->NextStep(s->id, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (!d.ok()) return {};
    Ranks r{Rank(*d, atomics), Rank(*d, shuffle)};
    if (r.atomics != std::string::npos) r.atomics_gain = d->strategies[r.atomics].mean_gain;
    return r;
  };
  const Ranks empty = ranks(false, false);
  ASSERT_LT(empty.atomics, empty.shuffle)
      << "the text that fits the kernel leads without experience";
  const Ranks seed = ranks(false, true);
  EXPECT_LT(seed.shuffle, seed.atomics)
      << "on the seed's prior gain, the other kind's record leads";
  const Ranks pooled = ranks(true, true);
  EXPECT_LT(pooled.atomics, pooled.shuffle) << "pooled: the advice for this kind of kernel leads";
  // With no use of its own, it starts at the offered strategies' mean log gain per use.
  EXPECT_NEAR(pooled.atomics_gain, std::log(1.65), 1e-3);
  // An empty store has nothing to pool: the same answer either way.
  const Ranks empty_pooled = ranks(true, false);
  EXPECT_EQ(empty_pooled.atomics, empty.atomics);
  EXPECT_EQ(empty_pooled.shuffle, empty.shuffle);
  // record_weight 0: the shuffle's record from row sums counts only through the attended steps
  // of similar states, so the advice written for this kind leads again, and an unused strategy's
  // gain is its base, the prior, whatever the store measured elsewhere.
  const Ranks local = ranks(false, true, 0);
  EXPECT_LT(local.atomics, local.shuffle) << "record_weight 0: the advice for this kind leads";
  const Ranks local_empty = ranks(false, false, 0);
  EXPECT_NEAR(local.atomics_gain, local_empty.atomics_gain, 1e-9)
      << "no use of its own and no similar step: its gain is the same as in an empty store";
}

TEST(MemoryTest, AdviceThePreviousStepPassedOverRanksLower) {
  TempDir dir;
  MemoryOptions o = Opts(dir.path());
  o.retry_penalty = 5;  // far more than any score difference: passed-over advice leaves the list
  // A list shorter than the taxonomy (65), every piece in full: advice can leave the list, and
  // a step passes over a part of the taxonomy, not all of it.
  o.top_k_strategies = 24;
  o.listed_strategies = o.top_k_strategies;  // the default answer lists as many
  o.detailed_strategies = 24;
  auto m = OpenOk(o);
  auto s = m->OpenSession(Task(m.get()), "cuda", "sm_90", "t", "m", 6);
  const StateInput mem{fb::Bottleneck::Memory, std::nullopt, ""};
  PassedOverStep p;  // applied the third piece of advice, faster
  ASSERT_NO_FATAL_FAILURE(ApplyTheThirdAdvice(m.get(), s->id, mem, 3, 1.3, &p));
  auto next = m->NextStep(s->id, mem);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(Rank(*next, p.passed), std::string::npos) << next->prompt_context;
  EXPECT_EQ(Rank(*next, p.second), std::string::npos) << next->prompt_context;
  EXPECT_NE(Rank(*next, p.used), std::string::npos) << "it helped: it may be advised again";
}

TEST(MemoryTest, AdviceThatDidNotFitTheKernelRanksBelowAdviceThatApplied) {
  TempDir dir;
  MemoryOptions o = Opts(dir.path());
  o.retry_penalty = 0;  // only the not-applicable penalty speaks
  o.not_applicable_penalty = 5;
  // A list shorter than the taxonomy (65), every piece in full: advice can leave the list, and
  // a step passes over a part of the taxonomy, not all of it.
  o.top_k_strategies = 24;
  o.listed_strategies = o.top_k_strategies;  // the default answer lists as many
  o.detailed_strategies = 24;
  auto m = OpenOk(o);
  auto s = m->OpenSession(Task(m.get()), "cuda", "sm_90", "t", "m", 6);
  const StateInput mem{fb::Bottleneck::Memory, std::nullopt, ""};
  PassedOverStep p;  // applied the third piece of advice, no faster
  ASSERT_NO_FATAL_FAILURE(ApplyTheThirdAdvice(m.get(), s->id, mem, 4, 1.0, &p));
  const uint64_t a = p.passed, b = p.second;
  auto next = m->NextStep(s->id, mem);
  ASSERT_TRUE(next.ok());
  size_t ru = Rank(*next, p.used);
  ASSERT_NE(ru, std::string::npos) << next->prompt_context;
  for (uint64_t id : {a, b}) {
    size_t r = Rank(*next, id);
    EXPECT_TRUE(r == std::string::npos || r > ru) << next->prompt_context;
  }
  // A step that applied nothing passed over everything it was advised: all of that ranks
  // below every strategy the session has not passed over, and says why.
  StepInput none = Step(s->id, next->direction.id, fb::OutcomeStatus::Ok, 1.0);
  ASSERT_TRUE(m->RecordStep(none).ok());
  auto after = m->NextStep(s->id, mem);
  ASSERT_TRUE(after.ok() && !after->strategies.empty());
  std::set<uint64_t> passed{a, b};
  for (const auto& h : next->strategies) passed.insert(h.strategy->id);
  EXPECT_EQ(passed.count(after->strategies[0].strategy->id), 0u) << after->prompt_context;
  bool seen_passed = false;
  for (const auto& h : after->strategies) {
    bool p = passed.count(h.strategy->id) > 0;
    EXPECT_TRUE(p || !seen_passed) << "a fitting strategy after a passed-over one\n"
                                   << after->prompt_context;
    seen_passed = seen_passed || p;
  }
  if (seen_passed) {
    EXPECT_NE(after->prompt_context.find("did not fit the kernel"), std::string::npos);
  }
}

TEST(MemoryTest, StrategyAppliedInSimilarStatesRanksHigher) {
  TempDir dir;
  uint64_t target = 0, session = 0;
  size_t rank_without = 0;
  {
    MemoryOptions o = Opts(dir.path());
    o.applied_weight = 0;  // without the bonus
    auto m = OpenOk(o);
    uint64_t task = Task(m.get(), "relu", "elementwise");
    auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
    session = s->id;
    const StateInput mem{fb::Bottleneck::Memory, std::nullopt, ""};
    auto d = m->NextStep(s->id, mem);
    ASSERT_TRUE(d.ok() && d->strategies.size() >= 12);
    // Sessions on a like task applied a low-ranked strategy, which did not help there: it fits
    // such kernels, and nothing else says so.
    target = d->strategies[10].strategy->id;
    uint64_t target_dir = d->strategies[10].strategy->direction_id;
    for (int i = 0; i < 4; ++i) {
      auto o = m->OpenSession(Task(m.get(), "gelu", "elementwise"), "cuda", "sm_90", "t", "m", 6);
      StepInput st = Step(o->id, target_dir, fb::OutcomeStatus::Ok, 1.0);
      st.strategy_ids = {target};
      ASSERT_TRUE(m->RecordStep(st).ok());
    }
    auto again = m->NextStep(s->id, mem);
    ASSERT_TRUE(again.ok());
    rank_without = Rank(*again, target);
  }
  MemoryOptions o = Opts(dir.path());
  o.applied_weight = 1;
  auto m = OpenOk(o);
  auto d = m->NextStep(session, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
  ASSERT_TRUE(d.ok());
  size_t rank_with = Rank(*d, target);
  ASSERT_NE(rank_with, std::string::npos) << d->prompt_context;
  EXPECT_TRUE(rank_without == std::string::npos || rank_with < rank_without)
      << rank_with << " vs " << rank_without << "\n"
      << d->prompt_context;
}

TEST(MemoryTest, AdviceOtherSessionsPassedOverRanksBelowAdviceTheyApplied) {
  TempDir dir;
  const StateInput mem{fb::Bottleneck::Memory, std::nullopt, ""};
  uint64_t task = 0, passed = 0, used = 0;
  size_t passed_without = 0, used_without = 0;
  {
    MemoryOptions o = Opts(dir.path());
    o.applied_weight = 0;  // only the new term speaks for what sessions did
    o.passed_over_weight = 0;
    o.top_k_strategies = o.detailed_strategies = 24;  // as below
    o.listed_strategies = o.top_k_strategies;  // the default answer lists as many
    auto m = OpenOk(o);
    task = Task(m.get(), "relu", "elementwise");
    auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
    PassedOverStep p;  // applied the third piece of advice, no faster
    ASSERT_NO_FATAL_FAILURE(ApplyTheThirdAdvice(m.get(), s->id, mem, 4, 1.0, &p));
    passed = p.passed;
    used = p.used;
    ASSERT_TRUE(m->CloseSession(s->id).ok());
    // The record names what the step passed over, in the order it was advised.
    auto r = m->GetTransition(p.transition_id);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->passed_over_ids, (std::vector<uint64_t>{passed, p.second}));
    // Without the term a new session on the task is advised as before.
    auto s2 = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
    auto d2 = m->NextStep(s2->id, mem);
    ASSERT_TRUE(d2.ok());
    passed_without = Rank(*d2, passed);
    used_without = Rank(*d2, used);
    ASSERT_NE(passed_without, std::string::npos);
    ASSERT_NE(used_without, std::string::npos);
    EXPECT_LT(passed_without, used_without) << "the test needs the term to change the order";
  }
  // A new session (after a restart: nothing of the first session is in memory) on the task.
  MemoryOptions o = Opts(dir.path());
  o.applied_weight = 0;
  o.passed_over_weight = 5;
  // Every listed piece in full, so that a passed-over one carries its note (a compact tail line
  // has none: MemoryTest.StrategiesPastTheDetailedHeadCarryNoExampleOrText).
  o.top_k_strategies = o.detailed_strategies = 24;
  o.listed_strategies = o.top_k_strategies;  // the default answer lists as many
  auto m = OpenOk(o);
  auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
  auto d = m->NextStep(s->id, mem);
  ASSERT_TRUE(d.ok());
  size_t ru = Rank(*d, used), rp = Rank(*d, passed);
  ASSERT_NE(ru, std::string::npos) << d->prompt_context;
  EXPECT_TRUE(rp == std::string::npos || rp > ru) << rp << " vs " << ru << "\n"
                                                  << d->prompt_context;
  if (rp != std::string::npos) {
    EXPECT_NE(d->prompt_context.find("Passed over in similar states"), std::string::npos);
  }
}

TEST(MemoryTest, PassedOverPenaltyIsOffsetByTheAppliedWeightInSimilarStates) {
  TempDir dir;
  const StateInput mem{fb::Bottleneck::Memory, std::nullopt, ""};
  uint64_t task = 0, passed = 0, second = 0, passed_dir = 0;
  {
    MemoryOptions o = Opts(dir.path());
    o.applied_weight = 0;
    o.passed_over_weight = 0;
    auto m = OpenOk(o);
    task = Task(m.get(), "relu", "elementwise");
    // Session 1 applied the third piece of advice: the first two did not fit its kernel.
    auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
    PassedOverStep p;
    ASSERT_NO_FATAL_FAILURE(ApplyTheThirdAdvice(m.get(), s->id, mem, 4, 1.0, &p));
    passed = p.passed;
    passed_dir = p.passed_dir;
    second = p.second;
    ASSERT_TRUE(m->CloseSession(s->id).ok());
    // Sessions 2 and 3 applied the first one (it fit their kernels), no faster.
    for (int i = 0; i < 2; ++i) {
      auto s2 = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
      auto d2 = m->NextStep(s2->id, mem);
      ASSERT_TRUE(d2.ok());
      StepInput st2 = Step(s2->id, passed_dir, fb::OutcomeStatus::Ok, 1.0);
      st2.strategy_ids = {passed};
      ASSERT_TRUE(m->RecordStep(st2).ok());
      ASSERT_TRUE(m->CloseSession(s2->id).ok());
    }
  }
  auto score = [&](double applied_offset, uint64_t id) {
    MemoryOptions o = Opts(dir.path());
    o.applied_weight = 0;
    o.passed_over_weight = 5;
    o.passed_over_applied_weight = applied_offset;
    o.top_k_strategies = 200;  // every candidate, wherever it ranks
    o.listed_strategies = o.top_k_strategies;  // the default answer lists as many
    auto m = OpenOk(o);
    auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
    auto d = m->NextStep(s->id, mem);
    EXPECT_TRUE(d.ok());
    for (const auto& h : d->strategies)
      if (h.strategy->id == id) return h.score;
    ADD_FAILURE() << "strategy " << id << " not advised\n" << d->prompt_context;
    return 0.0;
  };
  // Passed over once and applied twice in similar states: the offset lifts its penalty.
  double plain = score(0, passed), offset = score(1, passed);
  EXPECT_GT(offset, plain + 0.1) << plain << " vs " << offset;
  // Passed over and never applied: the same penalty either way.
  EXPECT_NEAR(score(0, second), score(1, second), 1e-6);
}

// Past memory.detailed_strategies an answer's strategy is a name, a title and its statistics:
// no description, pattern, preconditions, failure modes or example source, and prompt_context
// names it on one line instead of a paragraph.
TEST(MemoryTest, StrategiesPastTheDetailedHeadCarryNoExampleOrText) {
  TempDir dir;
  const StateInput mem{fb::Bottleneck::Memory, std::nullopt, ""};
  {  // one verified success that applied every listed strategy: each gets an example
    MemoryOptions o = Opts(dir.path());
    o.top_k_strategies = 12;
    o.listed_strategies = o.top_k_strategies;  // the default answer lists as many
    auto m = OpenOk(o);
    uint64_t task = Task(m.get());
    auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
    auto d = m->NextStep(s->id, mem);
    ASSERT_TRUE(d.ok());
    ASSERT_EQ(d->strategies.size(), 12u);
    StepInput in = Step(s->id, d->direction.id, fb::OutcomeStatus::Ok, 1.5);
    for (const auto& h : d->strategies) in.strategy_ids.push_back(h.strategy->id);
    in.language = "cuda";
    in.source = "__global__ void k() { /* float4 body */ }";
    ASSERT_TRUE(m->RecordStep(in).ok());
  }
  auto answer = [&](int detailed) {
    MemoryOptions o = Opts(dir.path());
    o.top_k_strategies = 12;
    o.listed_strategies = o.top_k_strategies;  // the default answer lists as many
    o.detailed_strategies = detailed;
    auto m = OpenOk(o);
    auto s = m->OpenSession(Task(m.get(), "relu2"), "cuda", "sm_90", "t", "m", 6);
    auto d = m->NextStep(s->id, mem);
    EXPECT_TRUE(d.ok());
    return std::move(d).value();
  };
  const auto full = answer(12), head = answer(4);
  ASSERT_EQ(full.strategies.size(), 12u);
  ASSERT_EQ(head.strategies.size(), 12u);
  size_t examples = 0;
  for (size_t i = 0; i < 12; ++i) {
    const auto& f = full.strategies[i];
    const auto& h = head.strategies[i];
    // The same list in the same order with the same scores: only the content differs.
    EXPECT_EQ(h.strategy->id, f.strategy->id);
    EXPECT_EQ(h.strategy->name, f.strategy->name);
    EXPECT_EQ(h.strategy->title, f.strategy->title);
    EXPECT_EQ(h.strategy->direction_id, f.strategy->direction_id);
    EXPECT_NEAR(h.score, f.score, 1e-6);  // a second session is a little older
    EXPECT_FALSE(f.strategy->description.empty()) << f.strategy->name;
    if (!f.example_source.empty()) ++examples;
    if (i < 4) {  // the head: what the agent read before, its text in the list only
      EXPECT_EQ(h.example_source, f.example_source);
      EXPECT_EQ(h.strategy->description, f.strategy->description);
      EXPECT_EQ(h.strategy->preconditions, f.strategy->preconditions);
      EXPECT_EQ(head.prompt_context.find(f.strategy->description), std::string::npos)
          << head.prompt_context;
      EXPECT_NE(head.prompt_context.find(std::to_string(i + 1) + ". " + f.strategy->name + "\n"),
                std::string::npos)
          << head.prompt_context;
    } else {  // the tail: a name and a title
      EXPECT_EQ(h.example_source, "") << h.strategy->name;
      EXPECT_EQ(h.strategy->example_candidate, "");
      EXPECT_EQ(h.strategy->description, "");
      EXPECT_EQ(h.strategy->code_pattern, "");
      EXPECT_TRUE(h.strategy->preconditions.empty());
      EXPECT_TRUE(h.strategy->failure_modes.empty());
      EXPECT_EQ(head.prompt_context.find(f.strategy->description), std::string::npos)
          << f.strategy->name;
      // Named in the list only: the compact prompt leaves the tail to it.
      EXPECT_EQ(head.prompt_context.find(f.strategy->name + ",") , std::string::npos)
          << head.prompt_context;
    }
  }
  EXPECT_EQ(examples, 12u);  // every one had an example to leave out
  EXPECT_EQ(head.prompt_context.find("Also ranked"), std::string::npos);
  EXPECT_EQ(full.prompt_context.find("Also ranked"), std::string::npos);
  EXPECT_LT(head.prompt_context.size(), full.prompt_context.size());
}

TEST(MemoryTest, CrossBackendExperienceAnswersAHipSessionDiscounted) {
  TempDir dir;
  MemoryOptions o = Opts(dir.path());
  o.cross_backend_discount = 0.5;
  auto m = OpenOk(o);
  uint64_t task = Task(m.get());
  uint64_t good = DirId(m.get(), "shared-memory-banks");  // a low prior: only experience picks it
  for (int i = 0; i < 6; ++i) {
    auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
    ASSERT_TRUE(m->RecordStep(Step(s->id, good, fb::OutcomeStatus::Ok, 2.0)).ok());
  }
  auto hip = m->OpenSession(task, "hip", "gfx90a", "t", "m", 6);
  auto d = m->NextStep(hip->id, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->direction.id, good) << d->why;
  ASSERT_FALSE(d->evidence.empty());
  for (const auto& e : d->evidence) {
    EXPECT_TRUE(e.cross_backend);
    EXPECT_EQ(e.backend, "cuda");
    EXPECT_LE(e.weight, 0.5 + 1e-9);
  }
  EXPECT_NE(d->why.find("another backend"), std::string::npos) << d->why;
  // The same experience counts fully for a CUDA session.
  auto cuda = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
  auto dc = m->NextStep(cuda->id, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
  ASSERT_TRUE(dc.ok());
  EXPECT_FALSE(dc->evidence[0].cross_backend);
  EXPECT_GT(dc->evidence[0].weight, d->evidence[0].weight);
}

TEST(MemoryTest, SuccessfulNewSummaryCreatesStrategyNearDuplicateMerges) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  uint64_t task = Task(m.get());
  uint64_t dir_id = DirId(m.get(), "global-memory-access");
  auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 10);
  const std::string summary =
      "interleave two independent accumulators across unrolled lanes for relu";
  auto r1 = m->RecordStep(Step(s->id, dir_id, fb::OutcomeStatus::Ok, 1.3, summary));
  ASSERT_TRUE(r1.ok());
  ASSERT_NE(r1->new_strategy_id, 0u);
  auto learned = m->GetStrategy(r1->new_strategy_id);
  EXPECT_EQ(learned->direction_id, dir_id);
  EXPECT_EQ(learned->provenance->source, "learned");
  EXPECT_EQ(learned->stats->uses(), 1u);
  // The same idea again, worded almost the same: merged.
  auto r2 = m->RecordStep(Step(s->id, dir_id, fb::OutcomeStatus::Ok, 1.6, summary + "."));
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->new_strategy_id, 0u);
  EXPECT_EQ(r2->merged_into, r1->new_strategy_id);
  EXPECT_EQ(m->GetStrategy(r1->new_strategy_id)->stats->uses(), 2u);
  // A different idea: a new strategy. A failure or no gain: nothing learned.
  auto r3 = m->RecordStep(
      Step(s->id, dir_id, fb::OutcomeStatus::Ok, 2.0, "pack booleans into bitmasks with ballot"));
  EXPECT_NE(r3->new_strategy_id, 0u);
  EXPECT_NE(r3->new_strategy_id, r1->new_strategy_id);
  auto r4 = m->RecordStep(
      Step(s->id, dir_id, fb::OutcomeStatus::CompileError, 0, "some broken idea entirely new"));
  EXPECT_EQ(r4->new_strategy_id, 0u);
  EXPECT_EQ(r4->merged_into, 0u);
  auto r5 = m->RecordStep(
      Step(s->id, dir_id, fb::OutcomeStatus::Ok, 1.0, "slower idea never seen before at all"));
  EXPECT_EQ(r5->new_strategy_id, 0u);
  // In a batch, a duplicate of a strategy created earlier in the same batch is merged too.
  auto s2 = m->OpenSession(task, "cuda", "sm_90", "t", "m", 10);
  auto batch = m->RecordSteps(
      {Step(s2->id, dir_id, fb::OutcomeStatus::Ok, 1.5, "stage rows through registers twice"),
       Step(s2->id, dir_id, fb::OutcomeStatus::Ok, 1.9, "stage rows through registers twice")});
  ASSERT_TRUE(batch.ok());
  EXPECT_NE((*batch)[0].new_strategy_id, 0u);
  EXPECT_EQ((*batch)[1].merged_into, (*batch)[0].new_strategy_id);
  // Learned strategies are retrieved for the direction.
  StrategyFilter f;
  f.direction_id = dir_id;
  bool found = false;
  auto listed = m->ListStrategies(f);
  ASSERT_TRUE(listed.ok());
  for (const auto& st : *listed) found = found || st.id == r1->new_strategy_id;
  EXPECT_TRUE(found);
  std::vector<std::string> problems;
  EXPECT_TRUE(m->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
}

// A pseudo-random workload over several sessions, tasks, backends and outcomes.
void RandomWorkload(Memory* m, int sessions, uint32_t seed) {
  std::mt19937 rng(seed);
  auto dirs = *m->ListDirections();
  auto strategies = *m->ListStrategies({});
  uint64_t t1 = Task(m, "relu"), t2 = Task(m, "softmax", "reduction");
  const fb::OutcomeStatus statuses[] = {
      fb::OutcomeStatus::Ok,           fb::OutcomeStatus::Ok,        fb::OutcomeStatus::Ok,
      fb::OutcomeStatus::CompileError, fb::OutcomeStatus::Incorrect, fb::OutcomeStatus::Timeout,
      fb::OutcomeStatus::InfraError};
  const char* backends[] = {"cuda", "hip", "cpu"};
  for (int i = 0; i < sessions; ++i) {
    auto s = m->OpenSession(i % 2 ? t1 : t2, backends[i % 3], i % 3 == 1 ? "gfx90a" : "sm_90", "c",
                            "m", 6);
    for (int k = 0; k < 5; ++k) {
      StepInput in = Step(s->id, dirs[rng() % dirs.size()].id, statuses[rng() % 7],
                          0.5 + (rng() % 300) / 100.0,
                          "idea " + std::to_string(rng() % 12) + " on the hot loop",
                          static_cast<fb::Bottleneck>(rng() % 5));
      if (in.status != fb::OutcomeStatus::Ok) in.speedup_after = 0;
      in.strategy_ids = {strategies[rng() % strategies.size()].id};
      in.language = "cuda";
      in.source = "// candidate " + std::to_string(rng() % 20);
      ASSERT_TRUE(m->RecordStep(in).ok());
    }
  }
}

TEST(MemoryTest, RebuildEqualsIncremental) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  RandomWorkload(m.get(), 30, 42);
  auto dirs_before = *m->ListDirections();
  auto strat_before = *m->ListStrategies({0, "", true, 0});
  auto edges_before = *m->ListEdges(0);
  ASSERT_GT(edges_before.size(), 5u);
  std::vector<std::string> problems;
  ASSERT_TRUE(m->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
  ASSERT_TRUE(m->RebuildDerived().ok());
  auto dirs_after = *m->ListDirections();
  auto strat_after = *m->ListStrategies({0, "", true, 0});
  auto edges_after = *m->ListEdges(0);
  ASSERT_EQ(dirs_before.size(), dirs_after.size());
  for (size_t i = 0; i < dirs_before.size(); ++i)
    EXPECT_TRUE(*dirs_before[i].stats == *dirs_after[i].stats);
  ASSERT_EQ(strat_before.size(), strat_after.size());
  for (size_t i = 0; i < strat_before.size(); ++i) {
    EXPECT_TRUE(*strat_before[i].stats == *strat_after[i].stats) << strat_before[i].name;
    EXPECT_EQ(strat_before[i].example_candidate, strat_after[i].example_candidate);
  }
  ASSERT_EQ(edges_before.size(), edges_after.size());
  for (size_t i = 0; i < edges_before.size(); ++i) EXPECT_TRUE(edges_before[i] == edges_after[i]);
  EXPECT_TRUE(m->Check(&problems).ok());
}

TEST(MemoryTest, CheckFindsTamperedStatistics) {
  TempDir dir;
  {
    auto m = OpenOk(Opts(dir.path()));
    RandomWorkload(m.get(), 4, 7);
  }
  {
    auto store = Store::Open(dir.path(), 16, 64, false);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)
                    ->Write([](Txn& t) {
                      std::string_view v;
                      HTAM_RETURN_IF_ERROR(t.Get(Db::kDirections, KeyU64(1), &v));
                      fb::DirectionT d;
                      HTAM_RETURN_IF_ERROR(Decode(v, &d, "direction"));
                      d.stats = std::make_unique<fb::GainStats>(99, 1, 0, 0, 0, 0, 0, 0);
                      HTAM_RETURN_IF_ERROR(t.Put(Db::kDirections, KeyU64(1), Encode(d)));
                      return t.Del(Db::kSessionTransitions, KeyPair(1, 1));
                    })
                    .ok());
  }
  auto m = OpenOk(Opts(dir.path()));
  std::vector<std::string> problems;
  EXPECT_FALSE(m->Check(&problems).ok());
  EXPECT_GE(problems.size(), 2u);
  ASSERT_TRUE(m->RebuildDerived().ok());
  EXPECT_TRUE(m->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
}

void SetMeta(const std::string& dir, const std::function<void(fb::StoreMetaT*)>& edit) {
  auto store = Store::Open(dir, 16, 64, false);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)
                  ->Write([&](Txn& t) {
                    std::string_view v;
                    HTAM_RETURN_IF_ERROR(t.Get(Db::kMeta, "store", &v));
                    fb::StoreMetaT m;
                    HTAM_RETURN_IF_ERROR(Decode(v, &m, "meta"));
                    edit(&m);
                    return t.Put(Db::kMeta, "store", Encode(m));
                  })
                  .ok());
}

TEST(MemoryTest, RefusesNewerAndForeignStores) {
  TempDir dir;
  { OpenOk(Opts(dir.path())); }
  SetMeta(dir.path(), [](fb::StoreMetaT* m) { m->schema_version = kStoreSchemaVersion + 1; });
  auto m = Memory::Open(Opts(dir.path()));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(m.status().message().find("newer"), std::string::npos) << m.status().ToString();
  EXPECT_FALSE(Memory::OpenReadOnly(dir.path()).ok());
  SetMeta(dir.path(), [](fb::StoreMetaT* m) {
    m->schema_version = kStoreSchemaVersion;
    m->magic = "other-store";
  });
  m = Memory::Open(Opts(dir.path()));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("not an htam store"), std::string::npos)
      << m.status().ToString();
  // Records without any metadata: a foreign or damaged store, refused.
  TempDir other;
  {
    auto store = Store::Open(other.path(), 16, 64, false);
    ASSERT_TRUE((*store)->Write([](Txn& t) { return t.Put(Db::kTasks, KeyU64(1), "junk"); }).ok());
  }
  m = Memory::Open(Opts(other.path()));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("foreign"), std::string::npos) << m.status().ToString();
}

TEST(MemoryTest, MigratesAVersionOneStore) {
  TempDir dir;
  uint64_t session = 0;
  {
    auto m = OpenOk(Opts(dir.path()));
    RandomWorkload(m.get(), 3, 3);
    session = m->ListSessions(0, 1)->at(0).id;
  }
  // Version 1 had records only: drop the index databases' contents and mark it.
  {
    auto store = Store::Open(dir.path(), 16, 64, false);
    ASSERT_TRUE(
        (*store)
            ->Write([](Txn& t) {
              for (Db db : {Db::kTaskSessions, Db::kSessionTransitions, Db::kDirectionStrategies})
                HTAM_RETURN_IF_ERROR(t.Clear(db));
              return Status::OK();
            })
            .ok());
  }
  SetMeta(dir.path(), [](fb::StoreMetaT* m) { m->schema_version = 1; });
  auto ro = Memory::OpenReadOnly(dir.path());
  ASSERT_FALSE(ro.ok());
  EXPECT_NE(ro.status().message().find("migration"), std::string::npos);
  auto m = OpenOk(Opts(dir.path()));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->GetMeta()->schema_version, kStoreSchemaVersion);
  EXPECT_EQ(m->ListTransitions(session, 0)->size(), 5u);
  std::vector<std::string> problems;
  EXPECT_TRUE(m->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
  bool backup = false;
  for (const auto& e : fs::directory_iterator(dir.path()))
    backup = backup || e.path().filename().string().rfind("backup-v1-", 0) == 0;
  EXPECT_TRUE(backup);
}

TEST(MemoryTest, RecordWithoutPassedOverAdviceStillReads) {
  TempDir dir;
  const StateInput mem{fb::Bottleneck::Memory, std::nullopt, ""};
  uint64_t task = 0, id = 0;
  {
    auto m = OpenOk(Opts(dir.path()));
    task = Task(m.get());
    auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
    auto d = m->NextStep(s->id, mem);
    ASSERT_TRUE(d.ok());
    auto rec = m->RecordStep(Step(s->id, d->direction.id, fb::OutcomeStatus::Ok, 1.0));
    ASSERT_TRUE(rec.ok());
    id = rec->transition_id;
    ASSERT_FALSE(m->GetTransition(id)->passed_over_ids.empty()) << "it applied none of it";
  }
  // Rewrite the record as a store of an older version wrote it: without the field at all.
  {
    auto store = Store::Open(dir.path(), 16, 64, false);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)
                    ->Write([&](Txn& t) {
                      std::string_view v;
                      HTAM_RETURN_IF_ERROR(t.Get(Db::kTransitions, KeyU64(id), &v));
                      fb::TransitionRecordT r;
                      HTAM_RETURN_IF_ERROR(Decode(v, &r, "transition"));
                      r.passed_over_ids.clear();  // an empty vector is not written
                      r.no_change = false;  // nor the fields appended after it (defaults)
                      r.vouched = false;
                      std::string bytes = Encode(r);
                      auto* table = reinterpret_cast<const flatbuffers::Table*>(
                          flatbuffers::GetRoot<fb::TransitionRecord>(bytes.data()));
                      const uint8_t* vt = table->GetVTable();
                      uint16_t vt_size = 0;
                      std::memcpy(&vt_size, vt, sizeof vt_size);
                      EXPECT_LE(vt_size, fb::TransitionRecord::VT_PASSED_OVER_IDS)
                          << "the record must have the old table layout";
                      return t.Put(Db::kTransitions, KeyU64(id), bytes);
                    })
                    .ok());
  }
  fs::remove(dir.path() + "/transitions.idx");  // rows are rebuilt from the records
  auto m = OpenOk(Opts(dir.path()));
  auto r = m->GetTransition(id);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->passed_over_ids.empty());
  std::vector<std::string> problems;
  EXPECT_TRUE(m->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
  EXPECT_NE(m->StatusText().find("transition_table_source: records"), std::string::npos);
  auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(m->NextStep(s->id, mem).ok());
}

TEST(MemoryTest, MapGrowsUnderATinyInitialMap) {
  TempDir dir;
  MemoryOptions o = Opts(dir.path());
  o.map_size_mb = 1;
  auto m = OpenOk(o);
  ASSERT_TRUE(m);
  uint64_t task = Task(m.get());
  auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 0);
  uint64_t dir_id = DirId(m.get(), "fusion");
  std::string big(16 * 1024, 'x');
  for (int i = 0; i < 12; ++i) {
    std::vector<StepInput> batch;
    for (int k = 0; k < 16; ++k) {
      StepInput in = Step(s->id, dir_id, fb::OutcomeStatus::CompileError, 0);
      in.language = "cuda";
      in.source = big + std::to_string(i * 100 + k);
      batch.push_back(in);
    }
    auto r = m->RecordSteps(batch);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  EXPECT_EQ(m->ListTransitions(s->id, 0)->size(), 192u);
  std::string st = m->StatusText();
  EXPECT_EQ(st.find("map_grows: 0\n"), std::string::npos) << st;
  // Max reached: a clear ResourceExhausted, not a crash.
  TempDir small;
  MemoryOptions so = Opts(small.path());
  so.map_size_mb = 1;
  so.max_map_size_mb = 2;
  auto sm = OpenOk(so);
  ASSERT_TRUE(sm);
  uint64_t t2 = Task(sm.get());
  auto s2 = sm->OpenSession(t2, "cuda", "sm_90", "t", "m", 0);
  Status last;
  for (int i = 0; i < 400 && last.ok(); ++i) {
    StepInput in = Step(s2->id, dir_id, fb::OutcomeStatus::CompileError, 0);
    in.language = "cuda";
    in.source = big + std::to_string(i);
    last = sm->RecordStep(in).status();
  }
  EXPECT_EQ(last.code(), Status::Code::kResourceExhausted) << last.ToString();
}

TEST(MemoryTest, EmbeddingsAreNeverMixed) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  uint64_t task = Task(m.get());
  auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 0);
  auto d = m->NextStep(s->id, {}, std::vector<float>(256, 0.1f));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("never"), std::string::npos) << d.status().ToString();
  m.reset();
  MemoryOptions client = Opts(dir.path());
  client.embedder = "team-model-v2";
  client.embedder_dim = 8;
  auto refused = Memory::Open(client);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("builtin-hash-v1"), std::string::npos);

  TempDir cdir;
  client.dir = cdir.path();
  auto c = OpenOk(client);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->GetMeta()->embedder_model, "team-model-v2");
  uint64_t ct = Task(c.get());
  auto cs = c->OpenSession(ct, "cuda", "sm_90", "t", "m", 0);
  std::vector<float> v(8, 0.0f);
  v[3] = 1;
  auto cd = c->NextStep(cs->id, {}, v);
  ASSERT_TRUE(cd.ok()) << cd.status().ToString();
  EXPECT_FALSE(cd->strategies.empty());  // seed strategies without vectors are still offered
  EXPECT_FALSE(c->NextStep(cs->id, {}, std::vector<float>(7, 0.1f)).ok());
  StepInput in = Step(cs->id, cd->direction.id, fb::OutcomeStatus::Ok, 1.4, "client idea");
  in.embedding = v;
  auto r = c->RecordStep(in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->new_strategy_id, 0u);
  in.embedding = v;
  in.speedup_after = 1.6;
  EXPECT_EQ(c->RecordStep(in)->merged_into, r->new_strategy_id);
}

TEST(MemoryTest, CorruptSnapshotIsRebuiltWithTheSameAnswers) {
  TempDir dir;
  uint64_t probe = 0;
  std::vector<uint64_t> evidence_ids;
  std::string chosen;
  auto decide = [&](Memory* m) {
    auto d = m->NextStep(probe, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
    EXPECT_TRUE(d.ok());
    std::vector<uint64_t> ids;
    for (const auto& e : d->evidence) ids.push_back(e.transition_id);
    return std::make_pair(d->direction.name, ids);
  };
  {
    auto m = OpenOk(Opts(dir.path()));
    RandomWorkload(m.get(), 12, 11);
    probe = m->OpenSession(1, "cuda", "sm_90", "t", "m", 0)->id;
    ASSERT_TRUE(m->SnapshotIndexes().ok());
    std::tie(chosen, evidence_ids) = decide(m.get());
    EXPECT_FALSE(evidence_ids.empty());
  }
  {  // A clean snapshot is used.
    auto m = OpenOk(Opts(dir.path()));
    EXPECT_NE(m->StatusText().find("transitions:snapshot"), std::string::npos) << m->StatusText();
    EXPECT_EQ(decide(m.get()), std::make_pair(chosen, evidence_ids));
  }
  const std::string path = dir.path() + "/transitions.idx";
  auto size = fs::file_size(path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    f.write("\xde\xad\xbe\xef", 4);
  }
  {
    auto m = OpenOk(Opts(dir.path()));
    EXPECT_NE(m->StatusText().find("transitions:records"), std::string::npos) << m->StatusText();
    EXPECT_EQ(decide(m.get()), std::make_pair(chosen, evidence_ids));
    std::vector<std::string> problems;
    EXPECT_TRUE(m->Check(&problems).ok());
  }
  fs::resize_file(path, 100);  // truncated
  {
    auto m = OpenOk(Opts(dir.path()));
    EXPECT_EQ(decide(m.get()), std::make_pair(chosen, evidence_ids));
  }
  fs::remove(path);  // missing
  {
    auto m = OpenOk(Opts(dir.path()));
    EXPECT_EQ(decide(m.get()), std::make_pair(chosen, evidence_ids));
  }
}

TEST(MemoryTest, SnapshotPlusNewerRecordsAndStaleSnapshot) {
  TempDir dir;
  {
    auto m = OpenOk(Opts(dir.path()));
    RandomWorkload(m.get(), 4, 5);
    ASSERT_TRUE(m->SnapshotIndexes().ok());
    fs::copy_file(dir.path() + "/transitions.idx", dir.path() + "/old.idx");
    RandomWorkload(m.get(), 4, 6);  // newer than the snapshot... and closing snapshots again
  }
  fs::copy_file(dir.path() + "/old.idx", dir.path() + "/transitions.idx",
                fs::copy_options::overwrite_existing);
  auto m = OpenOk(Opts(dir.path()));
  EXPECT_NE(m->StatusText().find("transitions:snapshot"), std::string::npos);
  std::vector<std::string> problems;
  EXPECT_TRUE(m->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
}

// What a decision says, to the last bit that the policy computes from its neighbours.
std::string Fingerprint(const Decision& d) {
  std::ostringstream o;
  o << d.direction.name << "|";
  for (const auto& e : d.evidence)
    o << e.transition_id << ":" << e.weight << ":" << e.similarity << ":" << e.history_agreement
      << ":" << e.gain << ":" << e.backend << ",";
  o << "|";
  for (const auto& s : d.scores)
    o << s.direction_id << ":" << s.score << ":" << s.p_success << ":" << s.effective_count << ",";
  o << "|";
  for (const auto& h : d.strategies) o << h.strategy->id << ":" << h.score << ",";
  return o.str();
}

std::vector<std::string> Decisions(Memory* m, const std::vector<uint64_t>& sessions) {
  std::vector<std::string> out;
  for (uint64_t s : sessions)
    for (auto b : {fb::Bottleneck::Memory, fb::Bottleneck::Compute, fb::Bottleneck::Latency}) {
      auto d = m->NextStep(s, StateInput{b, std::nullopt, ""});
      EXPECT_TRUE(d.ok()) << d.status().ToString();
      out.push_back(d.ok() ? Fingerprint(*d) : "error");
    }
  return out;
}

// The in-memory transition table answers exactly as the records do, and agrees with them after a
// restart (rows from the snapshot), a catch-up (rows of newer records) and a rebuild; Check()
// finds a row that differs from its record even where the load-time spot checks do not look.
TEST(MemoryTest, TransitionTableAgreesWithTheRecords) {
  TempDir dir;
  std::vector<uint64_t> sessions;
  std::vector<std::string> want;
  {
    auto m = OpenOk(Opts(dir.path()));
    RandomWorkload(m.get(), 12, 21);
    auto listed = m->ListSessions(0, 0);
    ASSERT_TRUE(listed.ok());
    for (const auto& s : *listed) sessions.push_back(s.id);
    ASSERT_EQ(sessions.size(), 12u);
    want = Decisions(m.get(), sessions);
    EXPECT_NE(m->StatusText().find("transition_table_rows: 60\n"), std::string::npos)
        << m->StatusText();
    std::vector<std::string> problems;
    EXPECT_TRUE(m->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
  }
  {  // Neighbours read from the records: the same decisions.
    MemoryOptions o = Opts(dir.path());
    o.transition_table = false;
    auto m = OpenOk(o);
    EXPECT_EQ(Decisions(m.get(), sessions), want);
  }
  {  // Rows from the snapshot written at close.
    auto m = OpenOk(Opts(dir.path()));
    EXPECT_NE(m->StatusText().find("transition_table_source: snapshot"), std::string::npos)
        << m->StatusText();
    EXPECT_EQ(Decisions(m.get(), sessions), want);
    std::vector<std::string> problems;
    EXPECT_TRUE(m->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
    ASSERT_TRUE(m->RebuildDerived().ok());
    EXPECT_EQ(Decisions(m.get(), sessions), want);
    EXPECT_TRUE(m->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
  }
  // Tamper with one row of the table inside the snapshot, keeping its checksum valid, at an id
  // the load-time spot checks skip: the snapshot loads, Check() names the row, a rebuild repairs.
  const std::string path = dir.path() + "/transitions.idx";
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  const size_t header = 52;  // vector_index.cc: magic .. payload hash
  uint64_t covered = 0, section_len = 0;
  std::memcpy(&covered, bytes.data() + 24, 8);
  std::memcpy(&section_len, bytes.data() + header + 8, 8);
  const size_t table_at = header + 16 + section_len + 8;
  ASSERT_EQ(covered, 60u);
  uint64_t step = std::max<uint64_t>(1, covered / 8), victim = 1;
  while ((covered - victim) % step == 0) ++victim;  // not a spot-checked id
  const size_t row_at = table_at + 32 + (victim - 1) * sizeof(TransitionTable::Row);
  TransitionTable::Row row;
  std::memcpy(&row, bytes.data() + row_at, sizeof row);
  ASSERT_TRUE(row.flags & TransitionTable::kPresent);
  row.direction_id = row.direction_id % 13 + 1 == row.direction_id ? 1 : row.direction_id % 13 + 1;
  std::memcpy(bytes.data() + row_at, &row, sizeof row);
  uint64_t hash = Checksum64(bytes.data() + header, bytes.size() - header);
  std::memcpy(bytes.data() + 44, &hash, 8);
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  {
    auto m = OpenOk(Opts(dir.path()));
    EXPECT_NE(m->StatusText().find("transition_table_source: snapshot"), std::string::npos);
    std::vector<std::string> problems;
    EXPECT_FALSE(m->Check(&problems).ok());
    ASSERT_FALSE(problems.empty());
    EXPECT_NE(
        problems[0].find("transition table row " + std::to_string(victim) + ": direction differs"),
        std::string::npos)
        << problems[0];
    ASSERT_TRUE(m->RebuildDerived().ok());
    EXPECT_TRUE(m->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
    EXPECT_EQ(Decisions(m.get(), sessions), want);
  }
}

// VectorIndex::Search walks the HNSW graph itself (reused visited marks, prefetch): its answers
// must be FAISS's own, id for id and similarity for similarity, on both index shapes the memory
// uses (transition keys: 48 dims, M 8; strategy embeddings: 256 dims, M 16), from several threads.
TEST(MemoryTest, IndexSearchEqualsFaissSearch) {
  struct Shape {
    int dim, m, ef, n, k;
  };
  for (const Shape& sh :
       {Shape{48, 8, 64, 30000, 64}, Shape{256, 16, 64, 6000, 32}, Shape{256, 16, 64, 20, 32}}) {
    VectorIndex idx(IndexOptions{sh.dim, sh.m, sh.ef, 20});
    std::mt19937_64 rng(sh.dim * 7 + sh.n);
    std::normal_distribution<float> g;
    auto random_unit = [&](std::vector<float>* v) {
      v->resize(sh.dim);
      double norm = 0;
      for (float& x : *v) {
        x = g(rng);
        norm += double(x) * x;
      }
      for (float& x : *v) x = static_cast<float>(x / std::sqrt(norm));
    };
    std::vector<float> all, v;
    std::vector<uint64_t> ids;
    for (int i = 0; i < sh.n; ++i) {
      random_unit(&v);
      all.insert(all.end(), v.begin(), v.end());
      ids.push_back(1000 + 3 * i);  // external ids differ from the storage positions
    }
    ASSERT_TRUE(idx.Add(ids.size(), ids.data(), all.data()).ok());
    std::vector<std::vector<float>> queries(200);
    for (auto& q : queries) random_unit(&q);
    auto check = [&](size_t from, size_t step) {
      for (size_t i = from; i < queries.size(); i += step) {
        auto mine = idx.Search(queries[i].data(), sh.k);
        auto ref = idx.SearchFaiss(queries[i].data(), sh.k);
        ASSERT_EQ(mine.size(), ref.size());
        for (size_t j = 0; j < ref.size(); ++j) {
          EXPECT_EQ(mine[j].id, ref[j].id) << "dim " << sh.dim << " query " << i << " rank " << j;
          EXPECT_EQ(mine[j].similarity, ref[j].similarity);
        }
      }
    };
    check(0, 1);
    std::thread a(check, 0, 2), b(check, 1, 2);
    a.join();
    b.join();
  }
}

TEST(MemoryTest, DeterministicAcrossStoresWithTheSameSeed) {
  auto run = [](uint64_t seed) {
    TempDir dir;
    MemoryOptions o = Opts(dir.path());
    o.policy_seed = seed;
    auto m = OpenOk(o);
    RandomWorkload(m.get(), 6, 9);
    std::vector<std::string> picks;
    auto s = m->OpenSession(1, "hip", "gfx90a", "t", "m", 0);
    for (int i = 0; i < 4; ++i) {
      auto d = m->NextStep(s->id, StateInput{fb::Bottleneck::Latency, std::nullopt, ""});
      picks.push_back(d->direction.name + ":" +
                      std::to_string(d->strategies.empty() ? 0 : d->strategies[0].strategy->id));
      EXPECT_TRUE(
          m->RecordStep(Step(s->id, d->direction.id, fb::OutcomeStatus::Incorrect, 0)).ok());
    }
    return picks;
  };
  EXPECT_EQ(run(3), run(3));
}

// The retrieval cache answers a repeated strategy search; the decisions must be those of a memory
// without it, also after steps that teach new strategies (which make earlier answers stale).
TEST(MemoryTest, RetrievalCacheGivesTheUncachedAnswers) {
  auto run = [](int cache) {
    TempDir dir;
    MemoryOptions o = Opts(dir.path());
    o.retrieval_cache = cache;
    auto m = OpenOk(o);
    RandomWorkload(m.get(), 4, 17);
    std::vector<std::string> seen;
    auto s = m->OpenSession(1, "cuda", "sm_90", "t", "m", 0);
    for (int i = 0; i < 8; ++i) {
      for (int again = 0; again < 2; ++again) {
        auto d = m->NextStep(s->id, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
        EXPECT_TRUE(d.ok());
        if (!d.ok()) return seen;
        std::string line = d->direction.name + ":";
        for (const auto& h : d->strategies)
          line += " " + std::to_string(h.strategy->id) + "/" + std::to_string(h.similarity);
        seen.push_back(line + "\n" + d->prompt_context);
      }
      // A success with a new summary teaches a strategy under the chosen direction.
      auto d = m->NextStep(s->id, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
      EXPECT_TRUE(m->RecordStep(Step(s->id, d->direction.id, fb::OutcomeStatus::Ok, 1.2 + i,
                                     "fresh idea number " + std::to_string(i) +
                                         " stage rows through shared memory " + d->direction.name))
                      .ok());
    }
    return seen;
  };
  auto cached = run(4096), uncached = run(0);
  EXPECT_EQ(cached, uncached);
}

TEST(MemoryTest, ConcurrentStepsAreGroupCommittedAndAllDurable) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  uint64_t task = Task(m.get());
  uint64_t dir_id = DirId(m.get(), "fusion");
  std::vector<uint64_t> sessions;
  for (int i = 0; i < 4; ++i)
    sessions.push_back(m->OpenSession(task, "cuda", "sm_90", "t", "m", 0)->id);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 40; ++k)
        if (!m->RecordStep(Step(sessions[i], dir_id, fb::OutcomeStatus::Ok, 1.0 + k * 0.01)).ok())
          failures++;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (uint64_t s : sessions) EXPECT_EQ(m->GetSession(s)->steps, 40u);
  std::vector<std::string> problems;
  EXPECT_TRUE(m->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
  m.reset();
  auto again = OpenOk(Opts(dir.path()));
  EXPECT_EQ(again->ListTransitions(0, 0)->size(), 160u);
}

TEST(MemoryTest, ReadOnlyOpenWhileWriterRuns) {
  TempDir dir;
  auto m = OpenOk(Opts(dir.path()));
  RandomWorkload(m.get(), 2, 1);
  auto ro = Memory::OpenReadOnly(dir.path());
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  EXPECT_EQ((*ro)->ListTransitions(0, 0)->size(), 10u);
  EXPECT_EQ((*ro)->ListDirections()->size(), 13u);
  EXPECT_FALSE((*ro)->RecordStep(Step(1, 1, fb::OutcomeStatus::Ok, 1)).ok());
  auto d = (*ro)->NextStep(1, {});
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  RandomWorkload(m.get(), 1, 2);  // the reader sees newer commits in a new read transaction
  EXPECT_EQ((*ro)->ListTransitions(0, 0)->size(), 15u);
  EXPECT_TRUE(Memory::OpenReadOnly(dir.path() + "/none").status().IsNotFound());
}

// continuation_weight: a step is worth what it enabled. A gained little but its session went on to
// 3x within the horizon; B gained more at once and its session stopped at 1.6x. Without the term B
// ranks above A; with it, A ranks above B; and beyond the horizon the later gain does not count.
TEST(MemoryTest, ContinuationWeightCreditsWhatAStepEnabled) {
  TempDir dir;
  const StateInput mem{fb::Bottleneck::Memory, std::nullopt, ""};
  uint64_t task = 0, a = 0, b = 0;
  {
    auto m = OpenOk(Opts(dir.path()));
    task = Task(m.get(), "relu", "elementwise");
    auto probe = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
    auto d = m->NextStep(probe->id, mem);
    ASSERT_TRUE(d.ok() && d->strategies.size() >= 3);
    const fb::StrategyT sa = *d->strategies[0].strategy, sb = *d->strategies[1].strategy,
                        sc = *d->strategies[2].strategy;
    a = sa.id;
    b = sb.id;
    ASSERT_TRUE(m->CloseSession(probe->id).ok());
    // session: first step applies `first` (speedup s1), then two steps without gain, then `sc`
    // reaches s2 at step 3.
    auto session = [&](const fb::StrategyT& first, double s1, double s2) {
      auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
      StepInput st = Step(s->id, first.direction_id, fb::OutcomeStatus::Ok, s1);
      st.strategy_ids = {first.id};
      ASSERT_TRUE(m->RecordStep(st).ok());
      for (int i = 0; i < 2; ++i) {
        StepInput idle = Step(s->id, sc.direction_id, fb::OutcomeStatus::Incorrect, 0);
        ASSERT_TRUE(m->RecordStep(idle).ok());
      }
      StepInput later = Step(s->id, sc.direction_id, fb::OutcomeStatus::Ok, s2);
      later.strategy_ids = {sc.id};
      ASSERT_TRUE(m->RecordStep(later).ok());
      ASSERT_TRUE(m->CloseSession(s->id).ok());
    };
    session(sa, 1.2, 3.0);
    session(sb, 1.5, 1.6);
  }
  auto scores = [&](double weight, int horizon) {
    MemoryOptions o = Opts(dir.path());
    o.continuation_weight = weight;
    o.continuation_horizon = horizon;
    o.top_k_strategies = 200;
    o.listed_strategies = o.top_k_strategies;  // the default answer lists as many
    auto m = OpenOk(o);
    auto s = m->OpenSession(task, "cuda", "sm_90", "t", "m", 6);
    auto d = m->NextStep(s->id, mem);
    EXPECT_TRUE(d.ok());
    std::pair<double, double> ab{0, 0};
    for (const auto& h : d->strategies) {
      if (h.strategy->id == a) ab.first = h.score;
      if (h.strategy->id == b) ab.second = h.score;
    }
    return ab;
  };
  auto [a0, b0] = scores(0, 3);
  EXPECT_GT(b0, a0) << "without the term, the larger immediate gain ranks first";
  auto [a1, b1] = scores(1, 3);
  EXPECT_GT(a1, b1) << "with it, the step that led to 3x ranks first";
  EXPECT_NEAR(b1 - b0, 0, 0.5 * (a1 - a0)) << "B enabled little";
  auto [a2, b2] = scores(1, 2);  // the 3x came 3 steps later: outside a horizon of 2
  EXPECT_NEAR(a2, a0, 1e-9);
  EXPECT_NEAR(b2, b0, 1e-9);
}

// The continuation term's per-session speedups are kept only where continuation_weight asks for
// them. With weight > 0, those kept as steps are recorded give the decisions that a reopen (rows
// from the snapshot) and a rebuild give. At weight 0 the table is smaller (INFO
// transition_table_bytes), and the decisions are those of the term on with nothing to credit.
TEST(MemoryTest, ContinuationSpeedupsAreKeptOnlyWhenWeighed) {
  TempDir dir;
  auto weighed = [&](double weight, int horizon) {
    MemoryOptions o = Opts(dir.path());
    o.continuation_weight = weight;
    o.continuation_horizon = horizon;
    return o;
  };
  auto table_bytes = [](Memory* m) -> uint64_t {
    const std::string text = m->StatusText(), key = "\ntransition_table_bytes:";
    size_t at = text.find(key);
    EXPECT_NE(at, std::string::npos) << text;
    return at == std::string::npos ? 0 : std::stoull(text.substr(at + key.size()));
  };
  std::vector<uint64_t> sessions;
  std::vector<std::string> live;
  {
    auto m = OpenOk(weighed(1, 3));
    RandomWorkload(m.get(), 12, 21);
    auto listed = m->ListSessions(0, 0);
    ASSERT_TRUE(listed.ok());
    for (const auto& s : *listed) sessions.push_back(s.id);
    live = Decisions(m.get(), sessions);
  }
  uint64_t kept = 0;
  {
    auto m = OpenOk(weighed(1, 3));
    kept = table_bytes(m.get());
    EXPECT_EQ(Decisions(m.get(), sessions), live) << "rows from the snapshot";
    ASSERT_TRUE(m->RebuildDerived().ok());
    EXPECT_EQ(Decisions(m.get(), sessions), live) << "rows rebuilt from the records";
  }
  std::vector<std::string> nothing_to_credit;
  {
    auto m = OpenOk(weighed(1, 0));  // the speedups are kept, a horizon of 0 reads none of them
    EXPECT_EQ(table_bytes(m.get()), kept);
    nothing_to_credit = Decisions(m.get(), sessions);
  }
  EXPECT_NE(nothing_to_credit, live) << "the workload has steps that enabled later gains";
  auto m = OpenOk(weighed(0, 3));
  EXPECT_LT(table_bytes(m.get()), kept) << "no per-session speedups at weight 0";
  EXPECT_EQ(Decisions(m.get(), sessions), nothing_to_credit);
}

// memory.bottleneck_mask on the strategy list: with soft a Latency-bound GEMM is still offered
// the compute-only tensor-core strategy (hard masks its direction, so none of its strategies is
// listed), lower than with off by the penalty twice: its own targets and its direction's score
// (direction_weight 1). A strategy whose own targets miss the class in a direction that fits it
// loses the penalty once with soft and counts as a precondition miss with hard.
TEST(MemoryTest, SoftBottleneckKeepsComputeStrategiesOnOffer) {
  struct Hit {
    double score = 0;
    bool match = false;
  };
  std::map<std::string, std::map<std::string, Hit>> hits;  // mode -> strategy -> hit
  for (const std::string mode : {"off", "soft", "hard"}) {
    TempDir dir;
    MemoryOptions o = Opts(dir.path());
    o.bottleneck_mask = mode;
    o.bottleneck_penalty = 0.1;
    o.top_k_strategies = 1000;  // every candidate listed: presence is what is compared
    o.listed_strategies = o.top_k_strategies;  // the default answer lists as many
    auto m = OpenOk(o);
    ASSERT_TRUE(m);
    uint64_t task = Task(m.get(), "hgemm", "gemm");
    auto s = m->OpenSession(task, "cuda", "sm_90", "test", "model-x", 6);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto d = m->NextStep(s->id, StateInput{fb::Bottleneck::Latency, std::nullopt, ""});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    for (const auto& h : d->strategies)
      hits[mode][h.strategy->name] = Hit{h.score, h.precondition_match};
  }
  EXPECT_EQ(hits["hard"].count("tensor-core-mma"), 0u) << "hard: its direction is masked";
  ASSERT_EQ(hits["soft"].count("tensor-core-mma"), 1u) << "soft: still offered";
  ASSERT_EQ(hits["off"].count("tensor-core-mma"), 1u);
  EXPECT_TRUE(hits["soft"]["tensor-core-mma"].match) << "soft: backend and arch hold";
  EXPECT_NEAR(hits["soft"]["tensor-core-mma"].score, hits["off"]["tensor-core-mma"].score - 0.2,
              1e-6);
  // double-buffering targets latency in latency-hiding (latency, memory): nothing changes.
  ASSERT_EQ(hits["soft"].count("double-buffering"), 1u);
  EXPECT_NEAR(hits["soft"]["double-buffering"].score, hits["off"]["double-buffering"].score, 1e-6);
  // welford-mean-variance targets memory in reductions-scans (memory, latency): hard counts the
  // class as a precondition, and a strategy whose preconditions fail is not offered.
  EXPECT_EQ(hits["hard"].count("welford-mean-variance"), 0u);
  ASSERT_EQ(hits["soft"].count("welford-mean-variance"), 1u);
  EXPECT_TRUE(hits["soft"]["welford-mean-variance"].match);
  EXPECT_NEAR(hits["soft"]["welford-mean-variance"].score,
              hits["off"]["welford-mean-variance"].score - 0.1, 1e-6);
}

}  // namespace
}  // namespace htam::memory
