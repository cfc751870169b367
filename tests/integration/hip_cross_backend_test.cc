// Experience that transfers between CUDA and HIP, through the memory library's public API on a
// real LMDB store and real FAISS indexes: a store trained only on CUDA sessions answers a HIP
// session with that CUDA evidence, discounted and marked cross_backend (directions and the
// strategies learned on CUDA alike), and a HIP result recorded in a HIP session updates the
// direction and edge statistics that both backends share — durably, and equal to a rebuild.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "daemon/memory/memory.h"

namespace htam::memory {
namespace {

namespace fs = std::filesystem;

constexpr double kDiscount = 0.5;
const char* kLearnedSummary =
    "warp shuffle butterfly for the row total, one partial per warp in shared memory";

class TempStore {
 public:
  TempStore() {
    char tmpl[] = "/tmp/htam-hip-xbackend-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~TempStore() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  MemoryOptions Options() const {
    MemoryOptions o;
    o.dir = dir_ + "/store";
    o.map_size_mb = 32;
    o.snapshot_interval_s = 0;
    o.cross_backend_discount = kDiscount;
    o.seed_file = "configs/seed_taxonomy.json";
    return o;
  }

 private:
  std::string dir_;
};

std::unique_ptr<Memory> Open(const MemoryOptions& o) {
  auto m = Memory::Open(o);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

uint64_t RowsumTask(Memory* m) {
  fb::TaskT t;
  t.name = "rowsum";
  t.category = "reduction";
  t.description = "float32 row sums of an M x N matrix";
  t.flops = 4096.0 * 4096;
  t.bytes = 4.0 * 4096 * 4096;
  auto id = m->PutTask(t);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  return id.ok() ? *id : 0;
}

StepInput Step(uint64_t session, uint64_t direction, double speedup, const std::string& language,
               const std::string& summary, const std::string& source) {
  StepInput s;
  s.session_id = session;
  s.direction_id = direction;
  s.status = fb::OutcomeStatus::Ok;
  s.speedup_after = speedup;
  s.median_us = 100.0 / speedup;
  s.verified = true;
  s.summary = summary;
  s.language = language;
  s.source = source;
  s.candidate_hash = CandidateHash(language, source);
  s.state = StateInput{fb::Bottleneck::Memory, std::nullopt, ""};
  return s;
}

fb::GainStats DirectionStats(Memory* m, uint64_t id) {
  auto d = m->GetDirection(id);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() && d->stats ? *d->stats : fb::GainStats();
}

// Uses of the edge "start of session -> direction" summed over state clusters.
uint32_t StartEdgeUses(Memory* m, uint64_t to) {
  auto edges = m->ListEdges(0);
  EXPECT_TRUE(edges.ok()) << edges.status().ToString();
  uint32_t n = 0;
  for (const auto& e : edges.ok() ? *edges : std::vector<fb::TransitionEdgeT>{})
    if (e.from_direction == 0 && e.to_direction == to && e.stats) n += e.stats->uses();
  return n;
}

TEST(HipCrossBackend, CudaExperienceAnswersHipMarkedAndHipResultsUpdateSharedStatistics) {
  TempStore tmp;
  MemoryOptions opts = tmp.Options();
  auto m = Open(opts);
  ASSERT_TRUE(m);
  uint64_t task = RowsumTask(m.get());
  auto red = m->FindDirection("reductions-scans");
  ASSERT_TRUE(red.ok()) << red.status().ToString();
  const uint64_t dir = red->id;

  // Train on CUDA only: five sessions, each a first step under reductions-scans that paid off.
  uint64_t learned = 0;
  for (int i = 0; i < 5; ++i) {
    auto s = m->OpenSession(task, "cuda", "sm_90a", "hip-xbackend-test", "model-a", 6);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE(m->NextStep(s->id, StateInput{fb::Bottleneck::Memory, std::nullopt, ""}).ok());
    auto r =
        m->RecordStep(Step(s->id, dir, 1.8 + 0.1 * i, "cuda", kLearnedSummary,
                           "// cuda rowsum with __shfl_xor_sync, variant " + std::to_string(i)));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (i == 0) learned = r->new_strategy_id;
  }
  ASSERT_NE(learned, 0u) << "a successful new summary creates a strategy";
  auto transitions = m->ListTransitions(0);
  ASSERT_TRUE(transitions.ok());
  ASSERT_EQ(transitions->size(), 5u);
  for (const auto& t : *transitions) ASSERT_EQ(t.backend, "cuda");

  // A HIP session asks: the answer rests on CUDA evidence, each item marked and discounted.
  auto hip = m->OpenSession(task, "hip", "gfx90a", "hip-xbackend-test", "model-b", 6);
  ASSERT_TRUE(hip.ok()) << hip.status().ToString();
  auto d = m->NextStep(hip->id, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->direction.id, dir) << d->why;
  ASSERT_FALSE(d->evidence.empty()) << d->why;
  for (const auto& e : d->evidence) {
    EXPECT_TRUE(e.cross_backend) << "transition " << e.transition_id;
    EXPECT_EQ(e.backend, "cuda");
    EXPECT_LE(e.weight, kDiscount + 1e-9);
  }
  EXPECT_NE(d->why.find("another backend"), std::string::npos) << d->why;
  // The strategy learned on CUDA is offered, marked as learned on another backend.
  auto hit = std::find_if(
      d->strategies.begin(), d->strategies.end(),
      [&](const fb::StrategyHitT& h) { return h.strategy && h.strategy->id == learned; });
  ASSERT_NE(hit, d->strategies.end()) << d->prompt_context;
  EXPECT_TRUE(hit->cross_backend);
  const double cross_weight = d->evidence.front().weight;

  // A HIP result, recorded in the HIP session, updates the statistics both backends share.
  const fb::GainStats before = DirectionStats(m.get(), dir);
  const uint32_t edge_before = StartEdgeUses(m.get(), dir);
  auto strategy_before = m->GetStrategy(learned);
  ASSERT_TRUE(strategy_before.ok());
  StepInput hs =
      Step(hip->id, dir, 2.4, "hip", "wavefront-size-aware shuffle reduction (warpSize, not 32)",
           "// hip rowsum with __shfl_xor over warpSize lanes");
  hs.strategy_ids = {learned};
  auto rec = m->RecordStep(hs);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  const fb::GainStats after = DirectionStats(m.get(), dir);
  EXPECT_EQ(after.uses(), before.uses() + 1);
  EXPECT_EQ(after.successes(), before.successes() + 1);
  EXPECT_GT(after.sum_gain(), before.sum_gain());
  EXPECT_EQ(StartEdgeUses(m.get(), dir), edge_before + 1);
  EXPECT_EQ(m->GetStrategy(learned)->stats->uses(), strategy_before->stats->uses() + 1);
  auto hip_records = m->ListTransitions(hip->id);
  ASSERT_TRUE(hip_records.ok());
  ASSERT_EQ(hip_records->size(), 1u);
  EXPECT_EQ(hip_records->front().backend, "hip");
  EXPECT_EQ(hip_records->front().arch, "gfx90a");

  // The next HIP session sees its own backend's step at full weight, unmarked, beside the CUDA
  // steps; a CUDA session now sees the HIP step marked the other way round.
  auto hip2 = m->OpenSession(task, "hip", "gfx942", "hip-xbackend-test", "model-b", 6);
  // Every attended piece of evidence (the compact default shows the heaviest only).
  auto d2 = m->NextStep(hip2->id, StateInput{fb::Bottleneck::Memory, std::nullopt, "", true});
  ASSERT_TRUE(d2.ok()) << d2.status().ToString();
  bool own = false, other = false;
  for (const auto& e : d2->evidence) {
    EXPECT_EQ(e.cross_backend, e.backend != "hip") << e.backend;
    if (e.backend == "hip") {
      own = true;
      EXPECT_GT(e.weight, cross_weight);
    }
    other = other || e.backend == "cuda";
  }
  EXPECT_TRUE(own && other) << d2->why;
  auto cuda = m->OpenSession(task, "cuda", "sm_90a", "hip-xbackend-test", "model-a", 6);
  auto dc = m->NextStep(cuda->id, StateInput{fb::Bottleneck::Memory, std::nullopt, "", true});
  ASSERT_TRUE(dc.ok()) << dc.status().ToString();
  bool saw_hip = false;
  for (const auto& e : dc->evidence) {
    EXPECT_EQ(e.cross_backend, e.backend == "hip");
    saw_hip = saw_hip || e.backend == "hip";
  }
  EXPECT_TRUE(saw_hip) << dc->why;

  // Durable, and equal to statistics rebuilt from the records alone.
  m.reset();
  auto reopened = Open(opts);
  ASSERT_TRUE(reopened);
  const fb::GainStats again = DirectionStats(reopened.get(), dir);
  EXPECT_EQ(again.uses(), after.uses());
  EXPECT_EQ(again.successes(), after.successes());
  std::vector<std::string> problems;
  EXPECT_TRUE(reopened->Check(&problems).ok()) << (problems.empty() ? "" : problems.front());
}

}  // namespace
}  // namespace htam::memory
