// Direct LMDB access for what the Memory API does not offer: a pre-flight check of data.mdb
// (truncation, meta pages) before anything maps it, the compacted hot copy of `backup`
// (mdb_env_copy2 with MDB_CP_COMPACT from a read-only environment, consistent while htamd writes)
// and the one write transaction of `import`.
// Thread-safety: RawEnv and RawTxn belong to one thread.
#pragma once

#include <lmdb.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace htam::cli {

// What the meta pages of data.mdb say. Corruption when the file is not an LMDB file, both meta
// pages are bad, or the file is shorter than the pages the newest meta page uses (truncated).
struct LmdbFileInfo {
  size_t page_size = 0;
  uint64_t last_page = 0;
  uint64_t txn_id = 0;
  uint64_t file_bytes = 0;
};
Result<LmdbFileInfo> InspectDataFile(const std::string& store_dir);

// Runs fn in a forked child and returns its Status; a child killed by a signal (LMDB faulting on a
// damaged file) becomes Corruption. fn must only touch the file system (its memory is lost).
Status RunIsolated(const std::function<Status()>& fn, const std::string& what);

// Consistent, compacted copy of the environment in store_dir into the existing empty dest_dir.
Status CopyCompact(const std::string& store_dir, const std::string& dest_dir);

class RawTxn;

class RawEnv {
 public:
  // Read-write, for import; map_bytes must hold the store after the import.
  static Result<std::unique_ptr<RawEnv>> OpenWrite(const std::string& dir, size_t map_bytes);
  // Read-only (safe beside a running htamd). Never in a process that has the store open already.
  static Result<std::unique_ptr<RawEnv>> OpenRead(const std::string& dir);
  bool read_only() const { return read_only_; }
  ~RawEnv();
  MDB_env* env() { return env_; }

 private:
  RawEnv() = default;
  MDB_env* env_ = nullptr;
  bool read_only_ = false;
};

// One transaction over named databases; in a write transaction a missing database is created,
// in a read transaction it reads as empty. Aborted unless committed.
class RawTxn {
 public:
  static Result<std::unique_ptr<RawTxn>> Begin(RawEnv* env);
  ~RawTxn();
  Status Get(const char* db, std::string_view key, std::string* value);  // NotFound when absent
  Status Put(const char* db, std::string_view key, std::string_view value);
  // Every entry whose key starts with prefix, in key order, until fn returns false.
  Status Scan(const char* db, std::string_view prefix,
              const std::function<bool(std::string_view, std::string_view)>& fn);
  Status Last(const char* db, std::string* key);  // NotFound when empty
  Status Commit();

 private:
  RawTxn() = default;
  // NotFound: the database does not exist (read transactions only).
  Result<MDB_dbi> Dbi(const char* db);
  MDB_txn* txn_ = nullptr;
  bool read_only_ = false;
};

}  // namespace htam::cli
