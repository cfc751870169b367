// Where candidate code runs. The gate (gate.h) never calls a candidate's module directly: it goes
// through a CandidateExec, either in this process (LocalExec: the reference, the one-call
// profiling mode, backends that cannot share buffers) or in a separate *runner* process
// (RemoteExec) that holds no expected output, no golden data and no reference, and sees the
// verifier's buffers only as shared memory (htam_backend_buffer_export / _import).
//
// The runner side is ServeRunner(): a loop over one Unix socket, answering compile, load, import,
// run, time, profile and reset requests with a LocalExec of its own. Frames are a 4-byte
// big-endian length and a JSON body; buffer file descriptors travel as SCM_RIGHTS beside the
// frame that announces them.
// Thread-safety: an exec object is used by one thread; one socket per runner.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/common/plugin_host.h"

namespace htam {

// A tensor inside a device buffer: what a runner needs to rebuild its own pointer to it.
struct BoundTensor {
  htam_buffer* buffer = nullptr;
  uint64_t offset = 0;  // bytes from the buffer's start to the tensor's first element
  htam_tensor desc{};   // data = buffer_address(buffer) + offset in the verifier's process
};

// The outcome of one stage that runs candidate code.
struct ExecOutcome {
  int32_t code = -1;  // htam_backend_error_code of a failure; -1 = the stage succeeded
  int32_t kernel_rc = 0;
  std::string message;        // the plugin's text for a failure
  size_t extra_threads = 0;   // threads the call left running (check_threads)
  bool children = false;      // the call created child processes
  bool runner_died = false;   // the runner process went away during the stage
  bool ok() const { return code < 0 && !extra_threads && !children && !runner_died; }
};

struct CompileSettings {
  std::string language, arch, options, name = "candidate";
  double timeout_s = 60;
};

struct CompileOutcome {
  int32_t code = -1;  // -1 = compiled; HTAM_ERR_COMPILE / _TIMEOUT = the candidate's fault
  std::string diagnostics;
  double ms = 0;
  bool cached = false;
  bool runner_died = false;
};

class CandidateExec {
 public:
  virtual ~CandidateExec() = default;
  // Compiles `source` and keeps the artifact (one at a time: a second call replaces it).
  virtual CompileOutcome Compile(const std::string& source, const CompileSettings& s) = 0;
  // Loads the kept artifact on the device.
  virtual ExecOutcome Load() = 0;
  // One call of htam_kernel (then a whole-device synchronization), with the leftovers checks.
  virtual ExecOutcome Run(const std::vector<BoundTensor>& in, const std::vector<BoundTensor>& out) = 0;
  // `req`'s tensor arrays are ignored: `in`/`out` hold num_sets x num_inputs/outputs tensors.
  virtual ExecOutcome Time(const htam_timing_request& req, const std::vector<BoundTensor>& in,
                           const std::vector<BoundTensor>& out, htam_timing_result* res) = 0;
  virtual bool CanProfile() const = 0;
  virtual ExecOutcome Profile(const std::vector<BoundTensor>& in,
                              const std::vector<BoundTensor>& out, htam_profile_report* rep) = 0;
  // A device buffer of `bytes` for a tensor the candidate will read or write. In this process:
  // buffer_alloc. With a runner that allocates (MakeRemoteExec's `runner_allocates`): the runner
  // allocates it in its own context and exports it, and this process gets the imported view, so
  // the candidate is timed on memory of its own process (CUDA: kernels writing through buffers
  // opened from IPC handles were measured up to 40 % slower).
  virtual Result<htam_buffer*> Allocate(htam_device* device, uint64_t bytes);
  // Whether `b` came from the runner's Allocate (free the view first, then Forget).
  virtual bool Allocated(htam_buffer* b) const {
    (void)b;
    return false;
  }
  // The verifier is about to free `b` (or has freed its view of a runner's buffer): the runner
  // unmaps, or frees, its side of it.
  virtual void Forget(htam_buffer* b) { (void)b; }
  // Releases module and artifact (and imported buffers): the next job starts clean.
  virtual void Reset() = 0;
  // A request outside the plugin ABI, answered by the runner's KernelBench harness
  // (kb_candidate.h: ops "kb_*"); `fds` receives the descriptors sent with the answer (the caller
  // closes them). Unimplemented where candidates run in this process.
  virtual Result<nlohmann::json> Forward(const nlohmann::json& req, std::vector<int>* fds) {
    (void)req;
    (void)fds;
    return Status::FailedPrecondition("KernelBench candidates need the runner process");
  }
  // "in-process" or "runner (pid N)": said in diagnostics where it helps.
  virtual std::string Where() const = 0;
  // Why this exec must not serve another job ("" = it may): a runner whose reset found that its
  // candidates left device memory allocated (LocalExecOptions::leak_limit_bytes).
  virtual std::string Retired() const { return ""; }
};

struct LocalExecOptions {
  bool check_threads = true;
  double thread_grace_ms = 50;
  // ServeRunner only: the runner's private working directory, emptied at every reset ("" = none).
  std::string reset_dir;
  // ServeRunner only: device memory (bytes) that candidates may leave allocated, beyond what was
  // in use when the runner opened its device, before a reset retires the runner (0 = not checked;
  // needs the plugin's device_memory_used, API 1.4).
  uint64_t leak_limit_bytes = 0;
};

// Candidate code in this process.
std::unique_ptr<CandidateExec> MakeLocalExec(BackendInstance* backend, htam_device* device,
                                             LocalExecOptions options);

// Candidate code in the runner at the other end of `fd` (a connected Unix stream socket; the
// exec owns it). `runner_pid` only names it in messages. `runner_allocates`: buffers come from
// the runner (Allocate above); else the verifier allocates and the runner imports them.
std::unique_ptr<CandidateExec> MakeRemoteExec(BackendInstance* backend, int fd, int runner_pid,
                                              bool runner_allocates = false);

// The runner's loop: serves requests on `fd` until EOF (returns 0) or a protocol error (returns
// 2). After a request whose candidate code failed a check or faulted, it answers and returns 1:
// a runner that ran a failing candidate is not reused. A reset (between jobs) releases the
// module, the artifact and every buffer, and empties the runner's working directory (its
// compile outputs and whatever files a candidate wrote), so the next job finds nothing of this
// one's.
int ServeRunner(BackendInstance* backend, htam_device* device, int fd, LocalExecOptions options);

// Sends / receives one frame with optional file descriptors (SCM_RIGHTS). Blocking.
Status SendFrameFds(int fd, const nlohmann::json& body, const std::vector<int>& fds);
Result<nlohmann::json> RecvFrameFds(int fd, std::vector<int>* fds);

}  // namespace htam
