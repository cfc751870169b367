// The LMDB adapter of the daemon's environments (the memory's store, the scheduler's job queue):
// an environment opened once with its options, database handles opened once, RAII transactions,
// big-endian id keys, map growth on MDB_MAP_FULL (grow and retry, no transaction open), adoption
// of a map another process grew (MDB_MAP_RESIZED), compacted copies, LMDB codes as Status.
// Thread-safety: Env is safe for concurrent use (its two locks named where they are declared and
// checked by clang -Wthread-safety). A Txn belongs to one thread at a time; read transactions may
// run in parallel with each other and with the single write transaction.
#pragma once

#include <lmdb.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/thread_annotations.h"

namespace htam::lmdb {

// LMDB error code -> Status (NotFound, ResourceExhausted for a full map or disk, Corruption,
// PermissionDenied, else IOError); the message names `what` and LMDB's text. A full disk's
// message starts "disk full: ", a map at its limit "map full: " (Env::Write).
Status LmdbStatus(int rc, std::string_view what);

// Big-endian key encoding: scans come out in numeric order.
void AppendBE(std::string* out, uint64_t v, int bytes);
std::string KeyU64(uint64_t id);
uint64_t DecodeU64(std::string_view key, size_t offset = 0);
uint32_t DecodeU32(std::string_view key, size_t offset);

// A database handle (Txn::OpenDb) and the name its errors give.
struct Db {
  MDB_dbi dbi = 0;
  const char* name = "";
};

struct EnvOptions {
  std::string name = "store";  // what messages and logs call the environment
  std::string log_component = "lmdb";
  size_t map_bytes = size_t(1) << 20;  // map size at open (an existing larger file keeps its size)
  // Write grows the map (doubling) up to this on MDB_MAP_FULL; at or below map_bytes it never
  // grows. limit_name names the setting in the error of a full map.
  size_t max_map_bytes = 0;
  std::string limit_name;
  bool read_only = false;
  bool sync = true;          // false: MDB_NOSYNC, commits reach the disk at Sync()
  bool read_ahead = true;    // false: MDB_NORDAHEAD (scattered reads: map only the pages read)
  unsigned max_dbs = 0;      // named databases (0: only the unnamed one)
  unsigned max_readers = 0;  // 0: LMDB's default
};

class Env;

// A transaction; the destructor aborts one that was not committed. Values returned by Get and
// Scan point into the map and are valid only until the transaction ends: copy them before.
class Txn {
 public:
  Txn(Txn&&) noexcept;
  Txn& operator=(Txn&&) = delete;
  // Aborts an uncommitted transaction, then gives up its hold of the environment's map lock
  // (taken by Env::HandOver, which the analysis cannot follow here).
  ~Txn() NO_THREAD_SAFETY_ANALYSIS;

  // NotFound when the key is absent.
  Status Get(Db db, std::string_view key, std::string_view* value) const;
  Status Put(Db db, std::string_view key, std::string_view value);
  Status Del(Db db, std::string_view key);  // OK when already absent
  // Calls fn for every key >= start that begins with prefix, in order, until fn returns false.
  Status Scan(Db db, std::string_view prefix,
              const std::function<bool(std::string_view key, std::string_view value)>& fn,
              std::string_view start = {}) const;
  // Like Scan over every key, newest (largest key) first.
  Status ScanReverse(Db db,
                     const std::function<bool(std::string_view, std::string_view)>& fn) const;
  // Largest key; NotFound when the database is empty.
  Status Last(Db db, std::string_view* key, std::string_view* value) const;
  Status Count(Db db, size_t* n) const;
  Status Clear(Db db);  // removes every entry
  // The handle of database `name` (null: the unnamed one), created when create (in a write
  // transaction); NotFound when it does not exist and create is false. A handle opened in a
  // transaction that aborts lapses with it.
  Status OpenDb(const char* name, bool create, MDB_dbi* dbi);
  Status Commit();
  bool read_only() const { return read_only_; }
  // The committed state this transaction reads (a read transaction: the id of the last commit
  // it sees; every commit makes a new one), or, in a write transaction, the id it will commit.
  uint64_t id() const { return mdb_txn_id(txn_); }

 private:
  friend class Env;
  // Takes over the shared hold of map_lock (Env::resize_mu_) its caller made before beginning
  // txn, and gives it up when it ends.
  Txn(MDB_txn* txn, bool read_only, SharedMutex* map_lock);
  MDB_txn* txn_;
  bool read_only_;
  // Env::resize_mu_, held shared from the transaction's begin to its end (null once moved from).
  SharedMutex* map_lock_;
};

class Env {
 public:
  // Opens the environment in the existing directory `dir`.
  static Result<std::unique_ptr<Env>> Open(const std::string& dir, const EnvOptions& o);
  ~Env();
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

  Result<Txn> BeginRead() EXCLUDES(resize_mu_);
  // Runs fn inside one write transaction and commits it (synced to disk before returning unless
  // opened without sync). On MDB_MAP_FULL the transaction is aborted, the map grown with no
  // transaction open, and fn run again from the start: fn must not keep side effects outside the
  // transaction. With commit false the transaction is aborted after fn succeeded (a dry run sees
  // its own writes, keeps none).
  Status Write(const std::function<Status(Txn&)>& fn, bool commit = true)
      EXCLUDES(write_mu_, resize_mu_);
  // Runs fn in one transaction (a write one when write) and commits it: where the handles of
  // the databases are opened once (Txn::OpenDb), at open.
  Status OpenDatabases(bool write, const std::function<Status(Txn&)>& fn) EXCLUDES(resize_mu_);

  // Forces data to disk (for environments opened without sync).
  Status Sync();
  // Consistent, compacted copy of the environment into an existing empty directory.
  Status Backup(const std::string& dir) EXCLUDES(resize_mu_);
  // The same, started again when another process grew the map as the copy began (this
  // environment adopts the new size; the partial copy goes).
  Status CopyAdoptingMapGrowth(const std::string& dir) EXCLUDES(resize_mu_);

  const std::string& dir() const { return dir_; }
  bool read_only() const { return o_.read_only; }
  size_t map_size() const;
  size_t file_size() const;
  int grow_count() const { return grow_count_.load(); }

 private:
  Env() = default;
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
  Status Grow() REQUIRES(write_mu_) EXCLUDES(resize_mu_);

  // Set by Open, before the environment is shared, and never changed after.
  MDB_env* env_ = nullptr;
  std::string dir_;
  EnvOptions o_;

  std::atomic<int> grow_count_{0};  // written by Grow (write_mu_ held), read by status pages
  // One write transaction at a time, so a full map is grown once, by the writer that found it
  // full, and no writer waits inside LMDB for the write lock while holding resize_mu_ shared.
  Mutex write_mu_ ACQUIRED_BEFORE(resize_mu_);
  // Shared by every open transaction (and a backup's copy); exclusive to resize the map.
  SharedMutex resize_mu_;
};

}  // namespace htam::lmdb
