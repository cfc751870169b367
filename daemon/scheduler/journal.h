// The durable job queue: every job accepted by the scheduler is written (synced) to its own small
// LMDB environment in <data_dir>/queue before Submit returns, and erased once its result was handed
// over; after a restart the jobs still there are resumed. Kept apart from the memory store: it
// changes on every submission and completion, needs no schema migration, and the store's readers
// (htam CLI, backups) never see it.
// Thread-safety: safe for concurrent use (LMDB serializes writers).
#pragma once

#include <lmdb.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "daemon/eval/evaluator.h"

namespace htam::scheduler {

class Journal {
 public:
  // Opens (creates) the environment in `dir`.
  static Result<std::unique_ptr<Journal>> Open(const std::string& dir);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Records a job (replacing one with the same id); synced before it returns.
  Status Put(const eval::EvalJob& job);
  // Forgets a job; not-found is fine.
  Status Erase(uint64_t job_id);
  // Every recorded job, in job id order. Unreadable entries are skipped and counted in *bad.
  Result<std::vector<eval::EvalJob>> List(size_t* bad);

 private:
  explicit Journal(MDB_env* env) : env_(env) {}
  Status Write(uint64_t job_id, const std::string* value);
  MDB_env* env_;
  MDB_dbi dbi_ = 0;
};

}  // namespace htam::scheduler
