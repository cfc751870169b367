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
#include "htam/schema/job_generated.h"
#include "htam/schema/job_result.h"
#include "htam/schema/protocol_generated.h"

namespace htam::config {
struct Eval;
}  // namespace htam::config

namespace htam::eval {

// The gate settings a job carries to its worker, from the configuration's eval section (one
// mapping for htamd's workers and htam-eval --in-process): eval.seed 0 draws a seed base;
// eval.kernelbench_helper "" takes $HTAM_KERNELBENCH_HELPER (read here: a sandboxed worker starts
// with a cleared environment). kernelbench_build_cache is the caller's.
fb::GateSpecT GateSpecFromConfig(const config::Eval& e);

// One candidate to evaluate on one backend: the schema's job (schema/job.fbs JobSpec, whose
// comments say what each field means) plus what never travels, the progress callback. The daemon
// fills job_id, task_dir (configs/tasks/<name>), backend, arch, language, source, session_id,
// context, profile and candidate_hash (optional: "" = the evaluator computes the key once and the
// worker frame carries it to the gate); the other JobSpec fields belong to the carriers (worker
// frames, remote protocol), which fill them on their own copy.
struct EvalJob : fb::JobSpecT {
  EvalJob() = default;
  explicit EvalJob(fb::JobSpecT spec) : fb::JobSpecT(std::move(spec)) {}

  // Optional: told each stage as it begins ("running" with the device's name when a device takes
  // the job, then the worker's stages: "compile candidate", "verify (seen shape #1)", "time
  // candidate", ...). Called on an evaluator thread; must not block. Jobs on remote workers
  // report no stages (their result still comes through `done`).
  std::function<void(uint64_t job_id, const std::string& stage, const std::string& message)>
      on_stage;
  // The evaluator's own: the job's second try, alone (GateSpec.kernelbench_alone), after its
  // first ran out of device memory beside other jobs (JobResult.retry_alone).
  bool kernelbench_alone = false;
};

// The outcome of one job: the schema's JobResult (schema/job.fbs, whose comments say what each
// field means), the same object the gate filled (daemon/eval/gate/gate.h GateResult) with the
// worker's and the evaluator's fields added. Its profile is read through fb::ProfileOf
// (htam/schema/job_result.h). The carrier fields (runner_clean, runner_retired, attempt) mean
// something only to their carrier (worker frames, remote protocol); nothing else reads them.
using EvalResult = fb::JobResultT;

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

// The one language check of a job: a job whose language is set (and not "kernelbench", checked
// against its task by CheckKernelBenchLanguage) must be the language `takes` of the backend's
// plugin (its description's); InvalidArgument "backend 'B' takes T, not L" otherwise. htamd's
// scheduler and the Evaluator both decide through it, with the language the plugin itself
// declares (Evaluator::BackendLanguage, a remote worker's register message), so they cannot
// disagree.
Status CheckLanguage(const std::string& backend, const std::string& takes,
                     const std::string& language);

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
  // The language the plugin of `backend` takes (its description's: "cpp", "cuda", ...); "" when
  // no device of that backend is served here or the language is not known.
  virtual std::string BackendLanguage(const std::string& /*backend*/) { return ""; }
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
