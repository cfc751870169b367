// The per-transition facts the policy reads for every attended neighbour (direction, outcome,
// speedups, backend, the tail of the history, credited and passed-over strategies, session), kept
// in memory beside the transition index so that a decision reads no LMDB page for its neighbours.
// Derived from the records like the FAISS index: built from them, saved in the transition
// snapshot, compared with them on load (spot checks) and by Check() (every row).
// Thread-safety: none; Memory guards it with the index mutex.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "htam/schema/htg_generated.h"

namespace htam::memory {

class TransitionTable {
 public:
  // History entries kept per row (the newest ones): enough for history_length up to this.
  static constexpr int kHistory = 8;

  // With sessions false (memory.continuation_weight 0, the default) the table keeps no per-session
  // speedups and FutureGain answers 0: nothing reads them then. Clear and Deserialize keep it.
  explicit TransitionTable(bool sessions = false) : sessions_(sessions) {}

  struct Row {
    uint64_t session_id = 0;
    uint64_t learned_strategy_id = 0;
    uint32_t direction_id = 0;
    uint32_t step = 0;  // the step's index in its session
    float speedup_before = 0, speedup_after = 0;
    uint32_t strategies_at = 0;  // offset into the strategy pool
    uint16_t strategies = 0;     // credited strategy ids named by the record
    uint8_t status = 0;          // fb::OutcomeStatus
    uint8_t backend = 0;         // index into backends()
    uint8_t history_size = 0;    // valid entries of history (newest last)
    uint8_t flags = 0;           // kPresent | kKeyOk | kFallback | kVerified | kVouched | kNoChange
    uint16_t passed = 0;         // passed-over strategy ids, in the pool after the credited ones
    uint32_t history[kHistory] = {};
  };
  static constexpr uint8_t kPresent = 1;   // a record with this id exists
  static constexpr uint8_t kKeyOk = 2;     // its key has the index dimension
  static constexpr uint8_t kFallback = 4;  // facts do not fit a row: read the record instead
  static constexpr uint8_t kVerified = 8;  // evaluated by htamd's gate
  static constexpr uint8_t kVouched = 16;  // client-reported by a vouched client
  static constexpr uint8_t kNoChange = 32;  // Ok inside the timing spread: gain counts 0
  // The step's log gain as the policy counts it (RecordGain of its record).
  static double Gain(const Row& row);

  // Adds (or replaces) the row of record r. Rows are indexed by id (ids are dense).
  void Add(const fb::TransitionRecord& r, size_t key_dim);
  // The row of `id`, or nullptr when none was added.
  const Row* Find(uint64_t id) const;
  // Credited strategy ids of a row (as the record names them, without the learned one).
  const uint64_t* Strategies(const Row& row) const { return pool_.data() + row.strategies_at; }
  // Strategies the step passed over (as the record names them).
  const uint64_t* PassedOver(const Row& row) const {
    return pool_.data() + row.strategies_at + row.strategies;
  }
  std::string_view Backend(const Row& row) const { return backends_[row.backend]; }
  // The strategy a learned strategy was learned as: the first strategy credited by the step that
  // created (or was merged into) it; 0 when no row says. Lets the policy treat a learned
  // strategy and the one the agent said it applied as one.
  uint64_t Parent(uint64_t strategy) const {
    auto it = parent_.find(strategy);
    return it == parent_.end() ? 0 : it->second;
  }
  // What a successful step enabled: log(the best speedup its session reached in the `horizon`
  // steps after it / its own speedup after), 0 when none was faster or the step did not succeed.
  // Read from the session's later rows, so a step's value grows as its session goes on. 0 in a
  // table that keeps no sessions.
  double FutureGain(const Row& row, int horizon) const;
  // "" when the row holds exactly the record's facts; otherwise what differs.
  std::string Compare(const fb::TransitionRecord& r, size_t key_dim) const;

  size_t rows() const { return present_; }
  uint64_t max_id() const { return rows_.size(); }
  size_t bytes() const;
  void Clear();

  // A self-describing byte image (format, counts, rows, pool, backends) and its inverse;
  // Corruption when the bytes do not parse.
  std::string Serialize() const;
  static Status Deserialize(std::string_view bytes, TransitionTable* out);

 private:
  void Fill(const fb::TransitionRecord& r, size_t key_dim, Row* row);  // interns into this table
  std::vector<Row> rows_;                                              // rows_[id - 1]
  std::vector<uint64_t> pool_;                                         // strategy ids
  std::vector<std::string> backends_;
  std::unordered_map<uint64_t, uint64_t> parent_;  // learned strategy -> Parent(); from the rows
  // session -> speedup after each of its steps that succeeded (0 for the others), by step index;
  // from the rows, and only when sessions_.
  bool sessions_;
  std::unordered_map<uint64_t, std::vector<float>> session_after_;
  void NoteSession(const Row& row);
  size_t present_ = 0;
  void NoteParent(const Row& row);
};

}  // namespace htam::memory
