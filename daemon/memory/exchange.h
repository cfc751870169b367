// Moving experience between stores: every record of a store with the stable origin of its sessions
// and transitions (export), and the merge of such a set into another store (import). The memory
// owns both ends: names, ids, origins and transition keys are written only here. The file format
// around the records (JSON Lines, docs/cli.md "export and import") is the CLI's.
//
// Merging: directions by name, tasks by name (baselines united), strategies by direction and name
// or near-duplicate embedding, candidates by content hash, sessions and transitions by origin;
// ids are remapped; statistics, edges and indexes are then rebuilt from the records. Importing
// the same set again changes nothing.
// Thread-safety: plain functions. ExportStore is safe while htamd writes the store; ImportStore
// needs the store to itself (the caller holds the data directory's lock).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "htam/schema/htg_generated.h"

namespace htam::memory {

namespace fb = ::htam::fb;

// A record with the stable key of where it was first recorded: "<store id>/<id>" (StoreId),
// kept across re-exports.
template <typename T>
struct WithOrigin {
  std::string origin;
  T record;
};

// What an export holds; the input of an import.
struct ExchangeSet {
  // The exporting store. On import only the embedder (model, dim) is read: a new store is
  // created with it, and strategy embeddings of another embedder are recomputed or dropped.
  fb::StoreMetaT meta;
  std::string store_id;  // StoreId(meta)
  std::vector<fb::DirectionT> directions;
  std::vector<fb::TaskT> tasks;
  std::vector<fb::StrategyT> strategies;           // merged ones included, with their embeddings
  std::vector<WithOrigin<fb::SessionT>> sessions;  // by id
  std::vector<WithOrigin<fb::TransitionRecordT>> transitions;  // by id, with their keys
  // Those a transition, a session's best or a strategy's example names, by hash.
  std::vector<fb::CandidateT> candidates;
  // Derived from the records: exported for readers, never imported (rebuilt instead).
  std::vector<fb::TransitionEdgeT> edges;
};

// The stable id of a store: its creation time in 16 hex digits.
std::string StoreId(const fb::StoreMetaT& meta);

// Every record of the store in store_dir, read-only (safe while htamd runs). Transitions are read
// first, so that every session, strategy and candidate they name is in the later reads (records
// are never deleted); a session may then count a step more than the set holds (import recounts).
Result<ExchangeSet> ExportStore(const std::string& store_dir);

struct ImportOptions {
  double merge_threshold = 0.85;  // cosine similarity: an imported strategy merges into a local one
  bool dry_run = false;           // check and report; write nothing (the store must exist)
  std::string site;               // provenance site of imported strategies that name none
};
struct ImportReport {
  std::map<std::string, size_t> added, merged, skipped;  // per record type
  std::vector<std::string> notes;
};
// Merges set into the store at store_dir (created with the set's embedder and no seed when
// missing) in one transaction, then rebuilds what is derived from the records. The caller holds
// the data directory's lock (no daemon).
Result<ImportReport> ImportStore(const std::string& store_dir, ExchangeSet set,
                                 const ImportOptions& o);

}  // namespace htam::memory
