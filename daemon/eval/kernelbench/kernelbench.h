// Golden data of KernelBench tasks (task.json names a problem file: "kernelbench": "problem.py").
// PyTorch never runs in this process: the inputs (get_inputs() under torch.manual_seed(seed)), the
// model's parameters and buffers (named as in its state_dict) and the reference outputs come from
// `/usr/bin/python3 tools/kernelbench/kb_helper.py golden ...`, a subprocess, and are cached on
// disk under <cache>/<task key>/<device>/seed_<seed>.bin (task key = sha256 of task.json and of the
// problem file), with the PyTorch baseline (eager, torch.compile where it works) in baseline.json.
// The golden run times eager only; torch.compile (up to minutes) is measured afterwards by a
// detached process that no verdict waits for (one per cache directory at a time: compile.lock),
// whose timing repetitions hold <cache>/timing.lock exclusive, never while a verifier times
// (timing_lock.h).
// The file format is kb_helper.py's docstring. Every error is a Status naming what went wrong
// (the helper's own "kernelbench: ..." line for a malformed problem file).
// The cache is bounded (GoldenOptions::cache_bytes, eval.kernelbench_cache_mb): beyond it the
// least recently used entries (<task key>/<device>, used = Prepare'd) are evicted. A disk too full
// for this job's golden data fails this job (InfraError naming the cache), nothing else.
// ModelNew candidates keep no golden tensors here (kb_candidate.h): only their baseline.json.
// Thread-safety: a KernelBenchGolden is used by one thread. Several processes may share a cache:
// files are written to a temporary name and renamed; an entry's users hold
// <cache>/<task key>.<device>.lock shared from Prepare until they are destroyed, and eviction
// takes it exclusive without waiting (an entry in use is never removed); missing golden data is
// computed by one process at a time per entry (<task key>.<device>.fill, exclusive), the others
// wait and find it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "daemon/eval/gate/task_spec.h"
#include "daemon/eval/gate/tensor_data.h"

namespace htam {

struct GoldenOptions {
  std::string python = "/usr/bin/python3";
  std::string helper;     // "" = $HTAM_KERNELBENCH_HELPER, else share/htam/kernelbench/kb_helper.py
  std::string cache_dir;  // required
  std::string lock_dir;   // of the host-wide timing.lock (gate.h DeviceLockDir); "" = cache_dir
  // The device's turns (timing_lock.h DeviceLock): the helper holds them exclusive around its
  // timing loops only, waiting at most device_lock_wait_s; "" = none (a caller that holds a turn
  // of its own around the helper's run).
  std::string device_lock;
  double device_lock_wait_s = 600;
  std::string device = "cpu";  // PyTorch device: "cpu" or "cuda"
  double timeout_s = 600;      // one helper run (import of torch + every missing seed), and
                               // the background torch.compile measurement (killed at it)
  int reps = 30;               // baseline timing
  int warmup = 3;
  uint64_t flush_bytes = 8u << 20;
  uint64_t cache_bytes = 0;  // the cache's bound; 0 = none
};

struct GoldenCase {
  std::vector<HostTensor> inputs;  // task.inputs order: get_inputs() then state_dict entries
  std::vector<HostTensor> outputs;
};

struct TorchBaseline {
  double eager_us = 0, eager_spread_us = 0;
  double compile_us = 0;         // 0 when torch.compile was unavailable or failed (see note)
  bool compile_pending = false;  // torch.compile being measured in the background (see note)
  std::string note;
  std::string eager_note;  // the eager figure timed without the device to itself: why
};

class KernelBenchGolden {
 public:
  KernelBenchGolden(const TaskSpec& task, GoldenOptions options);
  // Releases the entry and evicts what exceeds the cache's bound (this entry too, last).
  ~KernelBenchGolden();
  KernelBenchGolden(const KernelBenchGolden&) = delete;
  KernelBenchGolden& operator=(const KernelBenchGolden&) = delete;

  // Makes sure every seed of `seeds` and `time_seeds` is cached, and the baseline when
  // `with_baseline` (timed over the `time_seeds` input sets); one helper run computes whatever is
  // missing, the baseline's eager figure only (baseline.json says torch.compile is pending).
  // Nothing runs when everything is on disk.
  Status Prepare(const std::vector<uint64_t>& seeds, const std::vector<uint64_t>& time_seeds,
                 bool with_baseline);
  // The baseline alone (no golden file): what a ModelNew job keeps on disk.
  Status PrepareBaseline(const std::vector<uint64_t>& time_seeds);
  // While baseline.json says torch.compile is pending and no process measures it (compile.lock
  // free: a measurement that died holds nothing), starts a detached process that measures it
  // over the `time_seeds` input sets and rewrites baseline.json, and returns at once; its failure
  // only changes the note. Called after the candidate is timed; its timing waits for timing.lock,
  // which verifiers hold shared while they time, so that later candidates' timings are not
  // disturbed either.
  // Returns whether it started one.
  // memory_fd: the job's device-memory reservation (timing_lock.h MemoryReservation::fd), which
  // the measurement holds while it runs, so that later jobs do not count on memory it uses; -1 =
  // none.
  bool MeasureCompileInBackground(const std::vector<uint64_t>& time_seeds, int memory_fd = -1);
  // One seed's tensors, checked against the task (names, dtypes, shapes, byte counts).
  Result<GoldenCase> Load(uint64_t seed) const;
  Result<TorchBaseline> Baseline() const;
  // baseline.json is on disk and was timed in the precision a candidate runs in ("precision":
  // "fp32", TF32 off: kb_helper.py BASELINE_PRECISION); one without it is timed again.
  bool HasCurrentBaseline() const;

  int helper_runs() const { return helper_runs_; }
  const std::string& dir() const { return dir_; }

 private:
  // --device-lock FILE --device-lock-wait S for the helper's timing runs; none without a lock.
  std::vector<std::string> DeviceLockArgs() const;
  Status RunHelper(const std::vector<uint64_t>& seeds, const std::vector<uint64_t>& time_seeds,
                   bool with_baseline);

  Status Use();  // the entry's lock (shared) for this object's life
  Status Fill(const std::vector<uint64_t>& seeds, const std::vector<uint64_t>& time_seeds,
              bool with_baseline);

  const TaskSpec& task_;
  GoldenOptions opt_;
  std::string dir_, lock_path_;
  int lock_fd_ = -1;
  Status init_;
  int helper_runs_ = 0;
};

// Removes the least recently used entries of the golden cache `root` (<key>/<device> folders)
// that nobody uses until it holds at most `limit` bytes; `also_dir` is considered last. Returns
// the bytes it holds afterwards.
uint64_t EvictGoldenCache(const std::string& root, uint64_t limit, const std::string& also_dir);

// Reads one golden file (no check against a task). Exposed for tests and tools.
Status ReadGoldenFile(const std::string& path, GoldenCase* out);

// The helper script used when GoldenOptions::helper is empty.
std::string DefaultKernelBenchHelper();

}  // namespace htam
