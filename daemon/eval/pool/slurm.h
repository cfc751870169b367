// The pool's cluster scheduler: submit a worker job, list the pool's jobs, cancel one. Slurm
// through its command-line tools (sbatch --parsable, squeue, scancel), run with a time limit and
// their output parsed; their errors come back as Status with the tool's own message.
// Thread-safety: Slurm holds no state of its own; calls may overlap.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "daemon/eval/pool/plan.h"

namespace htam::pool {

// A worker job to submit: the script (no secret in it, only paths) and its resources.
struct JobRequest {
  std::string backend, arch;
  std::string script_path;          // the batch script; its one argument is `backend`
  std::string work_dir, output;     // --chdir, --output
  std::string partition, gres, account, time_limit;  // "" = not passed
  int cpus = 0, mem_mb = 0;                          // 0 = not passed
  std::string extra_args;           // space-separated, passed as they are
};

class ClusterManager {
 public:
  virtual ~ClusterManager() = default;
  // The new job's id.
  virtual Result<std::string> Submit(const JobRequest& request) = 0;
  // The pool's jobs that the cluster still lists (pending, running, ending).
  virtual Result<std::vector<ClusterJob>> List() = 0;
  virtual Status Cancel(const std::string& id) = 0;
};

struct SlurmOptions {
  std::string sbatch = "sbatch", squeue = "squeue", scancel = "scancel";
  std::string job_name;    // pool.job_name: --job-name of every job; squeue --name
  double timeout_s = 30;   // pool.command_timeout_s
};

class Slurm : public ClusterManager {
 public:
  explicit Slurm(SlurmOptions options) : opt_(std::move(options)) {}
  Result<std::string> Submit(const JobRequest& request) override;
  Result<std::vector<ClusterJob>> List() override;
  Status Cancel(const std::string& id) override;

  // sbatch's argument vector for a request (tests read it).
  std::vector<std::string> SubmitArgs(const JobRequest& request) const;
  // squeue's output ("%i|%T|%k" lines) as jobs; lines not of the pool are skipped.
  static std::vector<ClusterJob> ParseList(const std::string& output);

 private:
  SlurmOptions opt_;
};

}  // namespace htam::pool
