// The lock-owning parts of MemoryImpl (memory_parts.h): directions catalogue, sessions' advice,
// retrieval and strategy record caches, committed-delta queue and periodic worker.
#include "daemon/memory/memory_parts.h"

#include <cstring>
#include <set>

#include "base/hash.h"

namespace htam::memory {

// ---------------------------------------------------------------- DirectionCatalogue

std::shared_ptr<const std::vector<fb::DirectionT>> DirectionCatalogue::Get() const {
  ReaderMutexLock l(&mu_);
  return directions_;
}

void DirectionCatalogue::Replace(std::vector<fb::DirectionT> directions) {
  auto fresh = std::make_shared<const std::vector<fb::DirectionT>>(std::move(directions));
  WriterMutexLock l(&mu_);
  directions_ = std::move(fresh);
}

// ---------------------------------------------------------------- SessionAdvice

void SessionAdvice::Remember(uint64_t session, const StateInput& state,
                             const std::optional<Advised>& advised) {
  MutexLock l(&mu_);
  state_[session] = state;
  if (!advised) return;
  if (advice_.size() >= max_sessions_ && !advice_.count(session)) advice_.clear();
  Advice& a = advice_[session];
  a.step = advised->step;
  a.advised = advised->strategies;
}

std::optional<StateInput> SessionAdvice::LastState(uint64_t session) const {
  MutexLock l(&mu_);
  auto it = state_.find(session);
  if (it == state_.end()) return std::nullopt;
  return it->second;
}

std::optional<SessionAdvice::Advised> SessionAdvice::LastAdvice(uint64_t session) const {
  MutexLock l(&mu_);
  auto it = advice_.find(session);
  if (it == advice_.end() || it->second.advised.empty()) return std::nullopt;
  return Advised{it->second.step, it->second.advised};
}

void SessionAdvice::AddPassedOver(uint64_t session, const std::function<uint64_t(uint64_t)>& canon,
                                  PolicyState* ps) {
  MutexLock l(&mu_);
  auto it = advice_.find(session);
  if (it == advice_.end()) return;
  Advice& a = it->second;
  if (!a.advised.empty() && a.step < ps->step) {  // the advised step has been recorded
    std::set<uint64_t> applied;
    for (const auto& x : ps->tried)
      if (x.step == a.step) applied.insert(x.strategy_id);
    for (uint64_t id : a.advised) {
      if (applied.count(canon(id))) break;
      a.passed.push_back(
          PolicyState::Tried{canon(id), a.step, fb::OutcomeStatus::Ok, 0.0, /*passed_over=*/true});
    }
    a.advised.clear();
  }
  ps->tried.insert(ps->tried.end(), a.passed.begin(), a.passed.end());
}

void SessionAdvice::Forget(uint64_t session) {
  MutexLock l(&mu_);
  state_.erase(session);
  advice_.erase(session);
}

// ---------------------------------------------------------------- RetrievalCache

uint64_t RetrievalCache::Key(uint64_t direction, int k, std::string_view query) {
  return IndexKey64(query, direction ^ (uint64_t(k) << 56));
}

std::optional<std::vector<Hit>> RetrievalCache::Find(uint64_t epoch, uint64_t direction, int k,
                                                     std::string_view query) {
  if (!enabled()) return std::nullopt;
  {
    MutexLock l(&mu_);
    auto it = entries_.find(Key(direction, k, query));
    if (it != entries_.end() && it->second.epoch == epoch && it->second.direction == direction &&
        it->second.k == k && it->second.query == query) {
      hits_++;
      return it->second.hits;
    }
  }
  misses_++;
  return std::nullopt;
}

void RetrievalCache::Insert(uint64_t epoch, uint64_t direction, int k, std::string_view query,
                            const std::vector<Hit>& hits) {
  if (!enabled()) return;
  const uint64_t key = Key(direction, k, query);
  MutexLock l(&mu_);
  if (entries_.size() >= capacity_) {
    // Full: forget the entries of older epochs, or else everything (a new working set).
    for (auto it = entries_.begin(); it != entries_.end();)
      it = it->second.epoch != epoch ? entries_.erase(it) : std::next(it);
    if (entries_.size() >= capacity_) entries_.clear();
  }
  Entry& e = entries_[key];
  e.epoch = epoch;
  e.direction = direction;
  e.k = k;
  e.query = query;
  e.hits = hits;
}

// ---------------------------------------------------------------- StrategyRecordCache

std::shared_ptr<const StrategyRecordCache::Records> StrategyRecordCache::Find(uint64_t txn,
                                                                              bool* fill) {
  *fill = false;
  if (!enabled_) return nullptr;
  MutexLock l(&mu_);
  if (records_ && txn_ == txn) {
    hits_++;
    *fill = true;  // records it lacks (another task's candidates) join it
    return records_;
  }
  misses_++;
  *fill = seen_ == txn;
  seen_ = txn;
  return nullptr;
}

void StrategyRecordCache::Add(
    uint64_t txn, std::vector<std::pair<uint64_t, std::shared_ptr<const Record>>> added) {
  if (!enabled_ || added.empty()) return;
  MutexLock l(&mu_);
  if (records_ && txn < txn_) return;
  auto next = std::make_shared<Records>();
  if (records_ && txn == txn_) *next = *records_;
  for (auto& [id, r] : added) next->emplace(id, std::move(r));
  records_ = std::move(next);
  txn_ = txn;
}

std::shared_ptr<const StrategyRecordCache::Record> StrategyRecordCache::Copy(
    std::string_view bytes) {
  auto r = std::make_shared<Record>();
  r->words.resize(bytes.size() / 8 + 1);
  std::memcpy(r->words.data(), bytes.data(), bytes.size());
  const auto* p = reinterpret_cast<const uint8_t*>(r->words.data());
  flatbuffers::Verifier v(p, bytes.size());
  if (!v.VerifyBuffer<fb::Strategy>(nullptr)) return nullptr;
  r->table = flatbuffers::GetRoot<fb::Strategy>(p);
  return r;
}

// ---------------------------------------------------------------- IndexDelta, DeltaQueue

void IndexDelta::Append(IndexDelta&& n) {
  transition_ids.insert(transition_ids.end(), n.transition_ids.begin(), n.transition_ids.end());
  transition_keys.insert(transition_keys.end(), n.transition_keys.begin(), n.transition_keys.end());
  for (auto& r : n.transition_records) transition_records.push_back(std::move(r));
  strategies.insert(strategies.end(), n.strategies.begin(), n.strategies.end());
  strategy_vectors.insert(strategy_vectors.end(), n.strategy_vectors.begin(),
                          n.strategy_vectors.end());
}

void DeltaQueue::Start() {
  applier_ = std::thread([this] { ApplierLoop(); });
}

void DeltaQueue::Stop() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (applier_.joinable()) applier_.join();
}

void DeltaQueue::Publish(IndexDelta&& d) {
  {
    MutexLock l(&mu_);
    deltas_.push_back(std::move(d));
    published_++;
  }
  if (applier_.joinable()) {
    cv_.Signal();
  } else {
    Drain();  // no applier (read-only handles never publish; tests of the class do)
  }
}

void DeltaQueue::WaitApplied() {
  if (applied_.load() >= published_.load()) return;
  Drain();  // waits for the applier's batch in progress, then applies what is left
}

size_t DeltaQueue::QueuedVectors() const {
  size_t n = 0;
  for (const auto& d : deltas_) n += d.vectors();
  return n;
}

void DeltaQueue::ApplierLoop() {
  // Each FAISS HNSW add call costs time in proportion to the whole index (a lock per vector is
  // set up), so the applier lets a burst of commits accumulate for a moment and adds them at
  // once. Readers never wait for that moment: they drain at once (WaitApplied).
  constexpr size_t kBatchVectors = 2048;
  constexpr auto kLinger = std::chrono::milliseconds(20);
  MutexLock l(&mu_);
  while (true) {
    while (!stop_ && deltas_.empty()) cv_.Wait(&mu_);
    if (stop_) return;
    const auto linger_end = std::chrono::steady_clock::now() + kLinger;
    while (!stop_ && QueuedVectors() < kBatchVectors) {
      if (!cv_.WaitUntil(&mu_, linger_end)) break;
    }
    if (stop_) return;
    l.Unlock();
    Drain();
    l.Lock();
  }
}

void DeltaQueue::Drain() {
  MutexLock apply(&apply_mu_);
  while (true) {
    IndexDelta d;
    uint64_t merged = 0;
    {
      MutexLock l(&mu_);
      if (deltas_.empty()) return;
      d = std::move(deltas_.front());
      deltas_.pop_front();
      merged = 1;
      // Merge what else waits into one application (kept in commit order).
      while (!deltas_.empty()) {
        d.Append(std::move(deltas_.front()));
        deltas_.pop_front();
        ++merged;
      }
    }
    apply_(d);
    applied_ += merged;
  }
}

// ---------------------------------------------------------------- PeriodicWorker

void PeriodicWorker::Start(std::chrono::milliseconds interval, std::function<void()> work) {
  thread_ = std::thread([this, interval, work = std::move(work)] { Loop(interval, work); });
}

void PeriodicWorker::Stop() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void PeriodicWorker::Loop(std::chrono::milliseconds interval, const std::function<void()>& work) {
  MutexLock l(&mu_);
  while (!stop_) {
    const auto wake = std::chrono::steady_clock::now() + interval;
    while (!stop_) {
      if (!cv_.WaitUntil(&mu_, wake)) break;
    }
    if (stop_) break;
    l.Unlock();
    work();
    l.Lock();
  }
}

}  // namespace htam::memory
