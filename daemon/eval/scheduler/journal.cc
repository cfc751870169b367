// LMDB-backed durable job queue. See journal.h.
#include "daemon/eval/scheduler/journal.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/log.h"
#include "daemon/eval/job_codec.h"

namespace htam::scheduler {
namespace {

constexpr size_t kMapBytes = size_t(1) << 30;  // sparse: only what is queued is used

// Every failure of the queue is an IOError that says so.
Status QueueError(const Status& s) {
  return s.ok() ? s : Status::IOError("job queue: " + s.message());
}

// The entries of htamd before schema/job.fbs: one JSON object with job_id, backend, source (all
// required), arch, language, session_id, profile, task_dir (required) and context. Kept only to
// read queues written by those versions (testdata/journal_v1).
Result<eval::EvalJob> JobFromJsonEntry(std::string_view value) {
  auto j = nlohmann::json::parse(value, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::Corruption("queued job: not JSON");
  try {
    eval::EvalJob job;
    job.job_id = j.at("job_id").get<uint64_t>();
    job.backend = j.at("backend").get<std::string>();
    job.arch = j.value("arch", "");
    job.language = j.value("language", "");
    job.source = j.at("source").get<std::string>();
    job.session_id = j.value("session_id", uint64_t(0));
    job.profile = j.value("profile", false);
    job.task_dir = j.at("task_dir").get<std::string>();
    job.context = j.value("context", "");
    return job;
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("queued job: ") + e.what());
  }
}

}  // namespace

std::string JobToJournal(const eval::EvalJob& job) {
  return eval::PackJob(job);
}

Result<eval::EvalJob> JobFromJournal(std::string_view value) {
  if (!value.empty() && value[0] == '{') return JobFromJsonEntry(value);
  auto spec = eval::UnpackJob(value, "queued job");
  if (!spec.ok()) return spec.status();
  return eval::EvalJob(std::move(*spec));
}

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
  std::string v = JobToJournal(job);
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
    auto job = JobFromJournal(value);
    if (job.ok()) {
      out.push_back(std::move(*job));
    } else {
      HTAM_LOG(kWarn, "scheduler") << "job queue: an entry is skipped: " << job.status().message();
      ++*bad;
    }
    return true;
  })));
  return out;
}

}  // namespace htam::scheduler
