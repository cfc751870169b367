// The durable job queue: every job accepted by the scheduler is written (synced) to its own small
// LMDB environment in <data_dir>/queue before Submit returns, and erased once its result was handed
// over; after a restart the jobs still there are resumed. Kept apart from the memory store: it
// changes on every submission and completion, needs no schema migration, and the store's readers
// (htam CLI, backups) never see it. On disk: the environment's unnamed database, big-endian job id
// -> the job as a schema/job.fbs JobSpec buffer (identifier "HTJB", with task_dir and context;
// daemon/eval/job_codec.h). Entries written before the job type moved into the schema are JSON
// objects (first byte '{'): they are still read, so a queue left by an older htamd resumes, and a
// job rewritten (Put) is rewritten as a buffer. LMDB through the daemon's adapter
// (daemon/lmdb/env.h).
// Thread-safety: safe for concurrent use (the adapter serializes writers).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "daemon/eval/evaluator.h"
#include "daemon/lmdb/env.h"

namespace htam::scheduler {

// One queue entry as stored, and back (either format; Corruption naming what is wrong).
std::string JobToJournal(const eval::EvalJob& job);
Result<eval::EvalJob> JobFromJournal(std::string_view value);

class Journal {
 public:
  // Opens (creates) the environment in `dir`.
  static Result<std::unique_ptr<Journal>> Open(const std::string& dir);
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Records a job (replacing one with the same id); synced before it returns.
  Status Put(const eval::EvalJob& job);
  // Forgets a job; not-found is fine.
  Status Erase(uint64_t job_id);
  // Every recorded job, in job id order, of either format. Unreadable entries (a buffer that fails
  // the verifier, broken JSON) are skipped, logged and counted in *bad.
  Result<std::vector<eval::EvalJob>> List(size_t* bad);

 private:
  explicit Journal(std::unique_ptr<lmdb::Env> env) : env_(std::move(env)) {}
  std::unique_ptr<lmdb::Env> env_;
  lmdb::Db db_;  // the unnamed database
};

}  // namespace htam::scheduler
