// The verification gate and the timing method, shared by every backend. Runs inside the sandboxed
// worker process, driving one backend plugin on one device:
//   compile reference + candidate -> for every shape (seen, then held-out) x seed: fresh inputs,
//   poisoned outputs inside guard regions, candidate run twice BEFORE the reference, checks
//   (return code, threads left running, child processes, guards, input mutation, NaN/Inf,
//   all-zero, tolerance with bad-element budget, repeated-call and determinism) -> timing of the
//   candidate and of the reference (baseline) the same way, with outputs of timed calls verified.
// KernelBench tasks have no reference kernel: the inputs and the reference outputs of every case
// are golden data computed by PyTorch (kernelbench.h) and the baseline is PyTorch's own timing;
// every other check is the same.
// A candidate is hostile: every check produces a precise reason; held-out dims are never printed.
// Thread-safety: a Gate is used by one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backends/common/plugin_host.h"
#include "base/thread_annotations.h"
#include "daemon/eval/gate/stats.h"
#include "daemon/eval/gate/task_spec.h"
#include "daemon/eval/kernelbench/kernelbench.h"
#include "htam/schema/htg_generated.h"
#include "htam/schema/job_generated.h"
#include "htam/schema/job_result.h"

namespace htam {

class CandidateExec;  // exec.h

// The reference timings one evaluation process keeps for GateOptions::baseline_reuse_s: a worker
// that serves many candidates of one task times its reference again only when its last figure is
// older (the slow reference of a GEMM task took 1.7 s a candidate, more than the candidate's own
// verification and timing). Owned by the process that runs the gates (htam-eval-worker,
// htam-eval --in-process) and handed to each through GateOptions::baselines; keyed by everything a
// figure depends on (the gate builds the key).
// Thread-safety: safe for concurrent use.
class BaselineCache {
 public:
  // The figure kept under `key` when it is at most `max_age_s` old: true, with its age.
  bool Find(const std::string& key, double max_age_s, TimingStats* stats, double* age_s)
      EXCLUDES(mu_);
  void Keep(const std::string& key, const TimingStats& stats) EXCLUDES(mu_);

 private:
  struct Entry {
    TimingStats stats;
    std::chrono::steady_clock::time_point when;
  };
  Mutex mu_;
  std::map<std::string, Entry> entries_ GUARDED_BY(mu_);
};

// The gate's options: the job's gate settings, the schema's GateSpecT (schema/job.fbs: what a job
// carries to its worker, so that they are declared once), with the gate's defaults, plus what only
// the evaluating process sets. The defaults are the configuration table's eval.* defaults
// (daemon/config/options.inc; GateDefaults.AreTheConfigurationTablesDefaults keeps them equal),
// except where a field says.
struct GateOptions : fb::GateSpecT {
  GateOptions() {
    seeds = 3;             // random seeds per shape set
    seed_base = 1;         // mixed into every seed; the worker draws it per job
    guard_bytes = 4096;    // canary region before and after every buffer
    check_threads = true;  // threads left running after htam_kernel returns fail the run
    thread_grace_ms = 50;  // how long a new thread may take to exit after the call
    warmup_reps = 5;
    warmup_ms = 25;
    repetitions = 50;
    input_sets = 4;   // rotating input sets for timing
    flush_bytes = 0;  // 0 = backend default: the worker takes 2x the last-level cache,
    flush_max_bytes = uint64_t(64) << 20;  // at most this
    compile_timeout_s = 60;
    // compile_options: extra flags (config)
    time_baseline = true;
    // KernelBench tasks (task.json "kernelbench"): inputs, parameters and reference outputs come
    // from PyTorch in a subprocess (daemon/eval/kernelbench/kernelbench.h), cached on disk.
    golden_python = "/usr/bin/python3";
    // golden_helper: "" = DefaultKernelBenchHelper()
    golden_timeout_s = 600;
    // Every task: how long a timed phase waits for the host-wide timing lock (timing_lock.h)
    // while the background torch.compile measurement holds it; past that, it times anyway, with
    // a note.
    timing_lock_wait_s = 30;
    // KernelBench tasks: the verification seeds of a job are drawn from a pool of this many (by
    // seed_base), so that no fixed seed predicts a job's inputs; 0 = seeds 0..seeds-1.
    golden_seed_pool = 0;
    // Inputs generated and outputs compared on the device where the plugin offers it (API 1.2
    // buffer_fill / buffer_compare); false = on the host, as every backend without them.
    device_data = true;
    // Device buffers a job keeps for reuse by its later cases and timing sets (same kind and
    // size), at most this many bytes idle; 0 = every tensor allocates and frees its own
    // (eval.buffer_pool_mb).
    buffer_pool_bytes = uint64_t(4096) << 20;
    // A reference timed less than this many seconds ago (kept in `baselines`), on the same task,
    // shape, device and timing settings, is the baseline again (not timed per candidate); 0 =
    // every candidate times its baseline (eval.baseline_reuse_s).
    baseline_reuse_s = 60;
    // KernelBench candidates: the load_inline build cache the runner may write
    // (kernelbench_build_cache, "" = none); on CUDA, load_inline calls that need no PyTorch
    // headers go through nvcc alone (kb_fastpath.py; kernelbench_nvcc: the nvcc it runs, "" =
    // CUDA_HOME, PATH, /usr/local/cuda); the wall limit of the import and build, and of one trial
    // or the timing stage.
    kernelbench_fast_path = true;
    kernelbench_compile_timeout_s = 600;
    kernelbench_call_timeout_s = 60;  // not the table's: htamd passes eval.case_timeout_s
    // ModelNew candidates: memory asked of the device beyond htam's own copies of the tensors
    // (kb_candidate.h); the golden cache's bound on disk (kernelbench.h; 0 = none).
    kernelbench_memory_headroom = 1.5;
    // ModelNew candidates: stage seconds per GiB of the case's tensors made, moved, compared.
    kernelbench_s_per_gib = 5;
    // ModelNew candidates: the share of the device's memory the jobs of a cache reserve together
    // (timing_lock.h MemoryReservation; 0 = none), and the longest wait for it.
    kernelbench_memory_share = 0.9;
    device_memory_wait_s = 600;
    kernelbench_cache_bytes = uint64_t(4096) << 20;
    kernelbench_warmup_ms = 250;  // untimed calls before a ModelNew is timed, at least
    kernelbench_min_timed_ms = 200;  // timed calls of a ModelNew add up to this, at least
  }

  std::string arch;              // target arch, "" = device's
  std::string golden_cache_dir;  // "" = <backend cache dir>/kernelbench (else a /tmp folder)
  // A profiling run (under Nsight Compute): compile and load the candidate, one call on the first
  // seen shape, nothing else (no reference, no checks, no timing). Status Ok when the call ran.
  bool single_call = false;
  // Where the candidate's code runs: a runner process (exec.h's RemoteExec), not owned; null =
  // in this process. The reference and the expected outputs never leave this process.
  CandidateExec* runner = nullptr;
  // The device's index on this host: evaluations sharing the cache directory take turns on it
  // (timing_lock.h DeviceLock: shared while verifying, exclusive while timing); -1 = no turns.
  int device_index = -1;
  // Where the evaluating process keeps its reference timings, not owned; null = nothing is kept
  // (every candidate times its baseline).
  BaselineCache* baselines = nullptr;
  // The candidate's language: "" = the backend's; "kernelbench" = a ModelNew file, judged by
  // kb_candidate.h (runner required).
  std::string language;
  // The candidate's content key when the job carries one (JobSpec.candidate_hash): the result
  // names it and the source is not hashed again; "" = the gate computes it (CandidateKey of the
  // language and the source). Not used for the reference.
  std::string candidate_hash;
};

// The gate's result is the one evaluation result type, the schema's JobResultT (schema/job.fbs):
// the gate fills the verdict and its figures (status, diagnostics, candidate_hash, timing,
// baseline, compile, cases, FLOPs and bytes, speed of light, profile clocks and registers,
// KernelBench's baseline details, stage and operation times, runner_clean); the worker and the
// evaluator add theirs (job id, bottleneck and profiling run, device, arch, wall time) to the same
// object, which is what travels (daemon/eval/job_codec.h).
using GateResult = fb::JobResultT;

// The golden-data options of a KernelBench task from the gate's options: the interpreter, helper,
// cache (GateOptions::golden_cache_dir, else the backend's cache dir, else a /tmp folder), time
// limit and timing repetitions. `device` is PyTorch's ("cpu" or "cuda").
GoldenOptions MakeGoldenOptions(const GateOptions& opt, const BackendInstance& backend,
                                const std::string& device);
// That cache's root (GoldenOptions::cache_dir).
std::string GoldenCacheRoot(const GateOptions& opt, const BackendInstance& backend);
// The folder of the host-wide timing.lock and the devices' turns and memory ledgers
// (GateOptions::device_lock_dir, eval.device_lock_dir; "" = GoldenCacheRoot). Every evaluation of
// the host must name the same one: htam-eval runs without --cache each have a cache of their own.
std::string DeviceLockDir(const GateOptions& opt, const BackendInstance& backend);
// The lock file of the device's turns (timing_lock.h DeviceLock) for evaluations with these
// options: beside the host-wide timing.lock, per backend and device index; "" = no turns (no
// device index, or a one-call profiling run, which its parent's turn covers).
std::string DeviceLockPathFor(const GateOptions& opt, const BackendInstance& backend);
// The ledger of the device's reserved memory (timing_lock.h MemoryReservation) for the same
// evaluations; "" where they take no turns.
std::string DeviceMemoryPathFor(const GateOptions& opt, const BackendInstance& backend);

using ProgressFn = std::function<void(const std::string& stage)>;

class Gate {
 public:
  Gate(BackendInstance* backend, htam_device* device, const TaskSpec& task, GateOptions options);
  // Compiles, verifies and times `source`. Never throws; infrastructure failures are InfraError.
  GateResult Evaluate(const std::string& source, const ProgressFn& progress);

  // The reference alone through the same pipeline (lineage measurements, self-checks).
  GateResult EvaluateReference(const ProgressFn& progress);

 private:
  class Impl;
  BackendInstance* backend_;
  htam_device* device_;
  const TaskSpec& task_;
  GateOptions options_;
};

}  // namespace htam
