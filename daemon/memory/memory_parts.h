// The parts of MemoryImpl that own a lock each: the directions catalogue, the sessions' advice,
// the retrieval cache, the strategy record cache, the committed-delta queue, the group commit and
// the periodic snapshot worker. Internal to daemon/memory; MemoryImpl composes them
// (memory_impl.h).
// Thread-safety: every part is safe for concurrent use; each lock is a leaf except where a part
// says otherwise (the lock order across parts is written in memory_impl.h).
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/thread_annotations.h"
#include "daemon/memory/memory.h"
#include "daemon/memory/policy.h"
#include "daemon/memory/vector_index.h"

namespace htam::memory {

// The directions' static fields (their statistics are not kept fresh), shared and never modified:
// Replace swaps in a new list, readers keep the one they got.
class DirectionCatalogue {
 public:
  std::shared_ptr<const std::vector<fb::DirectionT>> Get() const EXCLUDES(mu_);
  void Replace(std::vector<fb::DirectionT> directions) EXCLUDES(mu_);

 private:
  mutable SharedMutex mu_;
  std::shared_ptr<const std::vector<fb::DirectionT>> directions_ GUARDED_BY(mu_) =
      std::make_shared<std::vector<fb::DirectionT>>();
};

// Per open session, in memory only: the state it was in at its last NextStep (the default state
// of its RecordStep) and, under strategy_scope all, the strategies that NextStep advised, in
// order, at which step, and the advice the session passed over so far (ranked above the strategy
// the recorded step applied, or all of it when the step applied none). The ranking counts a
// passed-over strategy as a try without success.
class SessionAdvice {
 public:
  struct Advised {
    uint32_t step = 0;
    std::vector<uint64_t> strategies;  // best first
  };
  // max_sessions: sessions whose advice is remembered; past it, all advice is forgotten at once.
  explicit SessionAdvice(size_t max_sessions) : max_sessions_(max_sessions) {}

  // What a NextStep of the session decided: its state, and (strategy_scope all) its advice.
  void Remember(uint64_t session, const StateInput& state, const std::optional<Advised>& advised)
      EXCLUDES(mu_);
  std::optional<StateInput> LastState(uint64_t session) const EXCLUDES(mu_);
  // The advice of the session's last NextStep, if it advised anything not yet passed over.
  std::optional<Advised> LastAdvice(uint64_t session) const EXCLUDES(mu_);
  // Adds to ps->tried the advice the session passed over. Advice of a step older than ps->step
  // (recorded since) is settled first against what that step applied (ps->tried). canon maps a
  // strategy to the one it counts as (a learned strategy as its parent); ps->tried holds
  // canonical ids already.
  void AddPassedOver(uint64_t session, const std::function<uint64_t(uint64_t)>& canon,
                     PolicyState* ps) EXCLUDES(mu_);
  // A closed session is forgotten.
  void Forget(uint64_t session) EXCLUDES(mu_);

 private:
  struct Advice {
    uint32_t step = 0;
    std::vector<uint64_t> advised;
    std::vector<PolicyState::Tried> passed;
  };
  const size_t max_sessions_;
  mutable Mutex mu_;
  std::unordered_map<uint64_t, StateInput> state_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, Advice> advice_ GUARDED_BY(mu_);
};

// Strategy searches by (direction, query, k): the same search of the same index gives the same
// hits, so an entry of the index's current epoch is the search's answer. The query is named by
// the bytes it is made from: the client's vector, or the text the store's embedder embeds (an
// answer from the cache then skips the embedding too). The caller bumps the epoch whenever a
// strategy index changes.
class RetrievalCache {
 public:
  // capacity: entries kept; 0 turns the cache off (Find always misses and counts nothing).
  explicit RetrievalCache(size_t capacity) : capacity_(capacity) {}

  bool enabled() const { return capacity_ > 0; }
  // The cached hits of this search at this epoch; counts a hit or a miss.
  std::optional<std::vector<Hit>> Find(uint64_t epoch, uint64_t direction, int k,
                                       std::string_view query) EXCLUDES(mu_);
  void Insert(uint64_t epoch, uint64_t direction, int k, std::string_view query,
              const std::vector<Hit>& hits) EXCLUDES(mu_);
  uint64_t hits() const { return hits_.load(); }
  uint64_t misses() const { return misses_.load(); }

 private:
  struct Entry {
    uint64_t epoch = 0, direction = 0;
    int k = 0;  // candidates asked for
    std::string query;
    std::vector<Hit> hits;
  };
  static uint64_t Key(uint64_t direction, int k, std::string_view query);

  const size_t capacity_;
  Mutex mu_;
  std::unordered_map<uint64_t, Entry> entries_ GUARDED_BY(mu_);
  std::atomic<uint64_t> hits_{0}, misses_{0};
};

// Strategy records of one committed state of the store, verified once and kept for the
// decisions that read that same state: read transactions of equal id (Txn::id) read equal bytes,
// so a cached record is exactly what the store holds. A decision fills the cache only when an
// earlier one read the same state already, so a store written between every decision copies
// nothing.
class StrategyRecordCache {
 public:
  // A verified record's bytes, 8-byte aligned, and its table in them.
  struct Record {
    std::vector<uint64_t> words;
    const fb::Strategy* table = nullptr;
  };
  using Records = std::unordered_map<uint64_t, std::shared_ptr<const Record>>;

  explicit StrategyRecordCache(bool enabled) : enabled_(enabled) {}

  // The records cached for state `txn` (null: none). *fill: whether this decision should Add
  // the records it reads from the store.
  std::shared_ptr<const Records> Find(uint64_t txn, bool* fill) EXCLUDES(mu_);
  // Adds records of state `txn` (those Find gave stay); a state older than the cached one is
  // ignored.
  void Add(uint64_t txn, std::vector<std::pair<uint64_t, std::shared_ptr<const Record>>> added)
      EXCLUDES(mu_);
  // A verified copy of stored bytes; null when they are not a valid strategy.
  static std::shared_ptr<const Record> Copy(std::string_view bytes);
  uint64_t hits() const { return hits_.load(); }
  uint64_t misses() const { return misses_.load(); }

 private:
  const bool enabled_;
  Mutex mu_;
  uint64_t txn_ GUARDED_BY(mu_) = 0;   // the state records_ holds
  uint64_t seen_ GUARDED_BY(mu_) = 0;  // the state the last decision without records read
  std::shared_ptr<const Records> records_ GUARDED_BY(mu_);
  std::atomic<uint64_t> hits_{0}, misses_{0};
};

// What one committed step (or import) adds to the in-memory indexes once its transaction is
// durable.
struct IndexDelta {
  std::vector<uint64_t> transition_ids;
  std::vector<float> transition_keys;
  std::vector<std::string> transition_records;            // stored bytes, for the table
  std::vector<std::pair<uint64_t, uint64_t>> strategies;  // (direction, strategy)
  std::vector<float> strategy_vectors;

  // Vectors it adds (what a FAISS add costs).
  size_t vectors() const { return transition_ids.size() + strategies.size(); }
  // Appends n's additions after this one's (commit order kept).
  void Append(IndexDelta&& n);
};

// Committed deltas wait in commit order and are applied in that order, off the acknowledging
// path: an applier thread (once started) drains them, letting a burst of commits accumulate for
// a moment so several go into one FAISS add; a reader calls WaitApplied to see every delta
// published before it. apply runs with the queue's apply lock held (one application at a time),
// never with its queue lock held. Lock order: apply_mu_ before the caller's index lock; mu_ is a
// leaf.
class DeltaQueue {
 public:
  using ApplyFn = std::function<void(const IndexDelta&)>;
  explicit DeltaQueue(ApplyFn apply) : apply_(std::move(apply)) {}
  ~DeltaQueue() { Stop(); }

  // Starts the applier thread. Without it, Publish applies at once in the caller's thread.
  void Start();
  // Stops and joins the applier thread; deltas still waiting stay queued (Drain applies them).
  void Stop() EXCLUDES(mu_);
  void Publish(IndexDelta&& d) EXCLUDES(apply_mu_, mu_);
  // Applies everything queued (waits for an application in progress first).
  void Drain() EXCLUDES(apply_mu_, mu_);
  // Returns once every delta published before the call is applied.
  void WaitApplied() EXCLUDES(apply_mu_, mu_);
  // Deltas published and not yet applied.
  uint64_t backlog() const { return published_.load() - applied_.load(); }

 private:
  void ApplierLoop() EXCLUDES(apply_mu_, mu_);
  size_t QueuedVectors() const REQUIRES(mu_);

  const ApplyFn apply_;
  Mutex apply_mu_ ACQUIRED_BEFORE(mu_);  // held while deltas are applied
  Mutex mu_;
  CondVar cv_;
  std::deque<IndexDelta> deltas_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> published_{0}, applied_{0};
  std::thread applier_;
};

// Group commit: concurrent callers queue their item; one of them (the leader) takes up to
// max_batch waiting items and commits them in one call, the lock released, and hands each caller
// its own result. commit returns one result per item, in order.
template <typename Item, typename Out>
class GroupCommit {
 public:
  using CommitFn = std::function<std::vector<Out>(const std::vector<const Item*>&)>;
  GroupCommit(size_t max_batch, CommitFn commit)
      : max_batch_(max_batch ? max_batch : 1), commit_(std::move(commit)) {}

  // Commits item (with whatever else waits) and returns its result.
  Out Submit(const Item* item) EXCLUDES(mu_) {
    Waiter me{item, std::nullopt};
    MutexLock l(&mu_);
    queue_.push_back(&me);
    while (!me.out) {
      if (!leader_active_)
        Lead();
      else
        cv_.Wait(&mu_);
    }
    return std::move(*me.out);
  }

 private:
  struct Waiter {
    const Item* item;
    std::optional<Out> out;
  };

  // The leader's turn: called and returns with mu_ held; commits with it released.
  void Lead() REQUIRES(mu_) {
    leader_active_ = true;
    std::vector<Waiter*> batch;
    while (!queue_.empty() && batch.size() < max_batch_) {
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    mu_.Unlock();
    std::vector<const Item*> items;
    for (Waiter* w : batch) items.push_back(w->item);
    std::vector<Out> results = commit_(items);
    mu_.Lock();
    for (size_t i = 0; i < batch.size(); ++i) batch[i]->out.emplace(std::move(results[i]));
    leader_active_ = false;
    cv_.SignalAll();
  }

  const size_t max_batch_;
  const CommitFn commit_;
  Mutex mu_;
  CondVar cv_;
  std::deque<Waiter*> queue_ GUARDED_BY(mu_);  // and the Waiter each points to
  bool leader_active_ GUARDED_BY(mu_) = false;
};

// A thread that runs work every interval until stopped (a stop does not wait for the interval).
class PeriodicWorker {
 public:
  PeriodicWorker() = default;
  ~PeriodicWorker() { Stop(); }

  void Start(std::chrono::milliseconds interval, std::function<void()> work) EXCLUDES(mu_);
  // Stops and joins the thread (waits for a run in progress).
  void Stop() EXCLUDES(mu_);

 private:
  void Loop(std::chrono::milliseconds interval, const std::function<void()>& work) EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace htam::memory
