// The LMDB layer of the memory: its named databases, each opened once, over the daemon's LMDB
// adapter (daemon/lmdb/env.h: RAII transactions, map growth on MDB_MAP_FULL, copies); databases
// an older store lacks read as empty; big-endian keys.
// Thread-safety: Store is safe for concurrent use (its locks are the environment's, annotated and
// checked by clang -Wthread-safety there). A Txn belongs to one thread at a time; read
// transactions may run in parallel with each other and with the single write transaction.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "daemon/lmdb/env.h"

namespace htam::memory {

// Named databases. Keys are big-endian ids (ordered scans) unless noted.
enum class Db : int {
  kMeta = 0,             // "store" -> StoreMeta
  kDirections,           // id -> Direction
  kDirectionNames,       // name -> id
  kStrategies,           // id -> Strategy
  kTransitions,          // id -> TransitionRecord
  kEdges,                // (from, to, cluster u32) -> TransitionEdge
  kTasks,                // id -> Task
  kTaskNames,            // name -> id
  kCandidates,           // candidate hash -> Candidate
  kSessions,             // id -> Session
  kTaskSessions,         // (task, session) -> ""          secondary index
  kSessionTransitions,   // (session, transition) -> ""    secondary index
  kDirectionStrategies,  // (direction, strategy) -> ""    secondary index
  // Where imported sessions and transitions were first recorded (memory/exchange.h):
  // "o\0<kind>\0<origin>" -> local id, "r\0<kind>\0<local id>" -> origin. Named "cli_origins"
  // on disk: the CLI kept it before the memory owned imports, and stores written then keep it.
  kOrigins,
  // (session, step u32) -> the step's direction, outcome and whether it raised the session best
  // (memory/session_steps.h); since schema version 4.
  kSessionSteps,
  kCount
};
const char* DbName(Db db);
// Databases written since schema version 2 (the secondary indexes).
bool IsSecondaryIndex(Db db);
// Databases an older store may lack: opened read-only (or without creating), it reads them as
// empty.
bool IsOptional(Db db);

// Key encoding helpers (big-endian: ordered scans).
using lmdb::DecodeU32;
using lmdb::DecodeU64;
using lmdb::KeyU64;
std::string KeyPair(uint64_t a, uint64_t b);
std::string KeyEdge(uint64_t from, uint64_t to, uint32_t cluster);

class Store;

// A transaction on the memory's databases: lmdb::Txn (daemon/lmdb/env.h says what each call
// does, and that values point into the map until the transaction ends) with the database named
// by Db. A database the store lacks reads as empty; the first write there creates it.
class Txn {
 public:
  Txn(Txn&&) noexcept;
  Txn& operator=(Txn&&) = delete;
  ~Txn();

  Status Get(Db db, std::string_view key, std::string_view* value) const;
  Status Put(Db db, std::string_view key, std::string_view value);
  Status Del(Db db, std::string_view key);
  Status Scan(Db db, std::string_view prefix,
              const std::function<bool(std::string_view key, std::string_view value)>& fn,
              std::string_view start = {}) const;
  Status ScanReverse(Db db,
                     const std::function<bool(std::string_view, std::string_view)>& fn) const;
  Status Last(Db db, std::string_view* key, std::string_view* value) const;
  Status Count(Db db, size_t* n) const;
  Status Clear(Db db);
  // Next id for an id-keyed database: last key + 1 (ids start at 1).
  Result<uint64_t> NextId(Db db) const;
  Status Commit();
  bool read_only() const { return txn_->read_only(); }

 private:
  friend class Store;
  // A read transaction it owns, or the write transaction of Store::Write it borrows.
  Txn(Store* store, lmdb::Txn own);
  Txn(Store* store, lmdb::Txn* borrowed);
  // A database the store lacks (Store::absent) and this transaction has not created.
  bool Absent(Db db) const;
  lmdb::Db Handle(Db db) const;
  Status Create(Db db);  // creates an absent database in this (write) transaction
  Store* store_;
  std::optional<lmdb::Txn> own_;
  lmdb::Txn* txn_;  // &*own_ or the borrowed one
  std::array<bool, static_cast<int>(Db::kCount)> created_{};
  std::array<MDB_dbi, static_cast<int>(Db::kCount)> created_dbis_{};
};

class Store {
 public:
  // Opens (creating when allowed) the environment in `dir` and every named database. With
  // create false (a dry run that must leave the file as it was) an optional database the store
  // lacks is not created at open: it reads as empty, and a write transaction that writes there
  // creates it for itself.
  static Result<std::unique_ptr<Store>> Open(const std::string& dir, size_t map_size_mb,
                                             size_t max_map_size_mb, bool read_only,
                                             bool sync = true, bool create = true);
  ~Store();

  Result<Txn> BeginRead();
  // Runs fn inside one write transaction and commits it (synced to disk before returning). On
  // MDB_MAP_FULL the transaction is aborted, the map grown with no transaction open, and fn run
  // again from the start: fn must not keep side effects outside the transaction. With commit
  // false the transaction is aborted after fn succeeded (a dry run sees its own writes, keeps
  // none).
  Status Write(const std::function<Status(Txn&)>& fn, bool commit = true);

  // Forces data to disk (for environments opened without sync).
  Status Sync() { return env_->Sync(); }
  // Consistent, compacted copy of the environment into an existing empty directory.
  Status Backup(const std::string& dir) { return env_->Backup(dir); }
  // The same from the store in store_dir, opened read-only for the copy (safe while htamd
  // writes); the file is checked first (store_file.h), so a truncated one is refused.
  static Status CopyCompact(const std::string& store_dir, const std::string& dest_dir);

  MDB_dbi dbi(Db db) const { return dbis_[static_cast<int>(db)]; }
  // A database an older store lacks (opened read-only or without creating, IsOptional).
  bool absent(Db db) const { return absent_[static_cast<int>(db)]; }
  const std::string& dir() const { return env_->dir(); }
  bool read_only() const { return env_->read_only(); }
  size_t map_size() const { return env_->map_size(); }
  size_t file_size() const { return env_->file_size(); }
  int grow_count() const { return env_->grow_count(); }

 private:
  Store() = default;
  // Set by Open, before the store is shared, and never changed after.
  std::unique_ptr<lmdb::Env> env_;
  std::array<MDB_dbi, static_cast<int>(Db::kCount)> dbis_{};
  std::array<bool, static_cast<int>(Db::kCount)> absent_{};
};

using lmdb::LmdbStatus;  // LMDB error code -> Status
}  // namespace htam::memory
