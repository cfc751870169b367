// The memory's lock-owning parts on their own: deltas applied in commit order and a clean stop,
// a session's advice settled and forgotten, the retrieval cache's epochs, group commits that hand
// each caller its own result, and a periodic worker that stops without waiting out its interval.
#include "daemon/memory/memory_parts.h"

#include "daemon/memory/codec.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace htam::memory {
namespace {

using namespace std::chrono_literals;

IndexDelta DeltaOf(uint64_t transition_id) {
  IndexDelta d;
  d.transition_ids.push_back(transition_id);
  return d;
}

// What a DeltaQueue's apply callback saw, in order.
struct Applied {
  std::mutex mu;
  std::vector<uint64_t> ids;
  int calls = 0;
  std::vector<uint64_t> Ids() {
    std::lock_guard<std::mutex> l(mu);
    return ids;
  }
  DeltaQueue::ApplyFn Fn() {
    return [this](const IndexDelta& d) {
      std::lock_guard<std::mutex> l(mu);
      ++calls;
      ids.insert(ids.end(), d.transition_ids.begin(), d.transition_ids.end());
    };
  }
};

TEST(DeltaQueueTest, WithTheApplierEveryPublishedDeltaIsAppliedInOrderBeforeWaitAppliedReturns) {
  Applied applied;
  DeltaQueue q(applied.Fn());
  q.Start();
  std::vector<uint64_t> want;
  for (uint64_t id = 1; id <= 500; ++id) {
    q.Publish(DeltaOf(id));
    want.push_back(id);
  }
  q.WaitApplied();
  EXPECT_EQ(applied.Ids(), want);
  EXPECT_EQ(q.backlog(), 0u);
  q.Stop();
}

TEST(DeltaQueueTest, WithoutTheApplierPublishAppliesAtOnce) {
  Applied applied;
  DeltaQueue q(applied.Fn());
  q.Publish(DeltaOf(7));
  EXPECT_EQ(applied.Ids(), std::vector<uint64_t>{7});
  EXPECT_EQ(q.backlog(), 0u);
}

TEST(DeltaQueueTest, NothingPublishedAroundAStopIsLost) {
  Applied applied;
  DeltaQueue q(applied.Fn());
  q.Start();
  q.Publish(DeltaOf(1));
  q.Publish(DeltaOf(2));
  q.Stop();  // the applier may leave them queued (it lingers for a batch)
  q.Drain();
  q.Publish(DeltaOf(3));  // no applier any more: applied at once
  EXPECT_EQ(applied.Ids(), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(q.backlog(), 0u);
}

TEST(DeltaQueueTest, ConcurrentPublishersKeepEachPublishersOrder) {
  Applied applied;
  DeltaQueue q(applied.Fn());
  q.Start();
  constexpr uint64_t kPerThread = 200;
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 4; ++t)
    threads.emplace_back([&q, t] {
      for (uint64_t i = 0; i < kPerThread; ++i) q.Publish(DeltaOf(t * 1000 + i));
    });
  for (auto& th : threads) th.join();
  q.WaitApplied();
  std::vector<uint64_t> ids = applied.Ids();
  ASSERT_EQ(ids.size(), 4 * kPerThread);
  std::vector<uint64_t> next(4, 0);
  for (uint64_t id : ids) {
    uint64_t t = id / 1000;
    EXPECT_EQ(id % 1000, next[t]) << "publisher " << t << " out of order";
    next[t] = id % 1000 + 1;
  }
}

TEST(SessionAdviceTest, AClosedSessionIsForgotten) {
  SessionAdvice advice(16);
  StateInput state;
  state.query_text = "tiling";
  advice.Remember(1, state, SessionAdvice::Advised{0, {10, 11}});
  ASSERT_TRUE(advice.LastState(1));
  EXPECT_EQ(advice.LastState(1)->query_text, "tiling");
  ASSERT_TRUE(advice.LastAdvice(1));
  EXPECT_EQ(advice.LastAdvice(1)->strategies, (std::vector<uint64_t>{10, 11}));
  advice.Forget(1);
  EXPECT_FALSE(advice.LastState(1));
  EXPECT_FALSE(advice.LastAdvice(1));
}

TEST(SessionAdviceTest, AdviceRankedAboveTheAppliedStrategyCountsAsPassedOverFromThenOn) {
  SessionAdvice advice(16);
  auto same = [](uint64_t id) { return id; };
  advice.Remember(1, StateInput(), SessionAdvice::Advised{0, {10, 11, 12}});
  // Step 0 was recorded applying 11: 10 was passed over, 12 was never reached.
  PolicyState ps;
  ps.step = 1;
  ps.tried.push_back(PolicyState::Tried{11, 0, fb::OutcomeStatus::Ok, 0.1, false});
  advice.AddPassedOver(1, same, &ps);
  ASSERT_EQ(ps.tried.size(), 2u);
  EXPECT_EQ(ps.tried[1].strategy_id, 10u);
  EXPECT_TRUE(ps.tried[1].passed_over);
  EXPECT_FALSE(advice.LastAdvice(1));  // settled
  // A later decision still counts it, once.
  PolicyState later;
  later.step = 2;
  advice.AddPassedOver(1, same, &later);
  ASSERT_EQ(later.tried.size(), 1u);
  EXPECT_EQ(later.tried[0].strategy_id, 10u);
}

TEST(SessionAdviceTest, ALearnedStrategyCountsAsTheOneItWasLearnedAs) {
  SessionAdvice advice(16);
  auto parent = [](uint64_t id) { return id == 50 ? uint64_t{11} : id; };
  advice.Remember(1, StateInput(), SessionAdvice::Advised{0, {10, 50, 12}});
  PolicyState ps;
  ps.step = 1;
  ps.tried.push_back(PolicyState::Tried{11, 0, fb::OutcomeStatus::Ok, 0.1, false});
  advice.AddPassedOver(1, parent, &ps);
  ASSERT_EQ(ps.tried.size(), 2u);  // 10 passed over; 50 is 11, the applied one
  EXPECT_EQ(ps.tried[1].strategy_id, 10u);
}

TEST(SessionAdviceTest, AdviceOfTheCurrentStepIsNotSettledYet) {
  SessionAdvice advice(16);
  advice.Remember(1, StateInput(), SessionAdvice::Advised{3, {10}});
  PolicyState ps;
  ps.step = 3;  // step 3 not recorded yet
  advice.AddPassedOver(
      1, [](uint64_t id) { return id; }, &ps);
  EXPECT_TRUE(ps.tried.empty());
  EXPECT_TRUE(advice.LastAdvice(1));
}

TEST(SessionAdviceTest, PastItsCapacityAllAdviceIsForgottenButStatesAreKept) {
  SessionAdvice advice(2);
  advice.Remember(1, StateInput(), SessionAdvice::Advised{0, {10}});
  advice.Remember(2, StateInput(), SessionAdvice::Advised{0, {20}});
  advice.Remember(2, StateInput(), SessionAdvice::Advised{1, {21}});  // same session: kept
  EXPECT_TRUE(advice.LastAdvice(1));
  advice.Remember(3, StateInput(), SessionAdvice::Advised{0, {30}});
  EXPECT_FALSE(advice.LastAdvice(1));
  EXPECT_FALSE(advice.LastAdvice(2));
  EXPECT_TRUE(advice.LastAdvice(3));
  EXPECT_TRUE(advice.LastState(1));
}

TEST(RetrievalCacheTest, TheSameSearchOfTheSameEpochIsAnsweredFromTheCache) {
  RetrievalCache cache(8);
  const std::string q = "memory-bound softmax: Memory coalescing";
  const std::vector<Hit> hits{{4, 0.9f}, {5, 0.5f}};
  EXPECT_FALSE(cache.Find(1, 7, 2, q));
  cache.Insert(1, 7, 2, q, hits);
  auto got = cache.Find(1, 7, 2, q);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].id, 4u);
  EXPECT_FALSE(cache.Find(2, 7, 2, q)) << "a strategy index changed since";
  EXPECT_FALSE(cache.Find(1, 8, 2, q)) << "another direction";
  EXPECT_FALSE(cache.Find(1, 7, 3, q)) << "more candidates asked for";
  EXPECT_FALSE(cache.Find(1, 7, 2, "memory-bound softmax: Memory coalescinG")) << "another query";
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 5u);
}

TEST(RetrievalCacheTest, AFullCacheDropsEntriesOfOlderEpochsFirst) {
  RetrievalCache cache(2);
  cache.Insert(1, 1, 1, "a", {{1, 1.0f}});
  cache.Insert(2, 1, 1, "b", {{2, 1.0f}});
  cache.Insert(2, 1, 1, "c", {{3, 1.0f}});  // full: the epoch-1 entry goes
  EXPECT_TRUE(cache.Find(2, 1, 1, "b"));
  EXPECT_TRUE(cache.Find(2, 1, 1, "c"));
}

TEST(RetrievalCacheTest, ACacheOfNoEntriesIsOffAndCountsNothing) {
  RetrievalCache cache(0);
  cache.Insert(1, 1, 1, "a", {{1, 1.0f}});
  EXPECT_FALSE(cache.Find(1, 1, 1, "a"));
  EXPECT_EQ(cache.hits() + cache.misses(), 0u);
}

namespace {
std::string StrategyBytes(uint64_t id, const std::string& title) {
  fb::StrategyT s;
  s.id = id;
  s.title = title;
  return Encode(s);
}
}  // namespace

// A state's records are cached once a second decision reads it, and only for that state.
TEST(StrategyRecordCacheTest, KeepsTheRecordsOfTheStateTwoDecisionsReadAndNoOther) {
  StrategyRecordCache cache(true);
  bool fill = true;
  EXPECT_FALSE(cache.Find(5, &fill));
  EXPECT_FALSE(fill) << "the first decision of a state copies nothing";
  EXPECT_FALSE(cache.Find(5, &fill));
  EXPECT_TRUE(fill) << "the second one fills the cache";
  auto r = StrategyRecordCache::Copy(StrategyBytes(3, "tile the loop"));
  ASSERT_TRUE(r);
  cache.Add(5, {{3, r}});
  auto got = cache.Find(5, &fill);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->count(3), 1u);
  EXPECT_EQ(got->at(3)->table->title()->str(), "tile the loop");
  EXPECT_FALSE(cache.Find(6, &fill)) << "a commit since: another state";
  cache.Add(4, {{7, StrategyRecordCache::Copy(StrategyBytes(7, "older"))}});
  EXPECT_TRUE(cache.Find(5, &fill)) << "records of an older state do not replace newer ones";
  EXPECT_EQ(cache.Find(5, &fill)->count(7), 0u);
  EXPECT_FALSE(StrategyRecordCache::Copy("not a flatbuffer at all, just text"))
      << "bytes that do not verify are not cached";
  StrategyRecordCache off(false);
  off.Find(5, &fill);
  off.Find(5, &fill);
  EXPECT_FALSE(fill);
  EXPECT_EQ(off.hits() + off.misses(), 0u);
}

TEST(GroupCommitTest, ConcurrentCallersEachGetTheirOwnResultInBatchesOfAtMostTheLimit) {
  std::atomic<size_t> largest{0};
  GroupCommit<int, int> gc(4, [&](const std::vector<const int*>& items) {
    size_t n = items.size(), seen = largest.load();
    while (n > seen && !largest.compare_exchange_weak(seen, n)) {
    }
    std::this_thread::sleep_for(1ms);  // let others queue behind this batch
    std::vector<int> out;
    for (const int* i : items) out.push_back(*i * 10);
    return out;
  });
  constexpr int kThreads = 16;
  std::vector<int> got(kThreads, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      int item = i;
      got[i] = gc.Submit(&item);
    });
  for (auto& th : threads) th.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(got[i], i * 10);
  EXPECT_LE(largest.load(), 4u);
}

TEST(PeriodicWorkerTest, RunsItsWorkEveryIntervalAndStopsWithoutWaitingOutTheInterval) {
  std::atomic<int> runs{0};
  {
    PeriodicWorker w;
    w.Start(5ms, [&] { ++runs; });
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (runs.load() < 3 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    w.Stop();
  }
  EXPECT_GE(runs.load(), 3);
  PeriodicWorker slow;
  int slow_runs = 0;
  slow.Start(1h, [&] { ++slow_runs; });
  const auto t0 = std::chrono::steady_clock::now();
  slow.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(slow_runs, 0);
}

}  // namespace
}  // namespace htam::memory
