// Compiling ahead: while a device verifies and times candidate N, candidates N+1..N+k of its queue
// are compiled by sandboxed compile-only processes on the host's other cores, so that the runner
// of each finds its build in a cache instead of compiling it on the device's time.
//
// The cache is a directory runners read by content key but can neither list nor write:
//   - a compile-only process (htam-eval-worker --split --compile-only,
//     verifier/eval_worker_main.cc) compiles in a runner of its own, with the same hidden view, user and seccomp filter as a candidate's
//     runner and no device; its plugin's cache is a fresh staging directory;
//   - afterwards this class moves the ONE entry the compile left there (cpu-<key>.so,
//     cuda/<key>/...) into the cache and, when htamd is root, seals it (root-owned, read-only;
//     the cache and its subdirectories mode 0711: searchable, not listable); a staging directory
//     with more than one entry is discarded;
//   - a runner opens the cache with its plugin's own key (source, flags, compiler version, ABI),
//     so an entry is only ever found by the source it was built from; on a miss the plugin
//     compiles into the runner's own directory (a cache it may not write is read only).
// Nothing here decides a verdict: a compile that fails ahead fails again in the runner, with the
// runner's diagnostics; a job that reaches a device before its compile started is compiled by
// its runner as before.
// A task's reference is compiled ahead too (EnqueueReference), once, before the candidates queued
// after its first job: by a compile-only worker WITHOUT a runner, into the verifiers' own cache
// (`verifier_cache_dir`, hidden from every runner), where the first verifier of that task finds it
// instead of compiling it on the device's time. It is the task's trusted code from the tasks
// folder, never a candidate's, and never enters the runners' cache.
// Thread-safety: safe for concurrent use (one mutex, its members GUARDED_BY it and checked by
// clang's -Wthread-safety: ctest thread_safety_compile_ahead); Stop() before destruction joins
// the threads.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_annotations.h"
#include "daemon/eval/sandbox.h"

namespace htam::eval {

struct CompileAheadOptions {
  int threads = 1;                // compile-only processes at a time (eval.compile_ahead_threads)
  std::string cache_dir;          // the runners' read-only cache (created, mode 0711)
  std::string verifier_cache_dir;  // where references go (the workers' --cache-dir); "" = none
  std::string stage_dir;          // parent of the staging directories (created)
  double compile_timeout_s = 60;  // eval.compile_timeout_s; the process gets 30 s more to start
  int start_timeout_s = 60;       // eval.worker_start_timeout_s
  // Owner of staging directories when htamd is root and drops workers to a user (-1 = leave).
  long stage_uid = -1, stage_gid = -1;
};

class CompileAhead {
 public:
  // `argv_for(backend, stage)`: the compile-only worker's command line for `backend` with the
  // staging directory `stage`; `sandbox_for(backend)`: its sandbox (WorkerProcess::Spawn).
  using ArgvFor =
      std::function<std::vector<std::string>(const std::string& backend, const std::string& stage)>;
  using SandboxFor = std::function<SandboxOptions(const std::string& backend)>;
  // `reference_argv_for(backend)`: the command line of a compile-only worker for `backend` that
  // compiles a task's reference into the verifiers' cache (no runner, no staging directory).
  using ReferenceArgvFor = std::function<std::vector<std::string>(const std::string& backend)>;

  CompileAhead(CompileAheadOptions options, ArgvFor argv_for, SandboxFor sandbox_for,
               ReferenceArgvFor reference_argv_for = nullptr);
  ~CompileAhead();  // Stop()
  CompileAhead(const CompileAhead&) = delete;
  CompileAhead& operator=(const CompileAhead&) = delete;

  // Creates the directories and starts the threads.
  Status Start() EXCLUDES(mu_);

  // A job entered the device queue: compile its source ahead when a thread is free.
  void Enqueue(uint64_t job_id, const std::string& backend, const std::string& arch,
               const std::string& source) EXCLUDES(mu_);

  // A job of the task in `task_dir` entered the device queue: its reference for `backend` and
  // `arch` is compiled ahead, ahead of every candidate queued so far, unless it was already
  // (once per task, backend and arch in this process's life; a reference edited since is compiled
  // by its verifier, as without compiling ahead). No-op without `verifier_cache_dir`.
  void EnqueueReference(const std::string& task_dir, const std::string& backend,
                        const std::string& arch) EXCLUDES(mu_);

  // The job reached a device: whether its compile ahead has finished (successfully or not). One
  // not started yet is dropped and one under way is not waited for: either way its runner
  // compiles it as without compiling ahead, so a job on an idle device never waits for a second
  // process (and a source built before is found by the runner at once).
  bool Claim(uint64_t job_id) EXCLUDES(mu_);

  // The job's runner found its build in the cache (EvalResult::compile_cached): counted for INFO.
  void CountHit() EXCLUDES(mu_);

  // INFO lines: "compile_ahead: ...".
  std::string StatusText() EXCLUDES(mu_);

  // Stops the threads (a compile in flight is killed) and drops queued entries. Idempotent.
  void Stop() EXCLUDES(mu_);

 private:
  enum class State { kQueued, kRunning, kDone, kDropped };
  struct Entry {
    uint64_t job_id = 0;
    std::string backend, arch, source;
    std::string reference_task;  // a task's reference (EnqueueReference), else a candidate
    State state = State::kQueued;  // guarded by CompileAhead::mu_ (the rest is set before sharing)
  };

  void Loop() EXCLUDES(mu_);
  // One compile-only process for `e`; true when it compiled and its entry was published.
  bool Compile(const Entry& e, std::string* why) EXCLUDES(mu_);
  // Moves the one entry of `stage` into the cache; false (and why) otherwise.
  bool Publish(const std::string& stage, std::string* why);

  const CompileAheadOptions opt_;
  const ArgvFor argv_for_;
  const SandboxFor sandbox_for_;
  const ReferenceArgvFor reference_argv_for_;

  Mutex mu_;
  CondVar cv_;  // queue changes, stop
  std::deque<std::shared_ptr<Entry>> queue_ GUARDED_BY(mu_);
  std::map<uint64_t, std::shared_ptr<Entry>> by_job_ GUARDED_BY(mu_);  // until Claim
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t compiled_ GUARDED_BY(mu_) = 0;
  uint64_t failed_ GUARDED_BY(mu_) = 0;
  uint64_t dropped_ GUARDED_BY(mu_) = 0;
  uint64_t late_ GUARDED_BY(mu_) = 0;
  uint64_t hits_ GUARDED_BY(mu_) = 0;
  uint64_t references_ GUARDED_BY(mu_) = 0;  // references compiled ahead
  uint64_t reference_failures_ GUARDED_BY(mu_) = 0;
  std::set<std::string> references_seen_ GUARDED_BY(mu_);  // task dir | backend | arch
  uint64_t next_stage_ GUARDED_BY(mu_) = 0;
  // Started by Start; Stop takes them out under mu_ and joins them without it (they take mu_).
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
};

}  // namespace htam::eval
