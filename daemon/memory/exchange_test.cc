// Export and import of the memory's records (exchange.h) between real LMDB stores in temporary
// directories: every record survives the trip, and a second import adds nothing.
#include "daemon/memory/exchange.h"

#include <gtest/gtest.h>
#include <lmdb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <tuple>

#include "daemon/memory/memory.h"
#include "daemon/memory/store.h"
#include "daemon/memory/test_util.h"

namespace htam::memory {
namespace {

namespace fs = std::filesystem;

using testing::Opts;
using testing::TempDir;

// A store with two tasks, three sessions, steps of every outcome with candidates, a learned
// strategy and a merge into it; closed before it returns. Returns the candidate hashes its steps
// were given (the keys a client holds).
std::vector<std::string> Fill(const std::string& dir) {
  auto m = Memory::Open(Opts(dir));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return {};
  std::vector<std::string> hashes;
  int n = 0;
  for (const char* name : {"relu", "softmax"}) {
    fb::TaskT t;
    t.name = name;
    t.category = "elementwise";
    t.description = std::string(name) + " over a float32 vector";
    t.flops = 1 << 20;
    t.bytes = 8 << 20;
    auto task = (*m)->PutTask(t);
    EXPECT_TRUE(task.ok());
    for (int k = 0; k < (name[0] == 'r' ? 2 : 1); ++k) {
      auto s = (*m)->OpenSession(*task, "cuda", "sm_90", "test", "model-x", 8);
      EXPECT_TRUE(s.ok());
      const fb::OutcomeStatus kOutcomes[] = {fb::OutcomeStatus::Ok, fb::OutcomeStatus::CompileError,
                                             fb::OutcomeStatus::Ok, fb::OutcomeStatus::Incorrect};
      for (int i = 0; i < 4; ++i, ++n) {
        auto d = (*m)->NextStep(s->id, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
        EXPECT_TRUE(d.ok()) << d.status().ToString();
        if (!d.ok()) return hashes;
        StepInput in;
        in.session_id = s->id;
        in.direction_id = d->direction.id;
        // Every other step applies the second advice: the first is passed over.
        in.strategy_ids = {d->strategies[i % 2].strategy->id};
        in.status = kOutcomes[i];
        in.speedup_after = kOutcomes[i] == fb::OutcomeStatus::Ok ? 1.2 + 0.3 * i : 0;
        in.verified = true;
        // A summary no strategy has: learned as a new strategy, then merged into by the same one.
        if (i == 2) in.summary = "stage tiles of the row in shared memory with cp.async";
        in.language = "cuda";
        in.source = "__global__ void k" + std::to_string(n) + "() {}";
        auto r = (*m)->RecordStep(in);
        EXPECT_TRUE(r.ok()) << r.status().ToString();
        hashes.push_back(CandidateHash(in.language, in.source));
      }
    }
  }
  return hashes;
}

// What identifies each record across stores (ids differ): names and origins, with the fields a
// user reads.
struct Summary {
  std::set<std::string> directions, tasks;
  std::map<std::string, std::tuple<std::string, uint32_t, uint32_t>> strategies;  // dir/name
  std::map<std::string, std::tuple<std::string, uint32_t, float, std::string>> sessions;
  std::map<std::string,
           std::tuple<std::string, int, float, float, std::string, std::string, std::vector<float>>>
      transitions;
  std::map<std::string, std::string> candidates;  // hash -> source
  std::map<std::tuple<std::string, std::string, uint32_t>, std::pair<uint32_t, uint32_t>> edges;
};

Summary Summarize(const ExchangeSet& s) {
  Summary out;
  std::map<uint64_t, std::string> dir, task;
  for (const auto& d : s.directions) {
    dir[d.id] = d.name;
    out.directions.insert(d.name);
  }
  dir[0] = "(start)";
  for (const auto& t : s.tasks) {
    task[t.id] = t.name;
    out.tasks.insert(t.name);
  }
  std::map<uint64_t, std::string> strategy;
  for (const auto& x : s.strategies) {
    strategy[x.id] = dir[x.direction_id] + "/" + x.name;
    out.strategies[strategy[x.id]] = {x.description, x.stats->uses(), x.stats->successes()};
  }
  for (const auto& x : s.sessions) {
    std::string history;
    for (uint64_t h : x.record.history) history += dir[h] + ",";
    out.sessions[x.origin] = {task[x.record.task_id], x.record.steps, x.record.best_speedup,
                              history + x.record.best_candidate};
  }
  for (const auto& x : s.transitions) {
    const auto& r = x.record;
    // What the step did, by name: summary, strategies applied, advice it passed over.
    std::string did = r.summary + " | applied:";
    for (uint64_t id : r.strategy_ids) did += " " + strategy[id];
    did += " | passed over:";
    for (uint64_t id : r.passed_over_ids) did += " " + strategy[id];
    out.transitions[x.origin] = {dir[r.direction_id], static_cast<int>(r.status), r.speedup_before,
                                 r.speedup_after,     r.candidate_hash,           did,
                                 r.state->vector};
  }
  for (const auto& c : s.candidates) out.candidates[c.hash] = c.source;
  for (const auto& e : s.edges)
    out.edges[{dir[e.from_direction], dir[e.to_direction], e.cluster}] = {e.stats->uses(),
                                                                          e.stats->successes()};
  return out;
}

std::string FileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Removes the origins database, as in a store that never took an import before the memory owned
// imports (the CLI created it on the first one).
void DropOrigins(const std::string& dir) {
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  mdb_env_set_maxdbs(env, 32);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0644), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, DbName(Db::kOrigins), 0, &dbi), 0);
  ASSERT_EQ(mdb_drop(txn, dbi, 1), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

ExchangeSet ExportOk(const std::string& dir) {
  auto s = ExportStore(dir);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : ExchangeSet{};
}

TEST(ExchangeTest, ExportThenImportIntoAFreshStoreKeepsEveryRecord) {
  TempDir a, b;
  std::vector<std::string> hashes = Fill(a.path());
  ASSERT_EQ(hashes.size(), 12u);
  ExchangeSet from = ExportOk(a.path());
  EXPECT_EQ(from.sessions.size(), 3u);
  EXPECT_EQ(from.transitions.size(), 12u);
  EXPECT_EQ(from.candidates.size(), 12u);
  EXPECT_EQ(from.directions.size(), 13u);
  for (const auto& s : from.sessions) EXPECT_EQ(s.origin.rfind(from.store_id + "/", 0), 0u);
  size_t passed_over = 0;
  for (const auto& r : from.transitions) passed_over += !r.record.passed_over_ids.empty();
  EXPECT_GT(passed_over, 0u) << "the set carries steps that passed advice over";

  auto rep = ImportStore(b.path() + "/store", from, ImportOptions{});
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->added["direction"], 13u);
  EXPECT_EQ(rep->added["session"], 3u);
  EXPECT_EQ(rep->added["transition"], 12u);
  EXPECT_EQ(rep->added["candidate"], 12u);
  EXPECT_EQ(rep->added["strategy"], from.strategies.size());

  ExchangeSet to = ExportOk(b.path() + "/store");
  EXPECT_NE(to.store_id, from.store_id);
  Summary want = Summarize(from), got = Summarize(to);
  EXPECT_EQ(got.directions, want.directions);
  EXPECT_EQ(got.tasks, want.tasks);
  EXPECT_EQ(got.strategies, want.strategies);  // statistics rebuilt from the records
  EXPECT_EQ(got.sessions, want.sessions);      // by the origin the first store gave them
  EXPECT_EQ(got.transitions, want.transitions);
  EXPECT_EQ(got.candidates, want.candidates);
  EXPECT_EQ(got.edges, want.edges);

  // The key a client was given finds the stored record in the new store too.
  auto m = Memory::OpenReadOnly(b.path() + "/store");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (const auto& h : hashes) {
    auto c = (*m)->GetCandidate(h);
    ASSERT_TRUE(c.ok()) << h;
    EXPECT_EQ(CandidateHash(c->language, c->source), h);
    EXPECT_FALSE(c->transition_ids.empty());
    for (uint64_t t : c->transition_ids) EXPECT_EQ((*m)->GetTransition(t)->candidate_hash, h);
  }
  std::vector<std::string> problems;
  EXPECT_TRUE((*m)->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
}

TEST(ExchangeTest, ImportingTheSameSetTwiceAddsNothing) {
  TempDir a, b;
  Fill(a.path());
  ExchangeSet from = ExportOk(a.path());
  std::string store = b.path() + "/store";
  ASSERT_TRUE(ImportStore(store, from, ImportOptions{}).ok());
  Summary once = Summarize(ExportOk(store));

  auto again = ImportStore(store, from, ImportOptions{});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  for (const auto& [type, n] : again->added) EXPECT_EQ(n, 0u) << type;
  EXPECT_EQ(again->skipped["transition"], 12u);
  EXPECT_EQ(again->merged["direction"], 13u);
  EXPECT_EQ(again->merged["strategy"], from.strategies.size());
  ExchangeSet twice = ExportOk(store);
  EXPECT_EQ(twice.sessions.size(), 3u);
  EXPECT_EQ(twice.transitions.size(), 12u);
  EXPECT_EQ(twice.strategies.size(), from.strategies.size());
  EXPECT_EQ(Summarize(twice).transitions, once.transitions);
  EXPECT_EQ(Summarize(twice).strategies, once.strategies);

  // Its own export, imported back into the first store, is recognized by origin as well.
  auto home = ImportStore(a.path(), ExportOk(store), ImportOptions{});
  ASSERT_TRUE(home.ok()) << home.status().ToString();
  for (const auto& [type, n] : home->added) EXPECT_EQ(n, 0u) << type;
  EXPECT_EQ(ExportOk(a.path()).transitions.size(), 12u);
}

TEST(ExchangeTest, DryRunWritesNothing) {
  TempDir a, b;
  Fill(a.path());
  ExchangeSet from = ExportOk(a.path());
  ImportOptions dry;
  dry.dry_run = true;
  EXPECT_TRUE(ImportStore(b.path() + "/none", from, dry).status().IsNotFound());
  EXPECT_FALSE(fs::exists(b.path() + "/none/data.mdb"));
  std::string store = b.path() + "/store";
  ASSERT_TRUE(Memory::Open(Opts(store)).ok());  // a seeded store
  DropOrigins(store);
  size_t before = ExportOk(store).strategies.size();
  const std::string bytes = FileBytes(store + "/data.mdb");
  auto rep = ImportStore(store, from, dry);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->added["transition"], 12u);
  EXPECT_EQ(rep->added["session"], 3u);
  EXPECT_TRUE(FileBytes(store + "/data.mdb") == bytes) << "a dry run changed data.mdb";
  ExchangeSet after = ExportOk(store);
  EXPECT_TRUE(after.transitions.empty());
  EXPECT_TRUE(after.sessions.empty());
  EXPECT_EQ(after.strategies.size(), before);
}

}  // namespace
}  // namespace htam::memory
