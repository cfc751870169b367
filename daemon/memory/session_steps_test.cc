// A session's per-step lists as rows of their own: a long session's steps write the same few
// bytes at every step, every view of the session still shows its whole path, and stores written
// with the lists inside the session record are migrated with the same answers.
#include "daemon/memory/session_steps.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "daemon/memory/codec.h"
#include "daemon/memory/memory.h"
#include "daemon/memory/store.h"
#include "daemon/memory/test_util.h"

namespace htam::memory {
namespace {

namespace fs = std::filesystem;
using testing::DirId;
using testing::OpenOk;
using testing::Opts;
using testing::PutTestTask;
using testing::TempDir;

StepInput Step(uint64_t session, uint64_t dir, fb::OutcomeStatus st, double speedup) {
  StepInput s;
  s.session_id = session;
  s.direction_id = dir;
  s.status = st;
  s.speedup_after = speedup;
  s.verified = true;
  s.state = StateInput{fb::Bottleneck::Memory, std::nullopt, ""};
  return s;
}

// The stored bytes of a session's record (the store closed by the caller first).
size_t SessionRecordBytes(const std::string& dir, uint64_t id) {
  auto store = Store::Open(dir, 16, 4096, /*read_only=*/true);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return 0;
  auto t = (*store)->BeginRead();
  std::string_view v;
  EXPECT_TRUE(t->Get(Db::kSessions, KeyU64(id), &v).ok());
  return v.size();
}

// Steps of one session cycling through three directions and outcomes; every 7th step raises the
// session best.
void RecordSteps(Memory* m, uint64_t session, const std::vector<uint64_t>& dirs, uint32_t from,
                 uint32_t n, std::vector<uint64_t>* history, std::vector<uint32_t>* raised) {
  static const fb::OutcomeStatus kStatuses[] = {
      fb::OutcomeStatus::Ok, fb::OutcomeStatus::CompileError, fb::OutcomeStatus::Incorrect};
  for (uint32_t k = from; k < from + n; ++k) {
    const bool raise = k % 7 == 0;
    StepInput in =
        Step(session, dirs[k % dirs.size()], raise ? fb::OutcomeStatus::Ok : kStatuses[k % 3],
             raise ? std::pow(1.015, k / 7 + 1) : 0.5);
    if (in.status != fb::OutcomeStatus::Ok) in.speedup_after = 0;
    auto r = m->RecordStep(in);
    ASSERT_TRUE(r.ok()) << "step " << k << ": " << r.status().ToString();
    history->push_back(in.direction_id);
    if (raise) raised->push_back(k);
  }
}

// A 3,000-step session: its record stays the size of a fresh one (each step appends a small row
// instead of rewriting the whole history), while GetSession, the CLI's and the protocol's view,
// still shows every step, and the store checks clean.
TEST(SessionStepsTest, LongSessionRecordStaysTheSameSize) {
  TempDir dir;
  uint64_t session = 0;
  std::vector<uint64_t> history;
  std::vector<uint32_t> raised;
  size_t after_10 = 0;
  {
    auto m = OpenOk(Opts(dir.path()));
    ASSERT_TRUE(m);
    uint64_t task = PutTestTask(m.get(), "relu", "elementwise", "y = max(x, 0)", 1 << 20, 8 << 20);
    auto s = m->OpenSession(task, "cuda", "sm_90", "test", "model-x", 0);
    ASSERT_TRUE(s.ok());
    session = s->id;
    const std::vector<uint64_t> dirs = {DirId(m.get(), "global-memory-access"),
                                        DirId(m.get(), "on-chip-reuse-tiling"),
                                        DirId(m.get(), "fusion")};
    RecordSteps(m.get(), session, dirs, 0, 10, &history, &raised);
  }
  after_10 = SessionRecordBytes(dir.path(), session);
  {
    auto m = OpenOk(Opts(dir.path()));
    ASSERT_TRUE(m);
    const std::vector<uint64_t> dirs = {DirId(m.get(), "global-memory-access"),
                                        DirId(m.get(), "on-chip-reuse-tiling"),
                                        DirId(m.get(), "fusion")};
    RecordSteps(m.get(), session, dirs, 10, 2990, &history, &raised);
    auto s = m->GetSession(session);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->steps, 3000u);
    EXPECT_EQ(s->history, history);
    ASSERT_EQ(s->last_status.size(), 3000u);
    EXPECT_EQ(s->last_status[1], fb::OutcomeStatus::CompileError);
    EXPECT_EQ(s->last_status[2], fb::OutcomeStatus::Incorrect);
    EXPECT_EQ(s->path_steps.size(), raised.size());
    for (size_t i = 0; i < std::min(raised.size(), s->path_steps.size()); ++i)
      if (s->path_steps[i] != raised[i]) {
        ADD_FAILURE() << "path step " << i << ": " << s->path_steps[i] << " vs " << raised[i];
        break;
      }
    auto listed = m->ListSessions(0, 0);
    ASSERT_TRUE(listed.ok());
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ(listed->at(0).history, history);
    auto bare = m->GetSession(session, /*with_steps=*/false);
    ASSERT_TRUE(bare.ok());
    EXPECT_EQ(bare->steps, 3000u);
    EXPECT_TRUE(bare->history.empty());
    auto d = m->NextStep(session, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->step, 3000u);
    std::vector<std::string> problems;
    EXPECT_TRUE(m->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
    // The record a step writes keeps only the history window, read from the rows.
    auto recs = m->ListTransitions(session, 0);
    ASSERT_TRUE(recs.ok());
    ASSERT_EQ(recs->size(), 3000u);
    const auto& last = recs->back().step > recs->front().step ? recs->back() : recs->front();
    ASSERT_EQ(last.step, 2999u);
    ASSERT_FALSE(last.history.empty());
    EXPECT_EQ(last.history.back(), history[2998]);
  }
  const size_t after_3000 = SessionRecordBytes(dir.path(), session);
  EXPECT_LE(after_3000, after_10 + 16) << "the session record grew with its steps";
  EXPECT_LT(after_3000, 1024u);
}

// A store whose sessions keep their lists in their own record (schema 3) is migrated on open:
// the lists become rows (a backup of the old store kept), GetSession shows the same path and the
// next decision is the same as before.
TEST(SessionStepsTest, MigratesSessionListsOfAVersionThreeStore) {
  TempDir dir;
  uint64_t session = 0;
  std::vector<uint64_t> history;
  std::vector<uint32_t> raised;
  std::vector<fb::DirectionScoreT> before;
  fb::SessionT shown;
  {
    auto m = OpenOk(Opts(dir.path()));
    ASSERT_TRUE(m);
    uint64_t task = PutTestTask(m.get(), "relu", "elementwise", "y = max(x, 0)", 1 << 20, 8 << 20);
    auto s = m->OpenSession(task, "cuda", "sm_90", "test", "model-x", 0);
    ASSERT_TRUE(s.ok());
    session = s->id;
    const std::vector<uint64_t> dirs = {DirId(m.get(), "global-memory-access"),
                                        DirId(m.get(), "fusion")};
    RecordSteps(m.get(), session, dirs, 0, 40, &history, &raised);
    shown = *m->GetSession(session);
  }
  {
    auto m = OpenOk(Opts(dir.path()));
    ASSERT_TRUE(m);
    auto d = m->NextStep(session, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    before = d->scores;
  }
  // Rewrite it as schema 3 wrote it: the lists in the session record, no rows.
  {
    auto store = Store::Open(dir.path(), 16, 4096, false);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)
                    ->Write([&](Txn& t) {
                      HTAM_RETURN_IF_ERROR(t.Clear(Db::kSessionSteps));
                      HTAM_RETURN_IF_ERROR(t.Put(Db::kSessions, KeyU64(session), Encode(shown)));
                      std::string_view v;
                      HTAM_RETURN_IF_ERROR(t.Get(Db::kMeta, "store", &v));
                      fb::StoreMetaT meta;
                      HTAM_RETURN_IF_ERROR(Decode(v, &meta, "meta"));
                      meta.schema_version = 3;
                      return t.Put(Db::kMeta, "store", Encode(meta));
                    })
                    .ok());
  }
  EXPECT_GT(SessionRecordBytes(dir.path(), session), 40u * 9);
  auto ro = Memory::OpenReadOnly(dir.path());
  ASSERT_FALSE(ro.ok());
  EXPECT_NE(ro.status().message().find("migration"), std::string::npos);
  {
    auto m = OpenOk(Opts(dir.path()));
    ASSERT_TRUE(m);
    EXPECT_EQ(m->GetMeta()->schema_version, kStoreSchemaVersion);
    auto s = m->GetSession(session);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->history, history);
    EXPECT_EQ(s->path_steps, raised);
    EXPECT_EQ(s->last_status, shown.last_status);
    auto d = m->NextStep(session, StateInput{fb::Bottleneck::Memory, std::nullopt, ""});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    ASSERT_EQ(d->scores.size(), before.size());
    for (size_t i = 0; i < before.size(); ++i) {
      EXPECT_EQ(d->scores[i].direction_id, before[i].direction_id) << i;
      EXPECT_DOUBLE_EQ(d->scores[i].score, before[i].score) << i;
      EXPECT_DOUBLE_EQ(d->scores[i].penalty, before[i].penalty) << i;
    }
    std::vector<std::string> problems;
    EXPECT_TRUE(m->Check(&problems).ok()) << (problems.empty() ? "" : problems[0]);
  }
  EXPECT_LT(SessionRecordBytes(dir.path(), session), 40u * 9);
  bool backup = false;
  for (const auto& e : fs::directory_iterator(dir.path()))
    backup = backup || e.path().filename().string().rfind("backup-v3-", 0) == 0;
  EXPECT_TRUE(backup);
}

// A record that still carries lists reads them first and its rows after: a step appended to an
// unmigrated record continues its path.
TEST(SessionStepsTest, ListsInTheRecordThenRows) {
  TempDir dir;
  auto store = Store::Open(dir.path(), 16, 64, false);
  ASSERT_TRUE(store.ok());
  fb::SessionT s;
  s.id = 7;
  s.steps = 4;
  s.history = {11, 12, 13};
  s.last_status = {fb::OutcomeStatus::Ok, fb::OutcomeStatus::Timeout, fb::OutcomeStatus::Ok};
  s.path_steps = {0, 2};
  ASSERT_TRUE((*store)
                  ->Write([&](Txn& t) {
                    HTAM_RETURN_IF_ERROR(t.Put(Db::kSessions, KeyU64(7), Encode(s)));
                    return PutSessionStep(t, 7, 3, {14, fb::OutcomeStatus::Ok, true});
                  })
                  .ok());
  auto t = (*store)->BeginRead();
  ASSERT_TRUE(t.ok());
  fb::SessionT full;
  full.id = 7;
  ASSERT_TRUE(LoadSessionSteps(*t, &full).ok());
  EXPECT_EQ(full.history, (std::vector<uint64_t>{11, 12, 13, 14}));
  EXPECT_EQ(full.last_status[1], fb::OutcomeStatus::Timeout);
  EXPECT_EQ(full.path_steps, (std::vector<uint32_t>{0, 2, 3}));
  // A damaged row is Corruption, not a misread step.
  std::vector<uint64_t> seen;
  ASSERT_TRUE(
      (*store)
          ->Write([&](Txn& w) { return w.Put(Db::kSessionSteps, SessionStepKey(7, 4), "short"); })
          .ok());
  auto t2 = (*store)->BeginRead();
  EXPECT_EQ(LoadSessionSteps(*t2, &full).code(), Status::Code::kCorruption);
}

}  // namespace
}  // namespace htam::memory
