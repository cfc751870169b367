// KernelBench candidates (language "kernelbench"): a Python file defining `class ModelNew`, run
// with KernelBench's semantics by the runner and judged by the verifier (docs/backends.md,
// "KernelBench candidates (ModelNew)").
//
// Who holds what:
//   verifier (the worker; EvaluateKernelBenchCandidate): the task, its problem file and the seeds
//     of the job; it runs kb_static.py on the source first, then asks the runner for outputs and
//     hands them (the runner's memfd) to its own child tools/kernelbench/kb_golden.py, which
//     generates each seed's inputs and reference outputs on the device (from the problem's own
//     get_inputs and Model; never written to a file), and compares there (atol/rtol by dtype,
//     NaN/Inf, all-zero, shapes), checks the inputs the runner generated and whether the call
//     changed them; the verifier checks the PyTorch functions the forward used (task policy).
//     A task whose tensors do not fit in the device's free memory (the host's on the CPU
//     backend; eval.kernelbench_memory_headroom) is refused, InfraError, saying so. Only PyTorch
//     eager's baseline (baseline.json) is kept on disk (kernelbench.h).
//   runner (KernelBenchHarness, inside the runner's sandbox): starts the configured Python with
//     tools/kernelbench/kb_runner.py as its child, which inherits the runner's mount view,
//     unprivileged user and seccomp filter, and relays kb_* requests to it. The harness gets
//     seeds, the problem's source (its Model removed) and the candidate; never a golden output.
// Thread-safety: a KernelBenchHarness is used by one thread; EvaluateKernelBenchCandidate is
// reentrant.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/eval/gate/gate.h"

namespace htam {

// The language name of ModelNew candidates.
inline constexpr const char* kKernelBenchLanguage = "kernelbench";

// Compiles (Python import, load_inline), verifies and times a ModelNew source on a KernelBench
// task. Needs GateOptions::runner (the answer key never enters a process that runs the
// candidate): without one the result is InfraError. Never throws.
GateResult EvaluateKernelBenchCandidate(BackendInstance* backend, const TaskSpec& task,
                                        const GateOptions& options, const std::string& source,
                                        const ProgressFn& progress);

// The runner's side: one Python harness process at a time.
class KernelBenchHarness {
 public:
  KernelBenchHarness() = default;
  ~KernelBenchHarness() { Stop(); }
  KernelBenchHarness(const KernelBenchHarness&) = delete;
  KernelBenchHarness& operator=(const KernelBenchHarness&) = delete;

  // Serves one kb_* request: "kb_load" (re)starts the harness with req.python and req.script,
  // then every request goes to it, bounded by req.timeout_s. `fds` receives the descriptors of
  // the answer (the caller sends and closes them). *failed: the candidate failed or the harness
  // died; the runner ends after answering.
  // `send_fds` go to the harness with the request (kb_golden.py: the runner's outputs).
  nlohmann::json Handle(const nlohmann::json& req, std::vector<int>* fds, bool* failed,
                        const std::vector<int>& send_fds = {});
  // Kills the harness and everything it started (its process group).
  void Stop();

 private:
  std::string Start(const std::string& python, const std::string& script);
  pid_t pid_ = -1;
  int sock_ = -1;
};

}  // namespace htam
