// The memory's FAISS indexes: loading snapshots (checked, never trusted blindly), catching up on
// newer records, rebuilding from LMDB, applying committed deltas and writing snapshots.
#include <algorithm>
#include <cmath>
#include <thread>

#include "base/log.h"
#include "daemon/memory/codec.h"
#include "daemon/memory/memory_impl.h"

namespace htam::memory {
namespace {
constexpr size_t kAddBatch = 4096;  // vectors added to FAISS at once while catching up
constexpr int kSpotChecks = 8;      // snapshot vectors compared with their records on load

bool SameVector(const std::vector<float>& a, const flatbuffers::Vector<float>* b) {
  if (!b || a.size() != b->size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b->Get(i)) > 1e-6f) return false;
  return true;
}
}  // namespace

IndexOptions MemoryImpl::TransitionIndexOptions() const {
  return IndexOptions{kKeyDim, o_.transition_hnsw_m, std::max(o_.hnsw_ef_search, o_.neighbors),
                      o_.transition_hnsw_ef_construction};
}

IndexOptions MemoryImpl::StrategyIndexOptions() const {
  return IndexOptions{static_cast<int>(meta_.embedder_dim), o_.hnsw_m,
                      std::max(o_.hnsw_ef_search, o_.retrieval_candidates),
                      o_.hnsw_ef_construction};
}

std::string MemoryImpl::SnapshotPath(const char* kind) const {
  return o_.dir + "/" + kind + ".idx";
}

Status MemoryImpl::EnsureIndexes() {
  MutexLock g(&index_init_mu_);
  if (indexes_ready_) return Status::OK();
  HTAM_RETURN_IF_ERROR(LoadOrRebuildIndexes());
  indexes_ready_ = true;
  return Status::OK();
}

Status MemoryImpl::LoadOrRebuildIndexes() {
  WriterMutexLock l(&index_mu_);
  const uint64_t tag = meta_.created_ns;
  std::map<uint64_t, std::unique_ptr<VectorIndex>> sections;
  uint64_t tcov = 0, scov = 0;
  std::string source;

  std::optional<std::string> table_bytes;
  table_.Clear();
  uint64_t table_cov = 0;  // rows of records up to this id came from the snapshot
  // The two snapshot files are read, hashed and parsed at the same time (start-up time).
  std::map<uint64_t, std::unique_ptr<VectorIndex>> strategy_sections;
  Status strategy_st;
  std::thread strategy_loader([&] {
    strategy_st = LoadSnapshot(SnapshotPath("strategies"), StrategyIndexOptions(), tag, &scov,
                               &strategy_sections);
  });
  Status st = LoadSnapshot(SnapshotPath("transitions"), TransitionIndexOptions(), tag, &tcov,
                           &sections, &table_bytes);
  strategy_loader.join();
  if (st.ok() && sections.size() <= 1) {
    transition_index_ = sections.empty() ? nullptr : std::move(sections.begin()->second);
    if (table_bytes) {
      Status ts = TransitionTable::Deserialize(*table_bytes, &table_);
      if (ts.ok() && table_.max_id() <= tcov) {
        table_cov = tcov;
      } else {
        HTAM_LOG(kWarn, "memory") << "transition table in the snapshot rejected, rebuilding it "
                                  << "from the records: "
                                  << (ts.ok() ? "covers more ids" : ts.message());
        table_.Clear();
      }
    }
  } else {
    if (!st.IsNotFound()) {
      HTAM_LOG(kWarn, "memory") << "transition index snapshot rejected, rebuilding from the store: "
                                << st.ToString();
    }
    tcov = 0;
  }
  if (!transition_index_)
    transition_index_ = std::make_unique<VectorIndex>(TransitionIndexOptions());
  source += tcov ? "transitions:snapshot" : "transitions:records";
  table_source_ = table_cov ? "snapshot" : "records";

  st = strategy_st;
  ++strategy_epoch_;
  strategy_index_ = std::move(strategy_sections);
  if (!st.ok()) {
    if (!st.IsNotFound()) {
      HTAM_LOG(kWarn, "memory") << "strategy index snapshot rejected, rebuilding from the store: "
                                << st.ToString();
    }
    strategy_index_.clear();
    scov = 0;
  }
  source += scov ? " strategies:snapshot" : " strategies:records";
  transitions_covered_ = tcov;
  strategies_covered_ = scov;

  // A snapshot that parses may still belong to another state of this store (restored backup,
  // copied file): compare it with the records before trusting it.
  Status v = VerifyLoadedIndexes();
  if (!v.ok()) {
    HTAM_LOG(kWarn, "memory") << "index snapshot disagrees with the store, rebuilding: "
                              << v.message();
    transition_index_ = std::make_unique<VectorIndex>(TransitionIndexOptions());
    strategy_index_.clear();
    ++strategy_epoch_;
    table_.Clear();
    transitions_covered_ = strategies_covered_ = table_cov = 0;
    source = "transitions:records strategies:records (snapshot rejected)";
    table_source_ = "records";
  }
  snap_transitions_ = transitions_covered_;
  snap_strategies_ = strategies_covered_;
  index_source_ = source;
  // A table rebuilt from records below the snapshot's coverage (an older snapshot format, a
  // rejected table) is saved by the next snapshot even when no record was added.
  table_unsaved_ = table_cov < transitions_covered_;
  return BuildIndexesFromStore(transitions_covered_, strategies_covered_,
                               std::min(table_cov, transitions_covered_));
}

// Caller holds index_mu_ exclusively.
Status MemoryImpl::VerifyLoadedIndexes() {
  HTAM_ASSIGN_OR_RETURN(Txn t, store_->BeginRead());
  if (transitions_covered_) {
    size_t total = 0, newer = 0;
    HTAM_RETURN_IF_ERROR(t.Count(Db::kTransitions, &total));
    HTAM_RETURN_IF_ERROR(t.Scan(
        Db::kTransitions, "",
        [&](std::string_view, std::string_view) {
          ++newer;
          return true;
        },
        KeyU64(transitions_covered_ + 1)));
    if (total - newer != transition_index_->size() || transitions_covered_ > total)
      return Status::Corruption("transition snapshot holds " +
                                std::to_string(transition_index_->size()) + " vectors, the store " +
                                std::to_string(total - newer) + " records up to id " +
                                std::to_string(transitions_covered_));
    const bool table_loaded = table_.max_id() > 0;
    if (table_loaded && table_.rows() != total - newer)
      return Status::Corruption("transition table holds " + std::to_string(table_.rows()) +
                                " rows, the store " + std::to_string(total - newer) +
                                " records up to id " + std::to_string(transitions_covered_));
    uint64_t step = std::max<uint64_t>(1, transitions_covered_ / kSpotChecks);
    for (uint64_t id = transitions_covered_; id >= 1; id = id > step ? id - step : 0) {
      std::string_view v;
      HTAM_RETURN_IF_ERROR(t.Get(Db::kTransitions, KeyU64(id), &v));
      FbView<fb::TransitionRecord> r(v);
      std::vector<float> got;
      if (!r || !r->state() || !transition_index_->Reconstruct(id, &got) ||
          !SameVector(got, r->state()->vector()))
        return Status::Corruption("transition " + std::to_string(id) +
                                  " differs from the snapshot");
      if (table_loaded) {
        std::string diff = table_.Compare(*r, kKeyDim);
        if (!diff.empty())
          return Status::Corruption("transition table row " + std::to_string(id) +
                                    " differs from its record: " + diff);
      }
      if (id <= step) break;
    }
  }
  if (strategies_covered_) {
    std::string_view k;
    HTAM_RETURN_IF_ERROR(t.Last(Db::kStrategies, &k, nullptr));
    if (DecodeU64(k) < strategies_covered_)
      return Status::Corruption("strategy snapshot covers ids the store does not have");
    for (const auto& [dir, idx] : strategy_index_) {
      // Check the newest strategy of each direction that the snapshot should hold.
      uint64_t probe = 0;
      HTAM_RETURN_IF_ERROR(t.Scan(Db::kDirectionStrategies, KeyU64(dir),
                                  [&](std::string_view key, std::string_view)
                                      REQUIRES_SHARED(index_mu_) {
                                        uint64_t id = DecodeU64(key, 8);
                                        if (id <= strategies_covered_) probe = id;
                                        return true;
                                      }));
      if (!probe) continue;
      std::string_view v;
      HTAM_RETURN_IF_ERROR(t.Get(Db::kStrategies, KeyU64(probe), &v));
      FbView<fb::Strategy> s(v);
      if (!s) return Status::Corruption("malformed strategy record");
      if (!s->embedding() || s->embedding()->size() == 0) continue;
      std::vector<float> got;
      if (!idx->Reconstruct(probe, &got) || !SameVector(got, s->embedding()))
        return Status::Corruption("strategy " + std::to_string(probe) +
                                  " differs from the snapshot");
    }
  }
  return Status::OK();
}

// Caller holds index_mu_ exclusively. Adds the records newer than the given ids.
Status MemoryImpl::BuildIndexesFromStore(uint64_t transitions_from, uint64_t strategies_from,
                                         uint64_t table_from) {
  HTAM_ASSIGN_OR_RETURN(Txn t, store_->BeginRead());
  std::vector<uint64_t> ids;
  std::vector<float> vecs;
  Status inner;
  auto flush = [&]() REQUIRES(index_mu_) {
    if (ids.empty()) return;
    Status s = transition_index_->Add(ids.size(), ids.data(), vecs.data());
    if (!s.ok()) inner = s;
    ids.clear();
    vecs.clear();
  };
  size_t added_t = 0;
  HTAM_RETURN_IF_ERROR(t.Scan(
      Db::kTransitions, "",
      [&](std::string_view k, std::string_view v) REQUIRES(index_mu_) {
        FbView<fb::TransitionRecord> r(v);
        if (!r) {
          inner = Status::Corruption("malformed transition record " + std::to_string(DecodeU64(k)));
          return false;
        }
        if (r->id() > table_from) table_.Add(*r, kKeyDim);
        if (r->id() <= transitions_from) return true;  // only the table lacks it
        if (r->state() && r->state()->vector() && r->state()->vector()->size() == kKeyDim) {
          ids.push_back(r->id());
          vecs.insert(vecs.end(), r->state()->vector()->begin(), r->state()->vector()->end());
          ++added_t;
        }
        transitions_covered_ = std::max(transitions_covered_, r->id());
        if (ids.size() >= kAddBatch) flush();
        return inner.ok();
      },
      KeyU64(std::min(transitions_from, table_from) + 1)));
  flush();
  HTAM_RETURN_IF_ERROR(inner);

  // Strategies: those newer than the snapshot; in a client-model store also every strategy
  // without an embedding (the seed), which retrieval lists without similarity.
  bool client_model = meta_.embedder_model != kBuiltinEmbedder;
  ++strategy_epoch_;
  unembedded_.clear();
  std::map<uint64_t, std::pair<std::vector<uint64_t>, std::vector<float>>> by_dir;
  size_t added_s = 0;
  HTAM_RETURN_IF_ERROR(t.Scan(
      Db::kStrategies, "",
      [&](std::string_view, std::string_view v) REQUIRES(index_mu_) {
        FbView<fb::Strategy> s(v);
        if (!s) {
          inner = Status::Corruption("malformed strategy record");
          return false;
        }
        bool embedded = s->embedding() && s->embedding()->size() == meta_.embedder_dim;
        if (!embedded) {
          unembedded_[s->direction_id()].push_back(s->id());
        } else if (s->id() > strategies_from) {
          auto& [sids, svecs] = by_dir[s->direction_id()];
          sids.push_back(s->id());
          svecs.insert(svecs.end(), s->embedding()->begin(), s->embedding()->end());
          ++added_s;
        }
        strategies_covered_ = std::max(strategies_covered_, s->id());
        return true;
      },
      client_model ? std::string() : KeyU64(strategies_from + 1)));
  HTAM_RETURN_IF_ERROR(inner);
  for (auto& [dir, pr] : by_dir) {
    auto& idx = strategy_index_[dir];
    if (!idx) idx = std::make_unique<VectorIndex>(StrategyIndexOptions());
    HTAM_RETURN_IF_ERROR(idx->Add(pr.first.size(), pr.first.data(), pr.second.data()));
  }
  RebuildScorer();
  if (added_t || added_s) {
    HTAM_LOG(kInfo, "memory") << "indexes: added " << added_t << " transitions and " << added_s
                              << " strategies from the store (" << index_source_ << ")";
  }
  return Status::OK();
}

void MemoryImpl::ApplyDelta(const IndexDelta& d) {
  WriterMutexLock l(&index_mu_);
  if (!transition_index_) return;  // read-only handle that never needed its indexes
  if (!d.transition_ids.empty()) {
    Status s = transition_index_->Add(d.transition_ids.size(), d.transition_ids.data(),
                                      d.transition_keys.data());
    if (!s.ok()) {
      HTAM_LOG(kError, "memory") << "transition index add failed: " << s.ToString();
    }
    for (uint64_t id : d.transition_ids) transitions_covered_ = std::max(transitions_covered_, id);
    for (const std::string& bytes : d.transition_records) {
      FbView<fb::TransitionRecord> r(bytes);
      if (r) {
        table_.Add(*r, kKeyDim);
        TrainScorer(r->id());
      }
    }
  }
  size_t dim = meta_.embedder_dim;
  if (!d.strategies.empty()) ++strategy_epoch_;
  for (size_t i = 0; i < d.strategies.size(); ++i) {
    auto [dir, id] = d.strategies[i];
    const float* vec = d.strategy_vectors.data() + i * dim;
    if (d.strategy_vectors.size() < (i + 1) * dim ||
        std::all_of(vec, vec + dim, [](float x) { return x == 0; })) {
      unembedded_[dir].push_back(id);
    } else {
      auto& idx = strategy_index_[dir];
      if (!idx) idx = std::make_unique<VectorIndex>(StrategyIndexOptions());
      Status s = idx->Add(1, &id, vec);
      if (!s.ok()) {
        HTAM_LOG(kError, "memory") << "strategy index add failed: " << s.ToString();
      }
    }
    strategies_covered_ = std::max(strategies_covered_, id);
  }
}

void MemoryImpl::TrainScorer(uint64_t id) {
  const TransitionTable::Row* row = table_.Find(id);
  if (!row || (row->flags & TransitionTable::kFallback) || !(row->flags & TransitionTable::kKeyOk))
    return;
  thread_local std::vector<float> key;
  if (!transition_index_ || !transition_index_->Reconstruct(id, &key) || key.size() != kKeyDim)
    return;
  const bool trusted = row->flags & (TransitionTable::kVerified | TransitionTable::kVouched);
  scorer_.MaybeTrain(key.data(), row->direction_id, static_cast<fb::OutcomeStatus>(row->status),
                     TransitionTable::Gain(*row), trusted, o_);
}

void MemoryImpl::RebuildScorer() {
  scorer_.Clear();
  for (uint64_t id = 1; id <= table_.max_id(); ++id) TrainScorer(id);
}

bool MemoryImpl::IndexesDirty() const {
  ReaderMutexLock l(&index_mu_);
  return transitions_covered_ != snap_transitions_ || strategies_covered_ != snap_strategies_ ||
         table_unsaved_;
}

Status MemoryImpl::SnapshotIndexes() {
  if (read_only_) return Status::PermissionDenied("snapshots are written by the read-write owner");
  HTAM_RETURN_IF_ERROR(EnsureIndexes());
  WaitApplied();
  MutexLock one(&snapshot_write_mu_);
  // Shared: searches go on; only adds (after commits) wait for the files to be written.
  ReaderMutexLock l(&index_mu_);
  uint64_t tag = meta_.created_ns;
  std::map<uint64_t, const VectorIndex*> t{{0, transition_index_.get()}};
  HTAM_RETURN_IF_ERROR(
      SaveSnapshot(SnapshotPath("transitions"), tag, transitions_covered_, t, table_.Serialize()));
  std::map<uint64_t, const VectorIndex*> s;
  for (const auto& [dir, idx] : strategy_index_) s[dir] = idx.get();
  HTAM_RETURN_IF_ERROR(SaveSnapshot(SnapshotPath("strategies"), tag, strategies_covered_, s));
  snap_transitions_ = transitions_covered_;
  snap_strategies_ = strategies_covered_;
  table_unsaved_ = false;
  last_snapshot_ns_ = NowNs();
  return Status::OK();
}

void MemoryImpl::SnapshotIfDue() {
  uint64_t covered = 0;
  {
    ReaderMutexLock l(&index_mu_);
    covered = transitions_covered_;
  }
  const bool by_count = o_.snapshot_every_records > 0 &&
                        covered >= snap_transitions_.load() +
                                       static_cast<uint64_t>(o_.snapshot_every_records);
  const uint64_t since = last_snapshot_ns_.load() ? last_snapshot_ns_.load() : opened_ns_;
  const bool by_time = o_.snapshot_interval_s > 0 &&
                       NowNs() - since >= static_cast<uint64_t>(o_.snapshot_interval_s) * 1000000000ull;
  if (by_count || by_time) SnapshotIfDirty();
}

void MemoryImpl::SnapshotIfDirty() {
  if (!IndexesDirty()) return;
  Status s = SnapshotIndexes();
  if (!s.ok()) {
    HTAM_LOG(kWarn, "memory") << "index snapshot failed: " << s.ToString();
  }
}

}  // namespace htam::memory
