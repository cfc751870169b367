// htamd's worker pool: evaluation workers as jobs of the cluster's own scheduler (Slurm). Every
// pool.interval_ms it reads the scheduler's queues and workers (scheduler/fleet.h) and the
// cluster's list of its jobs, submits worker jobs for backends whose evaluations wait with no
// device to serve them (sized by pool.partition, pool.gres, pool.account, pool.time_limit per
// backend and arch), drains and cancels workers idle for pool.idle_s, and cancels jobs that
// never connect. A job that ends for any reason (idle, scancel, preemption, time limit) takes no
// evaluation with it: its worker says goodbye on SIGTERM or falls silent, and the scheduler
// requeues what it ran. Workers authenticate with a CURVE key pair the pool keeps in
// pool.work_dir/keys (mode 0700, the key 0600): the job script holds only its path.
// Thread-safety: Start/Stop from one thread; the loop runs on a thread of its own; the status
// source may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "base/status.h"
#include "daemon/config/config.h"
#include "daemon/eval/pool/kind_map.h"
#include "daemon/eval/pool/plan.h"
#include "daemon/eval/pool/slurm.h"
#include "daemon/eval/pool/fleet.h"

namespace htam::pool {

// All fields default from the `pool` section of the configuration table (options.inc).
struct PoolOptions {
  std::string manager;              // pool.manager: "" = off, "slurm"
  PlanOptions plan;                 // backends, max_jobs, queued_per_job, idle, start timeout
  int interval_ms = 2000;           // pool.interval_ms
  int submit_retry_s = 60;          // pool.submit_retry_s
  bool cancel_on_exit = true;       // pool.cancel_on_exit
  std::string work_dir;             // pool.work_dir (resolved: <data_dir>/pool when empty)
  std::string connect;              // pool.connect (resolved from worker.endpoint when empty)
  std::string worker_command;       // pool.worker_command (resolved: beside htamd when empty)
  std::string worker_config;        // pool.worker_config
  std::string worker_data_dir;      // pool.worker_data_dir
  std::string partition, gres, account, time_limit, sbatch_args;  // KindMap texts
  int cpus_per_job = 2, mem_mb = 16384;
  SlurmOptions slurm;               // sbatch, squeue, scancel, job_name, command timeout
  bool curve = false;                   // worker.curve: hand workers a key pair
  std::string server_secret_key_file;   // server.curve_secret_key_file (its public half goes out)

  // InvalidArgument naming the option for a bad value (unknown manager, no worker.endpoint, a
  // malformed per-backend map, max_jobs < 1).
  static Result<PoolOptions> FromConfig(const Config& config);
};

class Pool {
 public:
  // Off (null) when pool.manager is empty. Otherwise checks the options, creates pool.work_dir
  // with keys/ (0700) and logs/ (0700), the worker key pair (kept across restarts, so that
  // adopted jobs still authenticate) and server.pub, and writes the job script.
  static Result<std::unique_ptr<Pool>> Create(const PoolOptions& options,
                                              std::unique_ptr<ClusterManager> cluster);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // The public key the worker jobs present ("" without CURVE): allow it on the worker endpoint.
  const std::string& worker_public_key() const { return worker_public_key_; }
  // Starts the loop over `fleet` (the scheduler), which must outlive Stop().
  void Start(FleetView* fleet);
  // Ends the loop; with pool.cancel_on_exit, cancels every job of the pool.
  void Stop();
  // "pool_*: value" lines for the "# workers" status section.
  std::string StatusText();

 private:
  Pool(PoolOptions o, std::unique_ptr<ClusterManager> c) : opt_(std::move(o)), cluster_(std::move(c)) {}
  Status Prepare();
  void Loop();
  void Tick();
  void SubmitOne(const Submit& s);
  // Jobs that left the cluster's list: one whose worker never connected pauses submissions.
  void NoteEndedJobs(const std::vector<ClusterJob>& jobs, const FleetSnapshot& fleet,
                     int64_t now);

  PoolOptions opt_;
  std::unique_ptr<ClusterManager> cluster_;
  KindMap partition_, gres_, account_, time_limit_, sbatch_args_;
  std::string script_path_, logs_dir_, worker_public_key_;
  FleetView* fleet_ = nullptr;
  std::thread thread_;
  std::mutex wait_mu_;
  std::condition_variable wake_;
  bool stop_ = false;  // guarded by wait_mu_

  // Loop state (loop thread only).
  std::map<std::string, int64_t> running_since_;  // job id -> first seen running
  std::map<std::string, int64_t> last_demand_;    // backend -> last time something was queued
  std::map<std::string, bool> known_;             // listed job id -> its worker connected once
  std::set<std::string> cancelled_by_pool_;       // ids the pool itself cancelled
  int64_t retry_after_ms_ = 0;
  std::string last_list_error_;

  // Shown by StatusText.
  std::mutex status_mu_;
  std::vector<ClusterJob> jobs_;                  // guarded by status_mu_
  std::set<std::string> connected_;               // job ids whose worker is registered
  uint64_t submitted_ = 0, submit_failures_ = 0, cancelled_idle_ = 0, cancelled_other_ = 0;
  std::string last_error_;
};

// The pool of a daemon's configuration: null when pool.manager is empty (a Slurm pool otherwise).
Result<std::unique_ptr<Pool>> CreatePool(const Config& config);

}  // namespace htam::pool
