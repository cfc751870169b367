// Spawning a sandboxed worker process (fork + exec of htam-eval-worker): own process group,
// private temporary directory as cwd/HOME/TMPDIR, scrubbed environment, resource limits
// (RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NPROC, no core files), a network namespace with no
// interfaces where the host allows it, a read-only view of the file system except the temp dir
// and the compile cache (mount namespace, when permitted), a PID namespace (the worker is its
// init: every process a candidate starts dies with it), and an unprivileged uid when the
// daemon runs as root. Everything between fork and exec is async-signal-safe (the daemon is
// multi-threaded): all strings and lists are prepared before fork.
// Thread-safety: a WorkerProcess is owned by one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "daemon/eval/memory_cgroup.h"
#include "daemon/eval/frame.h"
#include "htam/schema/htg_generated.h"

namespace htam::eval {

struct SandboxOptions {
  uint64_t memory_bytes = 0;    // RLIMIT_AS; 0 = unlimited (GPU drivers reserve huge ranges)
  uint64_t cpu_seconds = 0;     // RLIMIT_CPU; 0 = unlimited
  uint64_t file_bytes = 0;      // RLIMIT_FSIZE; 0 = unlimited
  uint64_t max_processes = 0;   // RLIMIT_NPROC; 0 = unlimited (ignored by the kernel for root)
  bool isolate_network = true;  // unshare(CLONE_NEWNET), falling back to a user namespace
  bool readonly_fs = true;      // mount namespace: everything read-only but temp + writable_dirs
  bool pid_namespace = true;    // the worker as init of a PID namespace with its own /proc
                                // (root and readonly_fs only): nothing the candidate starts
                                // outlives the worker
  std::string user;             // drop to this user when running as root ("" = stay)
  bool defer_drop = false;      // the worker drops to `user` itself (--drop-uid/--drop-gid), after
                                // it started its runner with a mount view of its own
  std::string scratch_dir = "/tmp";        // parent of the private temp dir
  std::vector<std::string> writable_dirs;  // e.g. the compile cache
  std::vector<std::string> env_keep;       // names copied from the daemon's environment
  // A memory cgroup of its own under this parent (memory_cgroup.h), holding the worker and all
  // it starts from before exec, with a hard limit of host_memory_bytes; none when unset or 0.
  std::optional<CgroupParent> cgroup_parent;
  uint64_t host_memory_bytes = 0;
};

// One line per feature for logs and INFO: "network: isolated", "uid: nobody", ...
struct SandboxReport {
  bool network_isolated = false;
  bool readonly_fs = false;
  bool dropped_privileges = false;
};

class WorkerProcess {
 public:
  // argv[0] is the worker binary. The child gets the protocol socket as fd 3, stdout and stderr
  // on a pipe the parent drains (capped), stdin from /dev/null.
  static Result<std::unique_ptr<WorkerProcess>> Spawn(const std::vector<std::string>& argv,
                                                      const SandboxOptions& options);
  ~WorkerProcess();  // kills the process group, reaps, removes the temp dir

  Status Send(const nlohmann::json& frame);
  // A buffer frame: a packed JobSpec (job_codec.h).
  Status SendBuffer(const std::string& buffer);
  // Waits for the next frame until `deadline`, draining output into the capture (at most
  // `capture_cap` bytes kept). Returns: the frame; Timeout at the deadline; NotFound when the
  // worker closed its socket (exited); ResourceExhausted when output exceeded `flood_limit`.
  Result<nlohmann::json> Receive(std::chrono::steady_clock::time_point deadline, size_t capture_cap,
                                 size_t flood_limit);

  // Kills the whole process group (SIGKILL) and reaps the worker. Returns its wait status.
  int Kill();
  // Reaps after EOF, waiting up to `timeout`; kills if it does not exit. Returns the wait status.
  int Reap(std::chrono::milliseconds timeout);

  pid_t pid() const { return pid_; }
  // The worker's memory cgroup, or null (none asked for, or its creation failed).
  const MemoryCgroup* cgroup() const { return cgroup_.get(); }
  const std::string& temp_dir() const { return temp_dir_; }
  const std::string& output() const { return output_; }
  uint64_t output_total() const { return output_total_; }
  void ClearOutput() {
    output_.clear();
    output_total_ = 0;
  }

 private:
  WorkerProcess() = default;
  void DrainOutput(size_t cap);
  pid_t pid_ = -1;
  int sock_ = -1;
  int out_fd_ = -1;
  bool reaped_ = false;
  int wait_status_ = 0;
  std::string temp_dir_;
  std::string output_;
  uint64_t output_total_ = 0;
  FrameReader reader_;
  std::unique_ptr<MemoryCgroup> cgroup_;  // removed after the worker is reaped
};

// "SIGSEGV (segmentation fault)" / "exit code 3".
std::string DescribeWaitStatus(int status);

// Exit code of a worker or runner whose allocation failed under its address-space limit.
constexpr int kExitResourceLimit = 3;

// How a worker or runner process ended, as an evaluation outcome: SIGXCPU is a Timeout; SIGXFSZ,
// SIGKILL (the OOM killer) and exit kExitResourceLimit are a ResourceLimit; anything else is a
// Crash. Both ends of the evaluation classify through this one rule: the Evaluator for a worker,
// the worker for its runner.
struct ProcessEnd {
  fb::OutcomeStatus status = fb::OutcomeStatus::Crash;
  std::string message;
};
// `who` names the process in a crash message ("the worker"); `context` ends every message
// (" during compile", or ""); `memory_detail` follows "memory limit reached" (" (...)", or "").
ProcessEnd ClassifyProcessEnd(int wait_status, const std::string& who, const std::string& context,
                              const std::string& memory_detail = "");
// Removes a directory tree (best effort).
void RemoveTree(const std::string& path);

}  // namespace htam::eval
