// LMDB-backed durable job queue. See journal.h.
#include "daemon/scheduler/journal.h"

#include <sys/stat.h>

#include "daemon/scheduler/wire.h"

namespace htam::scheduler {
namespace {

constexpr size_t kMapBytes = size_t(1) << 30;  // sparse: only what is queued is used

Status LmdbError(const char* what, int rc) {
  return Status::IOError(std::string("job queue: ") + what + ": " + mdb_strerror(rc));
}

std::string Key(uint64_t id) {  // big-endian: scans come out in job id order
  std::string k(8, '\0');
  for (int i = 7; i >= 0; --i, id >>= 8) k[size_t(i)] = char(id & 0xff);
  return k;
}

// Aborts the transaction unless committed.
struct Txn {
  MDB_txn* txn = nullptr;
  ~Txn() {
    if (txn) mdb_txn_abort(txn);
  }
  int Commit() {
    int rc = mdb_txn_commit(txn);
    txn = nullptr;
    return rc;
  }
};

}  // namespace

Result<std::unique_ptr<Journal>> Journal::Open(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::IOError("cannot create " + dir + ": " + strerror(errno));
  MDB_env* env = nullptr;
  int rc = mdb_env_create(&env);
  if (rc != 0) return LmdbError("create", rc);
  std::unique_ptr<Journal> j(new Journal(env));
  if ((rc = mdb_env_set_mapsize(env, kMapBytes)) != 0) return LmdbError("mapsize", rc);
  if ((rc = mdb_env_open(env, dir.c_str(), MDB_NOTLS, 0644)) != 0)
    return LmdbError(("open " + dir).c_str(), rc);
  Txn t;
  if ((rc = mdb_txn_begin(env, nullptr, 0, &t.txn)) != 0) return LmdbError("begin", rc);
  if ((rc = mdb_dbi_open(t.txn, nullptr, 0, &j->dbi_)) != 0) return LmdbError("dbi", rc);
  if ((rc = t.Commit()) != 0) return LmdbError("commit", rc);
  return j;
}

Journal::~Journal() {
  mdb_env_close(env_);
}

Status Journal::Write(uint64_t job_id, const std::string* value) {
  std::string k = Key(job_id);
  MDB_val key{k.size(), k.data()};
  Txn t;
  int rc = mdb_txn_begin(env_, nullptr, 0, &t.txn);
  if (rc != 0) return LmdbError("begin", rc);
  if (value) {
    MDB_val val{value->size(), const_cast<char*>(value->data())};
    rc = mdb_put(t.txn, dbi_, &key, &val, 0);
  } else {
    rc = mdb_del(t.txn, dbi_, &key, nullptr);
    if (rc == MDB_NOTFOUND) return Status::OK();
  }
  if (rc != 0) return LmdbError(value ? "put" : "del", rc);
  if ((rc = t.Commit()) != 0) return LmdbError("commit", rc);
  return Status::OK();
}

Status Journal::Put(const eval::EvalJob& job) {
  std::string v = JobToJournal(job).dump();
  return Write(job.job_id, &v);
}

Status Journal::Erase(uint64_t job_id) {
  return Write(job_id, nullptr);
}

Result<std::vector<eval::EvalJob>> Journal::List(size_t* bad) {
  *bad = 0;
  std::vector<eval::EvalJob> out;
  Txn t;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &t.txn);
  if (rc != 0) return LmdbError("begin", rc);
  MDB_cursor* cur = nullptr;
  if ((rc = mdb_cursor_open(t.txn, dbi_, &cur)) != 0) return LmdbError("cursor", rc);
  MDB_val key, val;
  for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
    std::string text(static_cast<const char*>(val.mv_data), val.mv_size);
    auto parsed = nlohmann::json::parse(text, nullptr, false);
    auto job = parsed.is_discarded() ? Result<eval::EvalJob>(Status::Corruption("not JSON"))
                                     : JobFromJournal(parsed);
    if (job.ok())
      out.push_back(std::move(*job));
    else
      ++*bad;
  }
  mdb_cursor_close(cur);
  return out;
}

}  // namespace htam::scheduler
