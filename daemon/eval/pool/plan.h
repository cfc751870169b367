// The pool's decisions, as a pure function of what it sees: the scheduler's queues and workers
// (scheduler/fleet.h) and the cluster's list of the pool's jobs. Which worker jobs to submit (for
// which backend and arch), which idle workers to drain and then cancel, which jobs to cancel
// (pending with nothing to serve, or running without their worker ever connecting).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "daemon/eval/pool/fleet.h"

namespace htam::pool {

// One of the pool's jobs as the cluster reports it.
struct ClusterJob {
  std::string id;
  enum class State { kPending, kRunning, kEnding } state = State::kPending;
  std::string backend, arch;  // from the job's comment (htam:backend[/arch])
  int64_t running_ms = 0;     // how long the pool has seen it running (0 while pending)
};

struct PlanOptions {
  std::set<std::string> backends;  // pool.backends
  int max_jobs = 4;                // pool.max_jobs
  int queued_per_job = 2;          // pool.queued_per_job
  int64_t idle_ms = 300000;        // pool.idle_s
  int64_t start_timeout_ms = 600000;  // pool.start_timeout_s
  std::string job_name;            // pool.job_name: worker names are <job_name>-<job id>
};

struct Submit {
  std::string backend, arch;
};

struct Cancel {
  std::string id, why;
};

struct Plan {
  std::vector<Submit> submit;
  std::vector<Cancel> cancel;
  // Idle workers of pool jobs: drain (FleetView::Drain), cancel the job once the drain says idle.
  std::vector<std::pair<std::string, std::string>> drain;  // worker name, job id
};

// The worker name a job's htam-worker registers with.
std::string WorkerName(const std::string& job_name, const std::string& job_id);

// `quiet_ms`: per backend, how long nothing of it has been queued (absent = something is).
Plan MakePlan(const PlanOptions& options, const FleetSnapshot& fleet,
              const std::vector<ClusterJob>& jobs, const std::map<std::string, int64_t>& quiet_ms);

}  // namespace htam::pool
