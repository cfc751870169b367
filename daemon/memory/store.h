// The LMDB layer of the memory: one environment, every named database opened once, RAII
// transactions, big-endian keys, map growth on MDB_MAP_FULL (grow and retry, no txn open).
// Thread-safety: Store is safe for concurrent use. A Txn belongs to one thread at a time; read
// transactions may run in parallel with each other and with the single write transaction.
#pragma once

#include <lmdb.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>

#include "base/status.h"

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
  kCount
};
const char* DbName(Db db);
// Databases written since schema version 2 (the secondary indexes).
bool IsSecondaryIndex(Db db);
// Databases an older store may lack: opened read-only (or without creating), it reads them as
// empty.
bool IsOptional(Db db);

// Key encoding helpers.
std::string KeyU64(uint64_t id);
std::string KeyPair(uint64_t a, uint64_t b);
std::string KeyEdge(uint64_t from, uint64_t to, uint32_t cluster);
uint64_t DecodeU64(std::string_view key, size_t offset = 0);
uint32_t DecodeU32(std::string_view key, size_t offset);

class Store;

// A transaction; the destructor aborts one that was not committed. Values returned by Get and
// Scan point into the map and are valid only until the transaction ends: copy them before.
class Txn {
 public:
  Txn(Txn&&) noexcept;
  Txn& operator=(Txn&&) = delete;
  ~Txn();

  // NotFound when the key is absent.
  Status Get(Db db, std::string_view key, std::string_view* value) const;
  Status Put(Db db, std::string_view key, std::string_view value);
  Status Del(Db db, std::string_view key);  // OK when already absent
  // Calls fn for every key >= start that begins with prefix, in order, until fn returns false.
  Status Scan(Db db, std::string_view prefix,
              const std::function<bool(std::string_view key, std::string_view value)>& fn,
              std::string_view start = {}) const;
  // Like Scan, newest (largest key) first.
  Status ScanReverse(Db db,
                     const std::function<bool(std::string_view, std::string_view)>& fn) const;
  // Largest key; NotFound when the database is empty.
  Status Last(Db db, std::string_view* key, std::string_view* value) const;
  Status Count(Db db, size_t* n) const;
  Status Clear(Db db);  // removes every entry
  // Next id for an id-keyed database: last key + 1 (ids start at 1).
  Result<uint64_t> NextId(Db db) const;
  Status Commit();
  bool read_only() const { return read_only_; }

 private:
  friend class Store;
  Txn(Store* store, MDB_txn* txn, bool read_only, std::shared_lock<std::shared_mutex> lock);
  // A database the store lacks (Store::absent) and this transaction has not created.
  bool Absent(Db db) const;
  MDB_dbi Dbi(Db db) const;
  Status Create(Db db);  // creates an absent database in this (write) transaction
  Store* store_;
  MDB_txn* txn_;
  bool read_only_;
  std::shared_lock<std::shared_mutex> lock_;
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
  Status Sync();
  // Consistent, compacted copy of the environment into an existing empty directory.
  Status Backup(const std::string& dir);
  // The same from the store in store_dir, opened read-only for the copy (safe while htamd
  // writes); the file is checked first (store_file.h), so a truncated one is refused.
  static Status CopyCompact(const std::string& store_dir, const std::string& dest_dir);

  MDB_dbi dbi(Db db) const { return dbis_[static_cast<int>(db)]; }
  // A database an older store lacks (opened read-only or without creating, IsOptional).
  bool absent(Db db) const { return absent_[static_cast<int>(db)]; }
  const std::string& dir() const { return dir_; }
  bool read_only() const { return read_only_; }
  size_t map_size() const;
  size_t file_size() const;
  int grow_count() const { return grow_count_; }

 private:
  Store() = default;
  Status Grow();
  MDB_env* env_ = nullptr;
  std::array<MDB_dbi, static_cast<int>(Db::kCount)> dbis_{};
  std::array<bool, static_cast<int>(Db::kCount)> absent_{};
  std::string dir_;
  bool read_only_ = false;
  size_t max_map_bytes_ = 0;
  int grow_count_ = 0;
  std::mutex write_mu_;          // one write transaction at a time
  std::shared_mutex resize_mu_;  // shared by every open txn; exclusive to resize the map
};

// LMDB error code -> Status.
Status LmdbStatus(int rc, std::string_view what);

}  // namespace htam::memory
