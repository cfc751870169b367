// The LMDB adapter: environment, transactions, map growth and copies (see env.h).
#include "daemon/lmdb/env.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "base/log.h"

namespace htam::lmdb {
namespace {

MDB_val Val(std::string_view s) {
  return MDB_val{s.size(), const_cast<char*>(s.data())};
}
std::string_view View(const MDB_val& v) {
  return std::string_view(static_cast<const char*>(v.mv_data), v.mv_size);
}

// Closes a cursor on every path.
struct Cursor {
  MDB_cursor* c = nullptr;
  ~Cursor() {
    if (c) mdb_cursor_close(c);
  }
};

}  // namespace

// True when the file system holding `dir` has less than a few pages' room left for us.
static bool DiskNearlyFull(const std::string& dir) {
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0) return false;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize < (uint64_t{1} << 20);
}

Status LmdbStatus(int rc, std::string_view what) {
  if (rc == MDB_SUCCESS) return Status::OK();
  std::string msg = std::string(what) + ": " + mdb_strerror(rc);
  switch (rc) {
    case MDB_NOTFOUND: return Status::NotFound(msg);
    case MDB_MAP_FULL: return Status::ResourceExhausted(msg);
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_VERSION_MISMATCH: return Status::Corruption(msg);
    case EACCES:
    case EROFS: return Status::PermissionDenied(msg);
    case ENOSPC:
    case EDQUOT: return Status::ResourceExhausted("disk full: " + msg);
    default: return Status::IOError(msg);
  }
}

void AppendBE(std::string* out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
std::string KeyU64(uint64_t id) {
  std::string k;
  AppendBE(&k, id, 8);
  return k;
}
uint64_t DecodeU64(std::string_view key, size_t offset) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8 && offset + i < key.size(); ++i)
    v = (v << 8) | static_cast<unsigned char>(key[offset + i]);
  return v;
}
uint32_t DecodeU32(std::string_view key, size_t offset) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4 && offset + i < key.size(); ++i)
    v = (v << 8) | static_cast<unsigned char>(key[offset + i]);
  return v;
}

// ---------------------------------------------------------------- Txn

Txn::Txn(MDB_txn* txn, bool read_only, SharedMutex* map_lock)
    : txn_(txn), read_only_(read_only), map_lock_(map_lock) {}

Txn::Txn(Txn&& o) noexcept : txn_(o.txn_), read_only_(o.read_only_), map_lock_(o.map_lock_) {
  o.txn_ = nullptr;
  o.map_lock_ = nullptr;
}

Txn::~Txn() {
  if (txn_) mdb_txn_abort(txn_);
  if (map_lock_) map_lock_->ReaderUnlock();
}

Status Txn::Get(Db db, std::string_view key, std::string_view* value) const {
  MDB_val k = Val(key), v;
  int rc = mdb_get(txn_, db.dbi, &k, &v);
  if (rc == MDB_NOTFOUND) return Status::NotFound(std::string("no such key in ") + db.name);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, std::string("get from ") + db.name);
  *value = View(v);
  return Status::OK();
}

Status Txn::Put(Db db, std::string_view key, std::string_view value) {
  MDB_val k = Val(key), v = Val(value);
  return LmdbStatus(mdb_put(txn_, db.dbi, &k, &v, 0), std::string("put into ") + db.name);
}

Status Txn::Del(Db db, std::string_view key) {
  MDB_val k = Val(key);
  int rc = mdb_del(txn_, db.dbi, &k, nullptr);
  if (rc == MDB_NOTFOUND) return Status::OK();
  return LmdbStatus(rc, std::string("delete from ") + db.name);
}

Status Txn::Scan(Db db, std::string_view prefix,
                 const std::function<bool(std::string_view, std::string_view)>& fn,
                 std::string_view start) const {
  Cursor cur;
  int rc = mdb_cursor_open(txn_, db.dbi, &cur.c);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "cursor");
  std::string_view first = start.size() > prefix.size() ? start : prefix;
  MDB_val k = Val(first), v;
  rc = first.empty() ? mdb_cursor_get(cur.c, &k, &v, MDB_FIRST)
                     : mdb_cursor_get(cur.c, &k, &v, MDB_SET_RANGE);
  while (rc == MDB_SUCCESS) {
    std::string_view key = View(k);
    if (key.substr(0, prefix.size()) != prefix) break;
    if (!fn(key, View(v))) break;
    rc = mdb_cursor_get(cur.c, &k, &v, MDB_NEXT);
  }
  if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) return LmdbStatus(rc, "scan");
  return Status::OK();
}

Status Txn::ScanReverse(Db db,
                        const std::function<bool(std::string_view, std::string_view)>& fn) const {
  Cursor cur;
  int rc = mdb_cursor_open(txn_, db.dbi, &cur.c);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "cursor");
  MDB_val k, v;
  rc = mdb_cursor_get(cur.c, &k, &v, MDB_LAST);
  while (rc == MDB_SUCCESS) {
    if (!fn(View(k), View(v))) break;
    rc = mdb_cursor_get(cur.c, &k, &v, MDB_PREV);
  }
  if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) return LmdbStatus(rc, "reverse scan");
  return Status::OK();
}

Status Txn::Last(Db db, std::string_view* key, std::string_view* value) const {
  Cursor cur;
  int rc = mdb_cursor_open(txn_, db.dbi, &cur.c);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "cursor");
  MDB_val k, v;
  rc = mdb_cursor_get(cur.c, &k, &v, MDB_LAST);
  if (rc == MDB_NOTFOUND) return Status::NotFound(std::string(db.name) + " is empty");
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "last");
  if (key) *key = View(k);
  if (value) *value = View(v);
  return Status::OK();
}

Status Txn::Count(Db db, size_t* n) const {
  MDB_stat st;
  int rc = mdb_stat(txn_, db.dbi, &st);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "stat");
  *n = st.ms_entries;
  return Status::OK();
}

Status Txn::Clear(Db db) {
  return LmdbStatus(mdb_drop(txn_, db.dbi, 0), std::string("clear ") + db.name);
}

Status Txn::OpenDb(const char* name, bool create, MDB_dbi* dbi) {
  return LmdbStatus(mdb_dbi_open(txn_, name, create ? MDB_CREATE : 0, dbi),
                    std::string(create ? "creating database " : "opening database ") +
                        (name ? name : "(unnamed)"));
}

Status Txn::Commit() {
  if (!txn_) return Status::Internal("commit of a finished transaction");
  int rc = mdb_txn_commit(txn_);
  txn_ = nullptr;
  return LmdbStatus(rc, "commit");
}

// ---------------------------------------------------------------- Env

Result<std::unique_ptr<Env>> Env::Open(const std::string& dir, const EnvOptions& o) {
  std::unique_ptr<Env> e(new Env());
  e->dir_ = dir;
  e->o_ = o;
  int rc = mdb_env_create(&e->env_);
  if (rc) return LmdbStatus(rc, "mdb_env_create");
  if (o.max_dbs) mdb_env_set_maxdbs(e->env_, o.max_dbs);
  if (o.max_readers) mdb_env_set_maxreaders(e->env_, o.max_readers);
  rc = mdb_env_set_mapsize(e->env_, std::max<size_t>(o.map_bytes, 1));
  if (rc) return LmdbStatus(rc, "mdb_env_set_mapsize");
  // Default flags keep full durability: a commit returns after data and meta pages are synced.
  // MDB_NOTLS: read transactions are not tied to threads (the daemon's pools move work around).
  unsigned flags = MDB_NOTLS | (o.read_ahead ? 0 : MDB_NORDAHEAD) | (o.read_only ? MDB_RDONLY : 0) |
                   (o.sync ? 0 : MDB_NOSYNC);
  rc = mdb_env_open(e->env_, dir.c_str(), flags, 0644);
  if (rc) return LmdbStatus(rc, "opening LMDB " + o.name + " at " + dir);
  return e;
}

Env::~Env() {
  if (env_) mdb_env_close(env_);
}

int Env::BeginLmdbTxn(unsigned flags, MDB_txn** txn) {
  return mdb_txn_begin(env_, nullptr, flags, txn);
}

int Env::CopyEnv(const std::string& dir) {
  return mdb_env_copy2(env_, dir.c_str(), MDB_CP_COMPACT);
}

int Env::SetMapSize(size_t bytes) {
  return mdb_env_set_mapsize(env_, bytes);
}

void Env::AdoptGrownMap() {
  WriterMutexLock excl(&resize_mu_);
  SetMapSize(0);
}

Txn Env::HandOver(MDB_txn* txn, bool read_only) {
  return Txn(txn, read_only, &resize_mu_);
}

int Env::TryBegin(unsigned flags, std::optional<Txn>* txn) {
  resize_mu_.ReaderLock();
  MDB_txn* raw = nullptr;
  int rc = BeginLmdbTxn(flags, &raw);
  if (rc == MDB_SUCCESS) {
    txn->emplace(HandOver(raw, (flags & MDB_RDONLY) != 0));
    return rc;
  }
  resize_mu_.ReaderUnlock();
  // Another process (the daemon) grew the map: adopt its size with no transaction open here.
  if (rc == MDB_MAP_RESIZED) AdoptGrownMap();
  return rc;
}

Result<Txn> Env::BeginRead() {
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::optional<Txn> txn;
    int rc = TryBegin(MDB_RDONLY, &txn);
    if (rc == MDB_SUCCESS) return std::move(*txn);
    if (rc != MDB_MAP_RESIZED) return LmdbStatus(rc, "begin read");
  }
  return Status::Unavailable(o_.name + " map keeps being resized");
}

Status Env::OpenDatabases(bool write, const std::function<Status(Txn&)>& fn) {
  std::optional<Txn> txn;
  int rc = TryBegin(write ? 0 : MDB_RDONLY, &txn);
  if (rc) return LmdbStatus(rc, "begin");
  HTAM_RETURN_IF_ERROR(fn(*txn));
  return txn->Commit().WithContext("commit of database handles");
}

Status Env::Grow() {
  MDB_envinfo info;
  mdb_env_info(env_, &info);
  size_t next = info.me_mapsize * 2;
  if (next > o_.max_map_bytes) {
    if (info.me_mapsize >= o_.max_map_bytes)
      return Status::ResourceExhausted("map full: " + o_.name + " map is full at " +
                                       o_.limit_name + " (" +
                                       std::to_string(o_.max_map_bytes >> 20) + " MiB)");
    next = o_.max_map_bytes;
  }
  WriterMutexLock excl(&resize_mu_);  // waits for open read transactions
  int rc = SetMapSize(next);
  if (rc) return LmdbStatus(rc, "growing the map");
  ++grow_count_;
  HTAM_LOG(kInfo, o_.log_component) << o_.name << " map grown to " << (next >> 20) << " MiB";
  return Status::OK();
}

Status Env::Write(const std::function<Status(Txn&)>& fn, bool commit) {
  if (o_.read_only) return Status::PermissionDenied(o_.name + " opened read-only");
  MutexLock w(&write_mu_);
  for (int attempt = 0; attempt < 64; ++attempt) {
    Status s;
    {
      std::optional<Txn> txn;
      int rc = TryBegin(0, &txn);
      if (rc == MDB_MAP_RESIZED) continue;
      if (rc) return LmdbStatus(rc, "begin write");
      s = fn(*txn);
      if (s.ok() && commit) s = txn->Commit();
      // txn (and its shared hold of resize_mu_) ends here; an uncommitted one is aborted.
    }
    if (s.ok()) return s;
    // LMDB reports a write cut short by a full disk as EIO: the free space tells them apart.
    if (s.code() == Status::Code::kIOError && DiskNearlyFull(dir_))
      return Status::ResourceExhausted("disk full: " + s.message() + " (no space left in " + dir_ +
                                       ")");
    if (s.code() != Status::Code::kResourceExhausted ||
        s.message().find("MDB_MAP_FULL") == std::string::npos)
      return s;
    HTAM_RETURN_IF_ERROR(Grow());
  }
  return Status::ResourceExhausted(o_.name + " write did not fit after growing the map");
}

Status Env::Sync() {
  return LmdbStatus(mdb_env_sync(env_, 1), "sync");
}

Status Env::Backup(const std::string& dir) {
  // The copy reads through a transaction of this environment, like BeginRead: Grow() waits.
  ReaderMutexLock lock(&resize_mu_);
  return LmdbStatus(CopyEnv(dir), "backup to " + dir);
}

// MDB_MAP_RESIZED: the copy creates data.mdb exclusively, so the failed attempt's file goes.
Status Env::CopyAdoptingMapGrowth(const std::string& dir) {
  int rc = MDB_SUCCESS;
  for (int attempt = 0; attempt < 16; ++attempt) {
    {
      ReaderMutexLock lock(&resize_mu_);
      rc = CopyEnv(dir);
    }
    if (rc != MDB_MAP_RESIZED) break;
    std::error_code ec;
    std::filesystem::remove(dir + "/data.mdb", ec);
    AdoptGrownMap();
  }
  return LmdbStatus(rc, "copying " + dir_ + " to " + dir);
}

size_t Env::map_size() const {
  MDB_envinfo info;
  mdb_env_info(env_, &info);
  return info.me_mapsize;
}

size_t Env::file_size() const {
  struct stat st;
  if (stat((dir_ + "/data.mdb").c_str(), &st) != 0) return 0;
  return static_cast<size_t>(st.st_size);
}

}  // namespace htam::lmdb
