// The memory's named databases over the LMDB adapter (daemon/lmdb/env.h).
#include "daemon/memory/store.h"

#include <algorithm>
#include <filesystem>

#include "daemon/memory/store_file.h"

namespace htam::memory {

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
                                 "cli_origins",
                                 "session_steps"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<int>(Db::kCount));
  return kNames[static_cast<int>(db)];
}

bool IsSecondaryIndex(Db db) {
  return db == Db::kTaskSessions || db == Db::kSessionTransitions || db == Db::kDirectionStrategies;
}

bool IsOptional(Db db) {
  return IsSecondaryIndex(db) || db == Db::kOrigins || db == Db::kSessionSteps;
}

std::string KeyPair(uint64_t a, uint64_t b) {
  std::string k;
  lmdb::AppendBE(&k, a, 8);
  lmdb::AppendBE(&k, b, 8);
  return k;
}
std::string KeyEdge(uint64_t from, uint64_t to, uint32_t cluster) {
  std::string k;
  lmdb::AppendBE(&k, from, 8);
  lmdb::AppendBE(&k, to, 8);
  lmdb::AppendBE(&k, cluster, 4);
  return k;
}

// ---------------------------------------------------------------- Txn

Txn::Txn(Store* store, lmdb::Txn own) : store_(store), own_(std::move(own)), txn_(&*own_) {}

Txn::Txn(Store* store, lmdb::Txn* borrowed) : store_(store), txn_(borrowed) {}

Txn::Txn(Txn&& o) noexcept
    : store_(o.store_),
      own_(std::move(o.own_)),
      txn_(o.own_ ? &*own_ : o.txn_),
      created_(o.created_),
      created_dbis_(o.created_dbis_) {}

Txn::~Txn() = default;

bool Txn::Absent(Db db) const {
  return store_->absent(db) && !created_[static_cast<int>(db)];
}

lmdb::Db Txn::Handle(Db db) const {
  int i = static_cast<int>(db);
  return lmdb::Db{created_[i] ? created_dbis_[i] : store_->dbi(db), DbName(db)};
}

Status Txn::Create(Db db) {
  if (!Absent(db)) return Status::OK();
  if (read_only()) return Status::PermissionDenied(std::string("no database ") + DbName(db));
  // A handle of this transaction only: it lapses with an abort (a dry run), and the store that
  // was opened without creating is not written again after a commit (Store::Open).
  int i = static_cast<int>(db);
  HTAM_RETURN_IF_ERROR(txn_->OpenDb(DbName(db), /*create=*/true, &created_dbis_[i]));
  created_[i] = true;
  return Status::OK();
}

Status Txn::Get(Db db, std::string_view key, std::string_view* value) const {
  if (Absent(db)) return Status::NotFound(std::string("no such key in ") + DbName(db));
  return txn_->Get(Handle(db), key, value);
}

Status Txn::Put(Db db, std::string_view key, std::string_view value) {
  HTAM_RETURN_IF_ERROR(Create(db));
  return txn_->Put(Handle(db), key, value);
}

Status Txn::Del(Db db, std::string_view key) {
  if (Absent(db)) return Status::OK();
  return txn_->Del(Handle(db), key);
}

Status Txn::Scan(Db db, std::string_view prefix,
                 const std::function<bool(std::string_view, std::string_view)>& fn,
                 std::string_view start) const {
  if (Absent(db)) return Status::OK();
  return txn_->Scan(Handle(db), prefix, fn, start);
}

Status Txn::ScanReverse(Db db,
                        const std::function<bool(std::string_view, std::string_view)>& fn) const {
  if (Absent(db)) return Status::OK();
  return txn_->ScanReverse(Handle(db), fn);
}

Status Txn::Last(Db db, std::string_view* key, std::string_view* value) const {
  if (Absent(db)) return Status::NotFound(std::string(DbName(db)) + " is empty");
  return txn_->Last(Handle(db), key, value);
}

Status Txn::Count(Db db, size_t* n) const {
  if (Absent(db)) {
    *n = 0;
    return Status::OK();
  }
  return txn_->Count(Handle(db), n);
}

Status Txn::Clear(Db db) {
  if (Absent(db)) return Status::OK();
  return txn_->Clear(Handle(db));
}

Result<uint64_t> Txn::NextId(Db db) const {
  std::string_view key;
  Status s = Last(db, &key, nullptr);
  if (s.IsNotFound()) return uint64_t{1};
  if (!s.ok()) return s;
  return DecodeU64(key) + 1;
}

Status Txn::Commit() {
  return txn_->Commit();
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
  lmdb::EnvOptions o;
  o.name = "store";
  o.log_component = "memory";
  o.map_bytes = std::max<size_t>(map_size_mb, 1) << 20;
  o.max_map_bytes = max_map_size_mb << 20;
  o.limit_name = "memory.max_map_size_mb";
  o.read_only = read_only;
  o.sync = sync;
  // Decisions read scattered pages; readahead and fault-around would map (and count in RSS) the
  // pages around each one.
  o.read_ahead = false;
  o.max_dbs = static_cast<unsigned>(Db::kCount) + 2;
  o.max_readers = 256;
  std::unique_ptr<Store> s(new Store());
  HTAM_ASSIGN_OR_RETURN(s->env_, lmdb::Env::Open(dir, o));

  // Open (or create) every named database once, in one transaction.
  HTAM_RETURN_IF_ERROR(s->env_->OpenDatabases(create, [&](lmdb::Txn& t) -> Status {
    for (int i = 0; i < static_cast<int>(Db::kCount); ++i) {
      Status st = t.OpenDb(DbName(static_cast<Db>(i)), create, &s->dbis_[i]);
      if (st.IsNotFound() && !create && IsOptional(static_cast<Db>(i))) {
        // An older store opened without creating: the database does not exist and reads as
        // empty (Check reports a migration due for missing secondary indexes); a write
        // transaction creates it when it first writes there.
        s->dbis_[i] = 0;
        s->absent_[i] = true;
        continue;
      }
      HTAM_RETURN_IF_ERROR(st);
    }
    return Status::OK();
  }));
  return s;
}

Store::~Store() = default;

Result<Txn> Store::BeginRead() {
  HTAM_ASSIGN_OR_RETURN(lmdb::Txn t, env_->BeginRead());
  return Txn(this, std::move(t));
}

Status Store::Write(const std::function<Status(Txn&)>& fn, bool commit) {
  return env_->Write(
      [&](lmdb::Txn& raw) -> Status {
        Txn txn(this, &raw);
        return fn(txn);
      },
      commit);
}

Status Store::CopyCompact(const std::string& store_dir, const std::string& dest_dir) {
  HTAM_RETURN_IF_ERROR(InspectDataFile(store_dir).status());
  HTAM_ASSIGN_OR_RETURN(auto store, Open(store_dir, /*map_size_mb=*/1, /*max_map_size_mb=*/1,
                                         /*read_only=*/true));
  return store->env_->CopyAdoptingMapGrowth(dest_dir);
}

}  // namespace htam::memory
