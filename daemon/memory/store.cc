// The LMDB layer: environment, named databases, transactions and map growth.
#include "daemon/memory/store.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/log.h"
#include "daemon/memory/store_file.h"

namespace htam::memory {
namespace {

MDB_val Val(std::string_view s) {
  return MDB_val{s.size(), const_cast<char*>(s.data())};
}
std::string_view View(const MDB_val& v) {
  return std::string_view(static_cast<const char*>(v.mv_data), v.mv_size);
}
void PutBE(std::string* out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Closes a cursor on every path.
struct Cursor {
  MDB_cursor* c = nullptr;
  ~Cursor() {
    if (c) mdb_cursor_close(c);
  }
};

}  // namespace

const char* DbName(Db db) {
  static const char* kNames[] = {"meta",
                                 "directions",
                                 "direction_names",
                                 "strategies",
                                 "transitions",
                                 "edges",
                                 "tasks",
                                 "task_names",
                                 "candidates",
                                 "sessions",
                                 "task_sessions",
                                 "session_transitions",
                                 "direction_strategies",
                                 "cli_origins"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<int>(Db::kCount));
  return kNames[static_cast<int>(db)];
}

bool IsSecondaryIndex(Db db) {
  return db == Db::kTaskSessions || db == Db::kSessionTransitions || db == Db::kDirectionStrategies;
}

bool IsOptional(Db db) {
  return IsSecondaryIndex(db) || db == Db::kOrigins;
}

std::string KeyU64(uint64_t id) {
  std::string k;
  PutBE(&k, id, 8);
  return k;
}
std::string KeyPair(uint64_t a, uint64_t b) {
  std::string k;
  PutBE(&k, a, 8);
  PutBE(&k, b, 8);
  return k;
}
std::string KeyEdge(uint64_t from, uint64_t to, uint32_t cluster) {
  std::string k;
  PutBE(&k, from, 8);
  PutBE(&k, to, 8);
  PutBE(&k, cluster, 4);
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
    case ENOSPC: return Status::ResourceExhausted(msg);
    default: return Status::IOError(msg);
  }
}

// ---------------------------------------------------------------- Txn

Txn::Txn(Store* store, MDB_txn* txn, bool read_only, SharedMutex* map_lock)
    : store_(store), txn_(txn), read_only_(read_only), map_lock_(map_lock) {}

Txn::Txn(Txn&& o) noexcept
    : store_(o.store_),
      txn_(o.txn_),
      read_only_(o.read_only_),
      map_lock_(o.map_lock_),
      created_(o.created_),
      created_dbis_(o.created_dbis_) {
  o.txn_ = nullptr;
  o.map_lock_ = nullptr;
}

bool Txn::Absent(Db db) const {
  return store_->absent(db) && !created_[static_cast<int>(db)];
}

MDB_dbi Txn::Dbi(Db db) const {
  return created_[static_cast<int>(db)] ? created_dbis_[static_cast<int>(db)] : store_->dbi(db);
}

Status Txn::Create(Db db) {
  if (!Absent(db)) return Status::OK();
  if (read_only_) return Status::PermissionDenied(std::string("no database ") + DbName(db));
  // A handle of this transaction only: it lapses with an abort (a dry run), and the store that
  // was opened without creating is not written again after a commit (Store::Open).
  int i = static_cast<int>(db);
  HTAM_RETURN_IF_ERROR(LmdbStatus(mdb_dbi_open(txn_, DbName(db), MDB_CREATE, &created_dbis_[i]),
                                  std::string("creating database ") + DbName(db)));
  created_[i] = true;
  return Status::OK();
}

Txn::~Txn() {
  if (txn_) mdb_txn_abort(txn_);
  if (map_lock_) map_lock_->ReaderUnlock();
}

Status Txn::Get(Db db, std::string_view key, std::string_view* value) const {
  if (Absent(db)) return Status::NotFound(std::string("no such key in ") + DbName(db));
  MDB_val k = Val(key), v;
  int rc = mdb_get(txn_, Dbi(db), &k, &v);
  if (rc == MDB_NOTFOUND) return Status::NotFound(std::string("no such key in ") + DbName(db));
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, std::string("get from ") + DbName(db));
  *value = View(v);
  return Status::OK();
}

Status Txn::Put(Db db, std::string_view key, std::string_view value) {
  HTAM_RETURN_IF_ERROR(Create(db));
  MDB_val k = Val(key), v = Val(value);
  return LmdbStatus(mdb_put(txn_, Dbi(db), &k, &v, 0), std::string("put into ") + DbName(db));
}

Status Txn::Del(Db db, std::string_view key) {
  if (Absent(db)) return Status::OK();
  MDB_val k = Val(key);
  int rc = mdb_del(txn_, Dbi(db), &k, nullptr);
  if (rc == MDB_NOTFOUND) return Status::OK();
  return LmdbStatus(rc, std::string("delete from ") + DbName(db));
}

Status Txn::Scan(Db db, std::string_view prefix,
                 const std::function<bool(std::string_view, std::string_view)>& fn,
                 std::string_view start) const {
  if (Absent(db)) return Status::OK();
  Cursor cur;
  int rc = mdb_cursor_open(txn_, Dbi(db), &cur.c);
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
  if (Absent(db)) return Status::OK();
  Cursor cur;
  int rc = mdb_cursor_open(txn_, Dbi(db), &cur.c);
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
  if (Absent(db)) return Status::NotFound(std::string(DbName(db)) + " is empty");
  Cursor cur;
  int rc = mdb_cursor_open(txn_, Dbi(db), &cur.c);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "cursor");
  MDB_val k, v;
  rc = mdb_cursor_get(cur.c, &k, &v, MDB_LAST);
  if (rc == MDB_NOTFOUND) return Status::NotFound(std::string(DbName(db)) + " is empty");
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "last");
  if (key) *key = View(k);
  if (value) *value = View(v);
  return Status::OK();
}

Status Txn::Count(Db db, size_t* n) const {
  if (Absent(db)) {
    *n = 0;
    return Status::OK();
  }
  MDB_stat st;
  int rc = mdb_stat(txn_, Dbi(db), &st);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "stat");
  *n = st.ms_entries;
  return Status::OK();
}

Status Txn::Clear(Db db) {
  if (Absent(db)) return Status::OK();
  return LmdbStatus(mdb_drop(txn_, Dbi(db), 0), std::string("clear ") + DbName(db));
}

Result<uint64_t> Txn::NextId(Db db) const {
  std::string_view key;
  Status s = Last(db, &key, nullptr);
  if (s.IsNotFound()) return uint64_t{1};
  if (!s.ok()) return s;
  return DecodeU64(key) + 1;
}

Status Txn::Commit() {
  if (!txn_) return Status::Internal("commit of a finished transaction");
  int rc = mdb_txn_commit(txn_);
  txn_ = nullptr;
  return LmdbStatus(rc, "commit");
}

// ---------------------------------------------------------------- Store

Result<std::unique_ptr<Store>> Store::Open(const std::string& dir, size_t map_size_mb,
                                           size_t max_map_size_mb, bool read_only, bool sync,
                                           bool create) {
  create = create && !read_only;
  std::error_code ec;
  if (!read_only) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::IOError("cannot create store directory " + dir + ": " + ec.message());
  } else if (!std::filesystem::exists(dir + "/data.mdb", ec)) {
    return Status::NotFound("no store at " + dir);
  }
  std::unique_ptr<Store> s(new Store());
  s->dir_ = dir;
  s->read_only_ = read_only;
  s->max_map_bytes_ = max_map_size_mb << 20;
  int rc = mdb_env_create(&s->env_);
  if (rc) return LmdbStatus(rc, "mdb_env_create");
  mdb_env_set_maxdbs(s->env_, static_cast<MDB_dbi>(Db::kCount) + 2);
  mdb_env_set_maxreaders(s->env_, 256);
  size_t map = std::max<size_t>(map_size_mb, 1) << 20;
  // An existing file larger than the configured map keeps its size (LMDB takes the larger).
  rc = mdb_env_set_mapsize(s->env_, map);
  if (rc) return LmdbStatus(rc, "mdb_env_set_mapsize");
  // Default flags keep full durability: a commit returns after data and meta pages are synced.
  // MDB_NOTLS: read transactions are not tied to threads (the daemon's pools move work around).
  // MDB_NORDAHEAD: decisions read scattered pages; readahead and fault-around would map (and
  // count in RSS) the pages around each one.
  unsigned flags =
      MDB_NOTLS | MDB_NORDAHEAD | (read_only ? MDB_RDONLY : 0) | (sync ? 0 : MDB_NOSYNC);
  rc = mdb_env_open(s->env_, dir.c_str(), flags, 0644);
  if (rc) return LmdbStatus(rc, "opening LMDB store at " + dir);

  // Open (or create) every named database once, in one transaction.
  MDB_txn* txn = nullptr;
  rc = mdb_txn_begin(s->env_, nullptr, create ? 0 : MDB_RDONLY, &txn);
  if (rc) return LmdbStatus(rc, "begin");
  for (int i = 0; i < static_cast<int>(Db::kCount); ++i) {
    rc = mdb_dbi_open(txn, DbName(static_cast<Db>(i)), create ? MDB_CREATE : 0, &s->dbis_[i]);
    if (rc == MDB_NOTFOUND && !create && IsOptional(static_cast<Db>(i))) {
      // An older store opened without creating: the database does not exist and reads as empty
      // (Check reports a migration due for missing secondary indexes); a write transaction
      // creates it when it first writes there.
      s->dbis_[i] = 0;
      s->absent_[i] = true;
      continue;
    }
    if (rc) {
      mdb_txn_abort(txn);
      return LmdbStatus(rc, std::string("opening database ") + DbName(static_cast<Db>(i)));
    }
  }
  rc = mdb_txn_commit(txn);
  if (rc) return LmdbStatus(rc, "commit of database handles");
  return s;
}

Store::~Store() {
  if (env_) mdb_env_close(env_);
}

int Store::BeginLmdbTxn(unsigned flags, MDB_txn** txn) {
  return mdb_txn_begin(env_, nullptr, flags, txn);
}

int Store::CopyEnv(const std::string& dir) {
  return mdb_env_copy2(env_, dir.c_str(), MDB_CP_COMPACT);
}

int Store::SetMapSize(size_t bytes) {
  return mdb_env_set_mapsize(env_, bytes);
}

void Store::AdoptGrownMap() {
  WriterMutexLock excl(&resize_mu_);
  SetMapSize(0);
}

Txn Store::HandOver(MDB_txn* txn, bool read_only) {
  return Txn(this, txn, read_only, &resize_mu_);
}

int Store::TryBegin(unsigned flags, std::optional<Txn>* txn) {
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

Result<Txn> Store::BeginRead() {
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::optional<Txn> txn;
    int rc = TryBegin(MDB_RDONLY, &txn);
    if (rc == MDB_SUCCESS) return std::move(*txn);
    if (rc != MDB_MAP_RESIZED) return LmdbStatus(rc, "begin read");
  }
  return Status::Unavailable("store map keeps being resized");
}

Status Store::Grow() {
  MDB_envinfo info;
  mdb_env_info(env_, &info);
  size_t next = info.me_mapsize * 2;
  if (next > max_map_bytes_) {
    if (info.me_mapsize >= max_map_bytes_)
      return Status::ResourceExhausted("store map is full at memory.max_map_size_mb (" +
                                       std::to_string(max_map_bytes_ >> 20) + " MiB)");
    next = max_map_bytes_;
  }
  WriterMutexLock excl(&resize_mu_);  // waits for open read transactions
  int rc = SetMapSize(next);
  if (rc) return LmdbStatus(rc, "growing the map");
  ++grow_count_;
  HTAM_LOG(kInfo, "memory") << "store map grown to " << (next >> 20) << " MiB";
  return Status::OK();
}

Status Store::Write(const std::function<Status(Txn&)>& fn, bool commit) {
  if (read_only_) return Status::PermissionDenied("store opened read-only");
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
    if (s.code() != Status::Code::kResourceExhausted ||
        s.message().find("MDB_MAP_FULL") == std::string::npos)
      return s;
    HTAM_RETURN_IF_ERROR(Grow());
  }
  return Status::ResourceExhausted("store write did not fit after growing the map");
}

Status Store::Sync() {
  return LmdbStatus(mdb_env_sync(env_, 1), "sync");
}

// mdb_env_copy2 into `dir`, started again when another process grew the map as the copy began
// (MDB_MAP_RESIZED: this environment adopts the new size, and the data.mdb the failed attempt
// created goes, since the copy creates it exclusively).
int Store::CopyAdoptingMapGrowth(const std::string& dir) {
  int rc = MDB_SUCCESS;
  for (int attempt = 0; attempt < 16; ++attempt) {
    {
      ReaderMutexLock lock(&resize_mu_);
      rc = CopyEnv(dir);
    }
    if (rc != MDB_MAP_RESIZED) return rc;
    std::error_code ec;
    std::filesystem::remove(dir + "/data.mdb", ec);
    AdoptGrownMap();
  }
  return rc;
}

Status Store::Backup(const std::string& dir) {
  // The copy reads through a transaction of this environment, like BeginRead: Grow() waits.
  ReaderMutexLock lock(&resize_mu_);
  return LmdbStatus(CopyEnv(dir), "backup to " + dir);
}

Status Store::CopyCompact(const std::string& store_dir, const std::string& dest_dir) {
  HTAM_RETURN_IF_ERROR(InspectDataFile(store_dir).status());
  HTAM_ASSIGN_OR_RETURN(auto store, Open(store_dir, /*map_size_mb=*/1, /*max_map_size_mb=*/1,
                                         /*read_only=*/true));
  return LmdbStatus(store->CopyAdoptingMapGrowth(dest_dir),
                    "copying " + store_dir + " to " + dest_dir);
}

size_t Store::map_size() const {
  MDB_envinfo info;
  mdb_env_info(env_, &info);
  return info.me_mapsize;
}

size_t Store::file_size() const {
  struct stat st;
  if (stat((dir_ + "/data.mdb").c_str(), &st) != 0) return 0;
  return static_cast<size_t>(st.st_size);
}

}  // namespace htam::memory
