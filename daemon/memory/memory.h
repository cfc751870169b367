// The HTG memory: the public API of the store (LMDB), the indexes (FAISS), the direction policy
// (transition attention), strategy retrieval and learning. The daemon, the CLI and the benchmarks
// use only this header. See docs/memory.md.
//
// Thread-safety: a Memory is safe for concurrent use. Reads run in parallel (short LMDB read
// transactions, shared index lock); writes are serialized internally, and concurrent RecordStep
// calls are committed together in one synced transaction (group commit) before any is answered.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/paths.h"
#include "base/status.h"
#include "htam/schema/htg_generated.h"
#include "htam/schema/protocol_generated.h"  // StrategyHit, DirectionScore, Evidence

namespace htam {
class Config;
}

namespace htam::memory {

namespace fb = ::htam::fb;

// Version of the on-disk layout, recorded in the store's StoreMeta. Version 1 stores (records
// only, without the secondary-index databases), version 2 stores (strategies without verified
// statistics) and version 3 stores (sessions that keep their per-step lists in their own record)
// are migrated on open; newer ones are refused.
inline constexpr uint32_t kStoreSchemaVersion = 4;
inline constexpr const char* kStoreMagic = "htam-store";
inline constexpr const char* kBuiltinEmbedder = "builtin-hash-v1";

// Every tunable of the memory. A default-constructed MemoryOptions holds the configuration table's
// defaults (daemon/config/options.inc, section memory), which are written there only; `dir` is
// empty. MemoryTest.DefaultOptionsAreTheTables checks that every field is read from the table.
struct MemoryOptions {
  std::string dir;           // store directory (created if missing)
  size_t map_size_mb{};      // initial LMDB map size; grows when full
  size_t max_map_size_mb{};  // growth stops here (ResourceExhausted)
  std::string embedder{};    // declared at creation: builtin or a client model name
  uint32_t embedder_dim{};
  // Loaded once into an empty store; "" = none. Default: the taxonomy shipped with htam
  // (<prefix>/share/htam/seed_taxonomy.json, found from the running binary; base/paths.h).
  std::string seed_file{};
  // Policy.
  int neighbors{};  // k nearest past transitions
  int hnsw_m{};
  int hnsw_ef_search{};
  int hnsw_ef_construction{};
  int transition_hnsw_m{};  // the transition-key index (48-d): cheaper adds, one per step
  int transition_hnsw_ef_construction{};
  double attention_temperature{};  // weight = exp((sim - 1) / T)
  double history_weight{};         // share of history agreement in a neighbour's similarity
  double history_decay{};          // position weight ratio (last step 1, then decay, decay^2...)
  int history_length{};
  double exploration{};      // UCB constant c
  double failure_penalty{};  // for a direction that failed at the last step (decays)
  int failure_memory{};
  double prior_strength{};          // pseudo-count of the seed prior
  double prior_gain{};              // log gain of a success with no experience
  double cross_backend_discount{};  // CUDA <-> HIP
  double cpu_backend_discount{};    // CPU <-> GPU
  uint64_t policy_seed{};           // tie-breaking; same inputs + seed = same decision
  // Retrieval.
  int top_k_strategies{};     // strategies a full step returns (StateInput::full)
  int listed_strategies{};    // strategies a compact (default) step returns
  int detailed_strategies{};  // of them, sent in full; the rest as name, title, score
  int answer_example_bytes{};  // example sources a compact step carries, in rank order
  int retrieval_candidates{};
  int retrieval_cache{};  // strategy searches remembered (exact; cleared on strategy adds)
  double rerank_effect_weight{};
  double rerank_precondition_weight{};
  // What a known bottleneck does to a direction or strategy whose targets exclude it: "hard"
  // masks the direction and counts in a strategy's precondition match; "soft" masks nothing and
  // takes bottleneck_penalty from the score of each such direction and strategy; "off": the
  // class only keys the state (transition key, retrieval text). Init refuses anything else.
  // Default off: on the world's development families hard cost the full policy 2.64x -> 1.43x
  // (a GEMM measured Latency-bound lost its tiling and tensor-core directions) and soft was
  // mixed (docs/journal/2026-11-benchmarks-world.md, "A soft bottleneck mask").
  std::string bottleneck_mask{};
  double bottleneck_penalty{};  // "soft": score lost by a direction or strategy that misses
  // "all": the strategy list draws on every unmasked direction, each strategy weighed by its
  // direction's score; "direction": only the chosen direction's strategies.
  std::string strategy_scope{};
  // A learned strategy and its parent share the attended steps' evidence in the rank ("all").
  bool shared_evidence{};
  // A strategy's record shrinks towards the offered strategies' pooled mean gain per use, not
  // the seed's prior gain ("all").
  bool pooled_strategy_prior{};
  // A direction's prior gain of a success is what a success gained over the attended steps, not
  // prior_gain.
  bool pooled_direction_prior{};
  // Weight of a strategy's record where no similar step applied it (1: the record; 0: the base).
  double record_weight{};
  double direction_weight{};  // weight of a strategy's direction score in the "all" ranking
  double retry_penalty{};     // per unsuccessful try of a strategy in this session ("all")
  // Extra penalty per step of this session that passed the strategy over ("all").
  double not_applicable_penalty{};
  // Bonus of a strategy applied in similar states, x w/(w + prior_strength) ("all").
  double applied_weight{};
  // Penalty of a strategy other sessions passed over in similar states, x w/(w + prior_strength)
  // ("all").
  double passed_over_weight{};
  // Weight of the applied evidence A in that penalty's denominator: P / (P + this x A + m), so
  // that only what similar steps passed over more than they applied is penalized ("all").
  double passed_over_applied_weight{};
  // What a successful step enabled: its gain plus this x the log of its session's best speedup
  // within continuation_horizon later steps over its own (directions' and strategies' effect).
  double continuation_weight{};
  int continuation_horizon{};
  // Similarity candidates of each direction that was not chosen ("all").
  int other_direction_candidates{};
  // Learning.
  double merge_threshold{};  // cosine similarity: merge a new summary into a strategy
  // Trust (docs/memory.md, "Trust"). Verified = evaluated by htamd's gate; client-reported
  // (Record) outcomes are unverified unless the session's client is in trusted_clients (vouched).
  double unverified_weight{};       // attention weight factor of an unverified step
  bool unverified_can_promote{};    // false: unverified evidence only lowers, never raises
  std::string trusted_clients{};    // comma-separated client names whose reports are vouched
  // Learned scorer (docs/memory.md, "Learned scorer"; scorer.h).
  bool scorer{};                   // blend it into the direction score
  int scorer_min_records{};        // trained records before a decision uses it
  double scorer_weight{};          // largest share of its estimate
  double scorer_confidence{};      // a direction's records at half that share
  double scorer_learning_rate{};   // SGD step size
  double scorer_l2{};              // L2 on its feature weights
  double no_change_ratio{};         // |after/before - 1| within this (or the spread): no change
  double max_session_weight{};      // attention weight one session may carry in a decision
  double max_client_weight{};       // ... one client's sessions
  double max_step_log_gain{};       // a step's |log gain| counts at most this in an estimate
  double max_speedup{};             // larger speedups are refused (InvalidArgument)
  // Operations.
  int snapshot_interval_s{};  // background index snapshots (0: only on close)
  int snapshot_every_records{};  // also snapshot after this many new records (0: by time only)
  int max_group_commit{};
  // Not in the configuration table on purpose: htamd always sets it. Session ids then carry 32
  // random low bits (still ordered by age); tools and tests that build stores keep 1, 2, 3...
  bool unguessable_session_ids = false;
  // Not in the configuration table on purpose: the daemon always syncs. Bulk loads (benchmarks,
  // imports) may turn it off; a crash may then lose the last commits. Sync() or closing flushes.
  bool sync_commits = true;
  // Not in the configuration table either: decisions read their neighbours' facts from the
  // in-memory transition table (false: from the records; tests compare the two).
  bool transition_table = true;

  MemoryOptions();                                        // the table's defaults
  static MemoryOptions FromConfig(const Config& config);  // data_dir/store + section memory
};

// What the daemon knows about the current state of a session when it asks for the next step.
// Fields left unset are derived from the session, the task and the last outcome.
struct StateInput {
  fb::Bottleneck bottleneck = fb::Bottleneck::Unknown;  // from the roofline or profiler
  std::optional<double> speedup;                        // current best; default: the session's best
  std::string query_text;  // extra text for strategy retrieval (e.g. profiler notes)
  // false (default): the compact answer (strategies that apply here; the first
  // detailed_strategies in full, the rest by name and score; the heaviest evidence only);
  // true: every strategy in full and all the attended evidence.
  bool full = false;
};

// One evaluated (or client-reported) step.
struct StepInput {
  uint64_t session_id = 0;
  uint64_t direction_id = 0;
  std::vector<uint64_t> strategy_ids;
  std::string summary;  // one line: what the candidate did
  fb::OutcomeStatus status = fb::OutcomeStatus::Unverified;
  double speedup_after = 0;  // over the baseline; 0 when it did not run
  double median_us = 0, spread_us = 0;
  fb::ProfileT profile;
  bool verified = false;       // evaluated by the daemon (true) or reported by a client
  std::string candidate_hash;  // empty: no candidate stored
  std::string language, source, diagnostics;
  std::optional<StateInput> state;  // the state before the step; default: the last NextStep's
  // The class the step's candidate was measured in (a profiled evaluation; Unknown = not
  // profiled): kept in the session (Session.measured_bottleneck) as the state of its next steps.
  fb::Bottleneck measured_bottleneck = fb::Bottleneck::Unknown;
  std::optional<std::vector<float>> embedding;  // client vector of `summary` (client-model stores)
};

struct StepRecorded {
  uint64_t transition_id = 0;
  uint64_t new_strategy_id = 0;  // a learned strategy created by this step; 0 if none
  uint64_t merged_into = 0;      // the strategy this step's summary was merged into; 0 if none
  double best_speedup = 1;       // the session's best after this step
  uint32_t step = 0;
};

// The answer to NextStep: the chosen direction, strategies under it, and why.
struct Decision {
  fb::DirectionT direction;
  std::vector<fb::StrategyHitT> strategies;
  std::vector<fb::DirectionScoreT> scores;  // every direction, best first (masked ones last)
  std::vector<fb::EvidenceT> evidence;      // the attended transitions, heaviest first
  std::string why;                          // readable explanation of the choice
  std::string prompt_context;               // text for the agent's prompt
  uint32_t step = 0;
};

struct StrategyFilter {
  uint64_t direction_id = 0;  // 0 = all
  std::string backend;        // "" = any; else only strategies applicable to it
  bool include_merged = false;
  size_t limit = 0;  // 0 = no limit
};

class Memory {
 public:
  virtual ~Memory() = default;

  // Read-write (the daemon): creates or migrates the store, loads the seed once, loads or rebuilds
  // the index snapshots. Fails with FailedPrecondition on a newer or foreign store.
  static Result<std::unique_ptr<Memory>> Open(const MemoryOptions& options);
  // Read-only (the CLI while the daemon runs): never writes, never migrates; indexes are built
  // lazily from the snapshot or the records when a query needs them.
  static Result<std::unique_ptr<Memory>> OpenReadOnly(const std::string& dir);

  // ---- tasks and sessions ----
  virtual Result<uint64_t> PutTask(const fb::TaskT& task) = 0;  // upsert by name; returns id
  virtual Result<fb::TaskT> GetTask(uint64_t id) = 0;
  virtual Result<fb::TaskT> FindTask(std::string_view name) = 0;  // NotFound if absent
  virtual Result<std::vector<fb::TaskT>> ListTasks() = 0;
  virtual Result<fb::SessionT> OpenSession(uint64_t task_id, std::string_view backend,
                                           std::string_view arch, std::string_view client,
                                           std::string_view model, uint32_t budget,
                                           std::string_view owner = {}) = 0;
  // with_steps false: the session without its per-step lists (history, last_status,
  // path_steps), read in time independent of its length (an owner check).
  virtual Result<fb::SessionT> GetSession(uint64_t id, bool with_steps = true) = 0;
  virtual Result<fb::SessionT> CloseSession(uint64_t id) = 0;
  virtual Result<std::vector<fb::SessionT>> ListSessions(uint64_t task_id /*0 = all*/,
                                                         size_t limit = 0) = 0;

  // ---- the optimization loop ----
  virtual Result<Decision> NextStep(uint64_t session_id, const StateInput& state,
                                    std::optional<std::vector<float>> embedding = std::nullopt) = 0;
  // One durable (synced) transaction; returns after the commit reached the disk.
  virtual Result<StepRecorded> RecordStep(const StepInput& step) = 0;
  // Group commit: all steps in one synced transaction, in order; all or nothing.
  virtual Result<std::vector<StepRecorded>> RecordSteps(const std::vector<StepInput>& steps) = 0;

  // Adds strategies (import, benchmarks): ids assigned, embedded with the built-in embedder when
  // the store uses it and no embedding is given; one synced transaction.
  virtual Result<std::vector<uint64_t>> AddStrategies(std::vector<fb::StrategyT> strategies) = 0;

  // ---- queries (daemon and CLI) ----
  virtual Result<std::vector<fb::DirectionT>> ListDirections() = 0;
  virtual Result<fb::DirectionT> GetDirection(uint64_t id) = 0;
  virtual Result<fb::DirectionT> FindDirection(std::string_view name) = 0;
  virtual Result<std::vector<fb::StrategyT>> ListStrategies(const StrategyFilter& filter) = 0;
  virtual Result<fb::StrategyT> GetStrategy(uint64_t id) = 0;
  virtual Result<std::vector<fb::TransitionRecordT>> ListTransitions(
      uint64_t session_id /*0 = all*/, size_t limit = 0) = 0;
  virtual Result<fb::TransitionRecordT> GetTransition(uint64_t id) = 0;
  virtual Result<fb::CandidateT> GetCandidate(std::string_view hash) = 0;
  virtual Result<std::vector<fb::TransitionEdgeT>> ListEdges(
      uint64_t from_direction /*0 = all*/) = 0;
  virtual Result<fb::StoreMetaT> GetMeta() = 0;

  // ---- maintenance ----
  // Recomputes edges, direction and strategy statistics and the secondary indexes from the
  // records, and rebuilds the FAISS indexes. Idempotent; equal to the incremental result.
  virtual Status RebuildDerived() = 0;
  // Integrity: secondary indexes vs records, statistics equal to a rebuild, index contents,
  // schema version. Each problem is one line in *problems; OK when there is none.
  virtual Status Check(std::vector<std::string>* problems) = 0;
  // Writes the FAISS snapshots atomically (temp file, fsync, rename, directory fsync).
  virtual Status SnapshotIndexes() = 0;
  // Waits until every committed step is in the indexes, then flushes the store to disk (the
  // flush is only needed with sync_commits = false).
  virtual Status Sync() = 0;
  // INFO-style "# memory" section: counts, store size, schema version, index freshness.
  virtual std::string StatusText() = 0;
};

// The built-in embedder (builtin-hash-v1): hashed word uni/bi-grams and character trigrams,
// L2-normalized. Deterministic across runs and machines; needs no model.
std::vector<float> EmbedText(std::string_view text, uint32_t dim);

// EmbedText(prefix + " " + suffix) for many prefixes and one suffix, bit for bit, with the
// suffix's features hashed once (a decision embeds one query per direction: the direction's
// title before the task's text). Immutable after construction: safe for concurrent use.
class SuffixEmbedder {
 public:
  SuffixEmbedder(std::string_view suffix, uint32_t dim);
  std::vector<float> Embed(std::string_view prefix) const;

 private:
  struct Feature {
    uint32_t slot;
    float value;
  };
  uint32_t dim_;
  std::string first_word_;         // the suffix's first word (the prefix's last bigram)
  std::vector<Feature> features_;  // the suffix's features, in EmbedText's order
};

// Content hash of a candidate (hex SHA-256, base/hash.h's CandidateKey): what GetCandidate and
// StepInput::candidate_hash use, and the evaluator's candidate_hash.
std::string CandidateHash(std::string_view language, std::string_view source);

}  // namespace htam::memory
