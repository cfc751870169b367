// LMDB-backed durable job queue. See journal.h.
#include "daemon/scheduler/journal.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "daemon/scheduler/wire.h"

namespace htam::scheduler {
namespace {

constexpr size_t kMapBytes = size_t(1) << 30;  // sparse: only what is queued is used

// Every failure of the queue is an IOError that says so.
Status QueueError(const Status& s) {
  return s.ok() ? s : Status::IOError("job queue: " + s.message());
}

}  // namespace

Result<std::unique_ptr<Journal>> Journal::Open(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::IOError("cannot create " + dir + ": " + strerror(errno));
  lmdb::EnvOptions o;
  o.name = "job queue";
  o.log_component = "scheduler";
  o.map_bytes = kMapBytes;
  o.max_map_bytes = kMapBytes;  // never grows
  o.limit_name = "its fixed size";
  auto env = lmdb::Env::Open(dir, o);
  if (!env.ok()) return QueueError(env.status());
  std::unique_ptr<Journal> j(new Journal(std::move(*env)));
  j->db_.name = "job queue";
  HTAM_RETURN_IF_ERROR(QueueError(j->env_->OpenDatabases(/*write=*/true, [&](lmdb::Txn& t) {
    return t.OpenDb(nullptr, /*create=*/false, &j->db_.dbi);
  })));
  return j;
}

Status Journal::Put(const eval::EvalJob& job) {
  std::string v = JobToJournal(job).dump();
  return QueueError(
      env_->Write([&](lmdb::Txn& t) { return t.Put(db_, lmdb::KeyU64(job.job_id), v); }));
}

Status Journal::Erase(uint64_t job_id) {
  return QueueError(env_->Write([&](lmdb::Txn& t) { return t.Del(db_, lmdb::KeyU64(job_id)); }));
}

Result<std::vector<eval::EvalJob>> Journal::List(size_t* bad) {
  *bad = 0;
  std::vector<eval::EvalJob> out;
  auto t = env_->BeginRead();
  if (!t.ok()) return QueueError(t.status());
  HTAM_RETURN_IF_ERROR(QueueError(t->Scan(db_, "", [&](std::string_view, std::string_view value) {
    auto parsed = nlohmann::json::parse(value, nullptr, false);
    auto job = parsed.is_discarded() ? Result<eval::EvalJob>(Status::Corruption("not JSON"))
                                     : JobFromJournal(parsed);
    if (job.ok())
      out.push_back(std::move(*job));
    else
      ++*bad;
    return true;
  })));
  return out;
}

}  // namespace htam::scheduler
