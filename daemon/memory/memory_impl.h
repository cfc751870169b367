// MemoryImpl: the one implementation of Memory. Internal to daemon/memory.
// Thread-safety: as Memory. The state that has a lock of its own lives in parts
// (memory_parts.h): directions_, advice_, retrieval_cache_, deltas_, group_commit_, snapshots_.
// MemoryImpl keeps the FAISS indexes and the transition table (index_mu_) and the commit lock.
// Lock order: group commit (GroupCommit's lock, never held while committing) -> commit_mu_ ->
// store write -> the delta queue's apply lock -> index_mu_ -> retrieval cache; the directions',
// the advice's and the delta queue's own locks are leaves (the advice's is taken under index_mu_
// shared). What each lock guards is written on the members (GUARDED_BY) and checked by clang's
// -Wthread-safety (ctest label lint).
#pragma once

#include <atomic>
#include <map>
#include <unordered_map>

#include "base/thread_annotations.h"
#include "daemon/memory/memory.h"
#include "daemon/memory/memory_parts.h"
#include "daemon/memory/policy.h"
#include "daemon/memory/store.h"
#include "daemon/memory/scorer.h"
#include "daemon/memory/transition_table.h"
#include "daemon/memory/vector_index.h"

namespace htam::memory {

uint64_t NowNs();
// The text a strategy is embedded from.
std::string StrategyText(const fb::StrategyT& s);

class MemoryImpl final : public Memory {
 public:
  MemoryImpl(const MemoryOptions& o, bool read_only);
  ~MemoryImpl() override;
  Status Init();

  Result<uint64_t> PutTask(const fb::TaskT& task) override;
  Result<fb::TaskT> GetTask(uint64_t id) override;
  Result<fb::TaskT> FindTask(std::string_view name) override;
  Result<std::vector<fb::TaskT>> ListTasks() override;
  Result<fb::SessionT> OpenSession(uint64_t task_id, std::string_view backend,
                                   std::string_view arch, std::string_view client,
                                   std::string_view model, uint32_t budget,
                                   std::string_view owner = {}) override;
  Result<fb::SessionT> GetSession(uint64_t id, bool with_steps = true) override;
  Result<fb::SessionT> CloseSession(uint64_t id) override;
  Result<std::vector<fb::SessionT>> ListSessions(uint64_t task_id, size_t limit) override;
  Result<Decision> NextStep(uint64_t session_id, const StateInput& state,
                            std::optional<std::vector<float>> embedding) override;
  Result<StepRecorded> RecordStep(const StepInput& step) override;
  Result<std::vector<StepRecorded>> RecordSteps(const std::vector<StepInput>& steps) override;
  Result<std::vector<uint64_t>> AddStrategies(std::vector<fb::StrategyT> strategies) override;
  Result<std::vector<fb::DirectionT>> ListDirections() override;
  Result<fb::DirectionT> GetDirection(uint64_t id) override;
  Result<fb::DirectionT> FindDirection(std::string_view name) override;
  Result<std::vector<fb::StrategyT>> ListStrategies(const StrategyFilter& filter) override;
  Result<fb::StrategyT> GetStrategy(uint64_t id) override;
  Result<std::vector<fb::TransitionRecordT>> ListTransitions(uint64_t session_id,
                                                             size_t limit) override;
  Result<fb::TransitionRecordT> GetTransition(uint64_t id) override;
  Result<fb::CandidateT> GetCandidate(std::string_view hash) override;
  Result<std::vector<fb::TransitionEdgeT>> ListEdges(uint64_t from_direction) override;
  Result<fb::StoreMetaT> GetMeta() override;
  Status RebuildDerived() override;
  Status Check(std::vector<std::string>* problems) override;
  Status SnapshotIndexes() override;
  Status Sync() override;
  std::string StatusText() override;

 private:
  struct Prepared;  // a StepInput checked and embedded outside the transaction (learn.cc)

  // opening (memory.cc)
  Status OpenMeta();
  Status CreateStore();
  Status Migrate();
  // Sessions written before schema 4 carry their per-step lists: moved into step rows.
  Status MoveSessionListsToRows(Txn& t);
  Status RebuildSecondary(Txn& t);
  Status LoadDirections();
  // The directions' static fields; shared, never modified (replaced by LoadDirections).
  std::shared_ptr<const std::vector<fb::DirectionT>> Directions() const {
    return directions_.Get();
  }
  template <typename T>
  Result<T> GetRecord(Db db, std::string_view key, const char* what);
  template <typename T>
  Result<std::vector<T>> ScanAll(Db db, size_t limit, bool newest_first);

  // indexes (indexes.cc)
  IndexOptions TransitionIndexOptions() const;
  IndexOptions StrategyIndexOptions() const;
  Status EnsureIndexes() EXCLUDES(index_init_mu_, index_mu_);
  Status LoadOrRebuildIndexes() REQUIRES(index_init_mu_) EXCLUDES(index_mu_);
  // Adds vectors of records newer than transitions_from, table rows of records newer than
  // table_from, strategies newer than strategies_from.
  Status BuildIndexesFromStore(uint64_t transitions_from, uint64_t strategies_from,
                               uint64_t table_from) REQUIRES(index_mu_);
  Status VerifyLoadedIndexes() REQUIRES(index_mu_);
  // Trains the scorer on transition `id` (its table row and indexed key) when it counts;
  // RebuildScorer retrains it on every row in id order.
  void TrainScorer(uint64_t id) REQUIRES(index_mu_);
  void RebuildScorer() REQUIRES(index_mu_);
  // Committed deltas wait in deltas_ in commit order (published under commit_mu_) and are
  // applied there by ApplyDelta, one application at a time, outside the commit lock and off the
  // acknowledging path: the applier thread drains them (several commits per FAISS add), and every
  // reader of the indexes (NextStep, learning, Check, snapshots, rebuild) first waits until all
  // deltas published before it are applied (WaitApplied), so a decision always sees every
  // acknowledged step.
  void ApplyDelta(const IndexDelta& d) EXCLUDES(index_mu_);
  void WaitApplied() EXCLUDES(index_mu_) { deltas_.WaitApplied(); }
  bool IndexesDirty() const EXCLUDES(index_mu_);
  // The periodic snapshot: writes one when the indexes changed since the last.
  void SnapshotIfDirty() EXCLUDES(index_mu_);
  // The snapshot worker's tick: a snapshot once memory.snapshot_every_records records are past
  // the last one, or memory.snapshot_interval_s has passed with anything new.
  void SnapshotIfDue() EXCLUDES(index_mu_);
  std::string SnapshotPath(const char* kind) const;

  // decisions (decide.cc)
  // from_table: read recent outcomes from the transition table (caller holds index_mu_ shared)
  // where it has them, instead of the records. tries: also fill out->tried from every step of
  // the session (what the strategy ranking needs; learning does not). window > 0: out->history
  // holds only the directions of the session's last `window` steps, and out->outcomes, gains,
  // path_steps and tried stay empty: what a step's transition key and record need, read in time
  // independent of the session's length.
  Status BuildPolicyState(Txn& t, const fb::Session& s, const StateInput& in, PolicyState* out,
                          bool from_table = false, bool tries = false, size_t window = 0);
  Status Retrieve(Txn& t, const PolicyState& ps, const fb::TaskT& task, const fb::DirectionT& dir,
                  const std::vector<Neighbor>& neighbors, const StateInput& in,
                  const std::optional<std::vector<float>>& embedding, Decision* d);
  // Adds to ps->tried the advice this session passed over (advice_; see SessionAdvice).
  void PassedOver(uint64_t session_id, PolicyState* ps) EXCLUDES(index_mu_);
  Status CheckClientVector(const std::optional<std::vector<float>>& v) const;
  // The interned client (1, 2, ...) of a session, read once from its record; 0 when unknown.
  // Sessions never change client, so the answer is cached.
  uint32_t ClientOf(Txn& t, uint64_t session_id) EXCLUDES(clients_mu_);
  // memory.trusted_clients names the client: its reported outcomes are vouched for.
  bool Vouched(std::string_view client) const;
  // The retrieval_candidates most similar strategies of a direction (index_mu_ held, shared at
  // least), through the retrieval cache.
  std::vector<Hit> SearchStrategies(uint64_t direction, const VectorIndex& index,
                                    const std::vector<float>& query, int k)
      REQUIRES_SHARED(index_mu_);

  // learning (learn.cc)
  Result<Prepared> Prepare(const StepInput& in);
  std::vector<uint64_t> PassedOverIds(const Prepared& p, uint32_t step) EXCLUDES(index_mu_);
  // Strategies created earlier in a transaction, with their vectors (not yet in the index).
  using NewStrategies = std::vector<std::pair<uint64_t, std::vector<float>>>;
  // Everything one step changes, in the caller's write transaction; the rest of the parts of a
  // step are free functions of learn.cc.
  Status ApplyStep(Txn& t, const Prepared& p, NewStrategies* batch_new, IndexDelta* delta,
                   StepRecorded* out);
  // The strategy most like p's summary under its direction (indexed or in batch_new), 0 if none.
  uint64_t MostSimilarStrategy(Txn& t, const Prepared& p, const NewStrategies& batch_new,
                               double* similarity) EXCLUDES(index_mu_);
  Status LearnStrategy(Txn& t, const Prepared& p, const fb::SessionT& session,
                       const PolicyState& ps, uint64_t now, NewStrategies* batch_new,
                       IndexDelta* delta, fb::TransitionRecordT* rec, StepRecorded* out)
      EXCLUDES(index_mu_);
  Result<std::vector<StepRecorded>> CommitPrepared(const std::vector<const Prepared*>& steps)
      EXCLUDES(commit_mu_);
  // One group commit's batch (group_commit_): one result per step; one bad step does not fail
  // its neighbours.
  std::vector<Result<StepRecorded>> CommitGroup(const std::vector<const Prepared*>& steps)
      EXCLUDES(commit_mu_);
  Status ComputeDerived(Txn& t, struct Derived* d);
  Status WriteDerived(Txn& t);

  MemoryOptions o_;
  const bool read_only_;
  std::unique_ptr<Store> store_;
  fb::StoreMetaT meta_;

  DirectionCatalogue directions_;

  // FAISS indexes: transitions keyed by (state, history); strategies per direction.
  mutable SharedMutex index_mu_;
  Mutex index_init_mu_ ACQUIRED_BEFORE(index_mu_);  // one load or rebuild of the indexes at a time
  bool indexes_ready_ GUARDED_BY(index_init_mu_) = false;
  std::unique_ptr<VectorIndex> transition_index_ GUARDED_BY(index_mu_);
  // Policy facts of every transition (rows beside the index).
  TransitionTable table_ GUARDED_BY(index_mu_);
  std::string table_source_ GUARDED_BY(index_mu_) = "none";
  // The learned direction scorer (scorer.h): trained from the table's rows and the index's keys,
  // in id order, at every (re)build and as records are applied.
  Scorer scorer_ GUARDED_BY(index_mu_);
  std::atomic<bool> table_unsaved_{false};  // rows built from records that no snapshot holds yet
  std::map<uint64_t, std::unique_ptr<VectorIndex>> strategy_index_ GUARDED_BY(index_mu_);
  // direction -> strategies without vectors
  std::map<uint64_t, std::vector<uint64_t>> unembedded_ GUARDED_BY(index_mu_);
  // Bumped (under index_mu_ exclusive) whenever a strategy index or unembedded_ changes.
  uint64_t strategy_epoch_ GUARDED_BY(index_mu_) = 0;
  // Strategy searches by (direction, query vector), of the current strategy_epoch_.
  RetrievalCache retrieval_cache_;
  // The largest ids in the indexes.
  uint64_t transitions_covered_ GUARDED_BY(index_mu_) = 0;
  uint64_t strategies_covered_ GUARDED_BY(index_mu_) = 0;
  std::atomic<uint64_t> snap_transitions_{0}, snap_strategies_{0};  // covered by the last snapshot
  std::atomic<uint64_t> last_snapshot_ns_{0};
  uint64_t opened_ns_ = 0;  // when Init started the workers: the time rule's start
  Mutex snapshot_write_mu_ ACQUIRED_BEFORE(index_mu_);  // one snapshot at a time
  // "snapshot", "snapshot+records", "rebuilt", ...
  std::string index_source_ GUARDED_BY(index_mu_) = "none";

  // Each open session's state and advice at its last NextStep (in memory only).
  SessionAdvice advice_;

  // One commit at a time; its delta is published in commit order.
  Mutex commit_mu_ ACQUIRED_BEFORE(index_mu_);
  DeltaQueue deltas_;  // applies with ApplyDelta
  // Concurrent RecordStep calls, committed in groups.
  GroupCommit<Prepared, Result<StepRecorded>> group_commit_;
  std::atomic<uint64_t> group_commits_{0}, steps_recorded_{0};

  // Session -> interned client name (ClientOf); a leaf lock.
  Mutex clients_mu_;
  std::unordered_map<uint64_t, uint32_t> session_client_ GUARDED_BY(clients_mu_);
  std::unordered_map<std::string, uint32_t> client_ids_ GUARDED_BY(clients_mu_);
  std::vector<std::string> trusted_clients_;  // memory.trusted_clients, split

  PeriodicWorker snapshots_;  // runs SnapshotIfDue
};

}  // namespace htam::memory
