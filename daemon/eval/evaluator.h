// Evaluator: the daemon's entry to candidate evaluation. It owns one worker slot per device, a
// bounded job queue, and the supervision of the sandboxed worker processes (htam-eval-worker):
// a crash, hang or runaway candidate kills only its worker, which is restarted; the job gets an
// outcome class (CompileError, Crash, Timeout, ResourceLimit, Incorrect, Nondeterministic, ...).
// Thread-safety: every public method is safe for concurrent use. Callbacks run on the evaluator's
// slot threads (one per device); they must not block for long and must not call Shutdown().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "daemon/config/config.h"
#include "htam/schema/htg_generated.h"
#include "htam/schema/protocol_generated.h"

namespace htam::eval {

// One candidate to evaluate on one backend.
struct EvalJob {
  uint64_t job_id = 0;
  std::string task_dir;     // configs/tasks/<name> (holds task.json and references)
  std::string backend;      // "cpu", "cuda", "hip"
  std::string arch;         // "" = any device of that backend; else e.g. "sm_90", "x86_64"
  std::string language;     // "" = the backend's language; else must match it ("cpp", "cuda")
  std::string source;       // the candidate's source text (hostile input)
  uint64_t session_id = 0;  // fair share between sessions (daemon/scheduler); 0 = none
  std::string context;      // opaque to evaluation: kept with a durably queued job, handed back
                            // by Recovered() after a daemon restart
  bool profile = false;     // when the candidate is Ok: its one call again under its plugin's
                            // profiler (Nsight Compute for CUDA, eval.ncu), filling profile
                            // dram/sm throughput, occupancy and bottleneck; without one a
                            // "profile unavailable" note, still Ok
  // Optional: told each stage as it begins ("running" with the device's name when a device takes
  // the job, then the worker's stages: "compile candidate", "verify (seen shape #1)", "time
  // candidate", ...). Called on an evaluator thread; must not block. Jobs on remote workers
  // report no stages (their result still comes through `done`).
  std::function<void(uint64_t job_id, const std::string& stage, const std::string& message)>
      on_stage;
};

struct EvalResult {
  uint64_t job_id = 0;
  fb::OutcomeStatus status = fb::OutcomeStatus::InfraError;
  std::string diagnostics;  // compiler output, gate failure reason, crash signal, ...
  double median_us = 0;     // candidate, per call, over `repetitions` timed calls
  double spread_us = 0;     // interquartile range
  uint32_t repetitions = 0;
  double baseline_us = 0;      // the task's reference, timed the same way in the same worker
  double speedup = 0;          // baseline_us / median_us (0 unless Ok)
  fb::ProfileT profile;        // sol_fraction, clocks, registers... (-1 where unknown)
  std::string candidate_hash;  // hex content hash of language + source
  std::string device;          // device name the job ran on
  std::string arch;            // its arch
  double wall_ms = 0;          // compile + verify + time, as seen by the evaluator
  // From the profile (EvalJob::profile): the class Nsight Compute's metrics give with the
  // eval.cuda_profile_* thresholds; Unknown when not profiled or unavailable.
  fb::Bottleneck bottleneck = fb::Bottleneck::Unknown;
  // Wall time per stage inside the worker (compile candidate, verify, time candidate, ...).
  std::vector<std::pair<std::string, double>> stage_ms;
  std::vector<std::pair<std::string, double>> op_ms;  // GateResult::op_ms
  // The candidate's build came from a cache (compiled ahead, or the same source before).
  bool compile_cached = false;
  double compile_ms = 0;
  int cases = 0;                // verification cases passed
  double flops = 0, bytes = 0;  // of the timed (first seen) shape
  // GateResult's speed-of-light figures: the time the task's bytes and FLOPs need at the device's
  // measured ceilings, the floor no honest result beats, and those ceilings (0 = none measured).
  double sol_us = 0, floor_us = 0;
  double copy_bytes_per_s = 0, fp32_flops = 0, tensor16_flops = 0;
  // KernelBench tasks: PyTorch ran for this evaluation; its torch.compile time (0 = none, the
  // note says why).
  bool golden_computed = false;
  double baseline_compile_us = 0;
  std::string baseline_note;
  // The profiling run (EvalJob::profile): its note ("ncu: Memory-bound", "profile unavailable:
  // ..."), the kernels it saw and their summed time; empty and 0 when not profiled.
  std::string profile_note;
  int profiled_kernels = 0;
  double profiled_us = 0;
};

// All fields default from the `eval` section of the configuration table (options.inc).
struct EvalOptions {
  // Directory of backend plugins (libhtam_backend_*.so). Empty = next to the worker binary's
  // ../backends/<name>/ in a build tree, then the worker's directory.
  std::string plugin_dir;
  std::string worker_path;             // htam-eval-worker; empty = found next to the running binary
  std::vector<std::string> backends;   // which plugins to start ("cpu", "cuda"); empty = all found
  std::string cache_dir;               // compile cache; empty = <data_dir>/eval-cache
  std::string scratch_dir;             // parent of the workers' private temp dirs; empty = /tmp
  std::string sdk_include_dir;         // holds htam/kernel_abi.h; empty = <source root>/sdk/include
  Config config = Config::Defaults();  // everything else (timeouts, limits, counts) from `eval.*`

  static EvalOptions FromConfig(const Config& config);
};

// Language "kernelbench" (a KernelBench ModelNew file) is for KernelBench tasks only (task.json
// "kernelbench"): InvalidArgument saying so for any other task directory.
Status CheckKernelBenchLanguage(const std::string& task_dir);

class Evaluator {
 public:
  // Finds plugins, spawns one worker per device of every backend that can run here.
  static Result<std::unique_ptr<Evaluator>> Start(const EvalOptions& options);
  virtual ~Evaluator() = default;

  // Non-blocking. `done` is called exactly once (also on Shutdown, with InfraError).
  // ResourceExhausted when the queue is full (busy); Unavailable when no worker serves
  // backend/arch; InvalidArgument for an unknown task dir or a language mismatch.
  virtual Status Submit(EvalJob job, std::function<void(EvalResult)> done) = 0;

  // Blocking convenience for tools and tests.
  virtual Result<EvalResult> Evaluate(EvalJob job) = 0;

  virtual std::vector<fb::DeviceInfoT> Devices() = 0;
  virtual std::vector<std::string> Backends() = 0;
  // INFO-style section: "# evaluation" then "key: value" lines (queue depth, jobs by class,
  // worker restarts, per-device busy/idle, sandbox features in effect).
  virtual std::string StatusText() = 0;
  // INFO-style "# workers" section (remote workers, devices, queues); "" when there is none.
  virtual std::string WorkersStatusText() { return ""; }
  // Jobs queued before a daemon restart (durable queue), each once: the owner calls Submit() for
  // them again with a callback (they keep their job_id and context and are not refused as busy).
  virtual std::vector<EvalJob> Recovered() { return {}; }
  // Stops accepting jobs, fails queued ones with InfraError, kills workers. Idempotent.
  virtual void Shutdown() = 0;
};

}  // namespace htam::eval
