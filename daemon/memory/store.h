// The LMDB layer of the memory: one environment, every named database opened once, RAII
// transactions, big-endian keys, map growth on MDB_MAP_FULL (grow and retry, no txn open).
// Thread-safety: Store is safe for concurrent use (its two locks named where they are declared and
// checked by clang -Wthread-safety). A Txn belongs to one thread at a time; read transactions may
// run in parallel with each other and with the single write transaction.
#pragma once

#include <lmdb.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/thread_annotations.h"

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
  // Aborts an uncommitted transaction, then gives up its hold of the store's map lock (taken
  // by Store::HandOver, which the analysis cannot follow here).
  ~Txn() NO_THREAD_SAFETY_ANALYSIS;

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
  // Takes over the shared hold of map_lock (Store::resize_mu_) its caller made before beginning
  // txn, and gives it up when it ends.
  Txn(Store* store, MDB_txn* txn, bool read_only, SharedMutex* map_lock);
  // A database the store lacks (Store::absent) and this transaction has not created.
  bool Absent(Db db) const;
  MDB_dbi Dbi(Db db) const;
  Status Create(Db db);  // creates an absent database in this (write) transaction
  Store* store_;
  MDB_txn* txn_;
  bool read_only_;
  // Store::resize_mu_, held shared from the transaction's begin to its end (null once moved from).
  SharedMutex* map_lock_;
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

  Result<Txn> BeginRead() EXCLUDES(resize_mu_);
  // Runs fn inside one write transaction and commits it (synced to disk before returning). On
  // MDB_MAP_FULL the transaction is aborted, the map grown with no transaction open, and fn run
  // again from the start: fn must not keep side effects outside the transaction. With commit
  // false the transaction is aborted after fn succeeded (a dry run sees its own writes, keeps
  // none).
  Status Write(const std::function<Status(Txn&)>& fn, bool commit = true)
      EXCLUDES(write_mu_, resize_mu_);

  // Forces data to disk (for environments opened without sync).
  Status Sync();
  // Consistent, compacted copy of the environment into an existing empty directory.
  Status Backup(const std::string& dir) EXCLUDES(resize_mu_);
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
  int grow_count() const { return grow_count_.load(); }

 private:
  Store() = default;
  // One attempt to begin a transaction. On success *txn holds resize_mu_ shared until it ends.
  // On MDB_MAP_RESIZED (another process grew the map) the new size has been adopted: try again.
  int TryBegin(unsigned flags, std::optional<Txn>* txn) EXCLUDES(resize_mu_);
  // Gives the caller's shared hold of resize_mu_ to a transaction just begun, which releases it
  // when it ends (Txn::~Txn). The analysis cannot follow a hold that moves with a Txn: to it the
  // caller's hold ends here. This hand-over and that release are the two unchecked places.
  Txn HandOver(MDB_txn* txn, bool read_only) RELEASE_SHARED(resize_mu_) NO_THREAD_SAFETY_ANALYSIS;
  // The environment calls that depend on the map's size. A transaction begins, and a copy reads,
  // with the size fixed (resize_mu_ held shared); the size changes only with no transaction of
  // this environment open (resize_mu_ held exclusively: every Txn holds it shared).
  int BeginLmdbTxn(unsigned flags, MDB_txn** txn) REQUIRES_SHARED(resize_mu_);
  int CopyEnv(const std::string& dir) REQUIRES_SHARED(resize_mu_);
  int SetMapSize(size_t bytes) REQUIRES(resize_mu_);  // 0: adopt the size on disk
  // MDB_MAP_RESIZED seen: adopts the size another process gave the map.
  void AdoptGrownMap() EXCLUDES(resize_mu_);
  // A compacted copy, started again when another process grew the map as it began.
  int CopyAdoptingMapGrowth(const std::string& dir) EXCLUDES(resize_mu_);
  Status Grow() REQUIRES(write_mu_) EXCLUDES(resize_mu_);

  // Set by Open, before the store is shared, and never changed after.
  MDB_env* env_ = nullptr;
  std::array<MDB_dbi, static_cast<int>(Db::kCount)> dbis_{};
  std::array<bool, static_cast<int>(Db::kCount)> absent_{};
  std::string dir_;
  bool read_only_ = false;
  size_t max_map_bytes_ = 0;

  std::atomic<int> grow_count_{0};  // written by Grow (write_mu_ held), read by INFO
  // One write transaction at a time, so a full map is grown once, by the writer that found it
  // full, and no writer waits inside LMDB for the write lock while holding resize_mu_ shared.
  Mutex write_mu_ ACQUIRED_BEFORE(resize_mu_);
  // Shared by every open transaction (and a backup's copy); exclusive to resize the map.
  SharedMutex resize_mu_;
};

// LMDB error code -> Status.
Status LmdbStatus(int rc, std::string_view what);

}  // namespace htam::memory
