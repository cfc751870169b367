// The gate's one job (Gate::Impl, see gate.h), declared for the files that define its parts:
//   gate.cc            the route of a job (Run): reference, compile, load, verification cases,
//                      timing, the result; stage times
//   gate_inputs.cc     input generation: test data on the device or the host, output buffers
//   gate_verify.cc     verification: one case's calls and comparisons, failure classification,
//                      guard bands and read-only inputs
//   gate_reference.cc  the reference the outputs are compared with and the speedup is over
//   gate_timing.cc     timing: timed calls over rotating input sets, the baseline figure, the
//                      profiler's call, speed of light
// Thread-safety: one Impl serves one job on one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/eval/gate/device_buffers.h"
#include "daemon/eval/gate/gate.h"
#include "daemon/eval/gate/timing_lock.h"
#include "daemon/eval/runner/exec.h"

namespace htam {
namespace gate_detail {

// A failure of the candidate (status + reason) or of the infrastructure.
struct Verdict {
  fb::OutcomeStatus status = fb::OutcomeStatus::Ok;
  std::string reason;
  // The failure is in the values the candidate computed (a comparison with the reference), not in
  // how it ran: its runner may serve the next job (GateResult::runner_clean).
  bool outputs_only = false;
  bool ok() const { return status == fb::OutcomeStatus::Ok; }
  static Verdict Fail(fb::OutcomeStatus s, std::string r) { return Verdict{s, std::move(r)}; }
  static Verdict WrongOutput(fb::OutcomeStatus s, std::string r) {
    return Verdict{s, std::move(r), true};
  }
};

}  // namespace gate_detail

class Gate::Impl {
 public:
  using Verdict = gate_detail::Verdict;
  using Inputs = gate_detail::Inputs;
  using TensorSet = gate_detail::TensorSet;
  using DeviceTensor = gate_detail::DeviceTensor;

  Impl(BackendInstance* backend, htam_device* device, const TaskSpec& task,
       const GateOptions& options, const ProgressFn& progress);

  GateResult Run(const std::string* candidate_source);
  // KernelBench: torch.compile's figure, when still pending, in a detached process started once
  // the candidate is timed (never overlapping its timing; no verdict waits for it).
  void StartCompileBaseline();
  std::vector<fb::StageTimeT> TakeOps();
  std::vector<fb::StageTimeT> TakeStages();

 private:
  // ---- the route (gate.cc)
  void Progress(const std::string& stage);
  // Closes the running stage and opens `stage` ("" = none); details after " (" or ", " and the
  // words "candidate"/"reference"/"baseline" inside parentheses are dropped from the name.
  void StageBoundary(const std::string& stage);
  static GateResult Infra(GateResult res, const std::string& why);
  static std::string DimsText(const DimBinding& d);
  // NotFound: infrastructure (compiler missing...); Unavailable: the runner died; InvalidArgument:
  // the source's fault (diagnostics in *diag).
  Status Compile(CandidateExec* ex, const std::string& source, const char* name, std::string* diag,
                 double* ms, bool* cached);

  // ---- input generation (gate_inputs.cc)
  // Inputs generated from the task's distributions (on the device where the plugin can, else on
  // the host), or `given` ones (golden data). `local`: in the verifier's own memory, never shared
  // with a runner (MakeOutputs).
  Status MakeInputs(const DimBinding& dims, uint64_t seed, Inputs* inputs, TensorSet* dev,
                    const std::vector<HostTensor>* given = nullptr, bool local = false);
  // A host tensor of the right shape with no data (what DeviceTensor::Create needs).
  HostTensor Shaped(const TensorSpec& ts, const DimBinding& dims) const;
  // Whether test data is generated and compared on the device (the plugin's buffer_fill and
  // buffer_compare, GateOptions::device_data).
  bool DeviceData() const;
  // Fills `t` on the device; false when the values came out all zero (the caller generates them
  // on the host instead, whose generator never hands out only zeros).
  Result<bool> FillOnDevice(const TensorSpec& ts, uint64_t seed, DeviceTensor* t);
  // `local`: in the verifier's own memory, never shared with a runner (copies it keeps).
  Status MakeOutputs(const DimBinding& dims, TensorSet* dev, bool local = false);
  static std::vector<BoundTensor> Bound(const TensorSet& s);

  // ---- verification (gate_verify.cc)
  Result<htam_compare_result> CompareOnDevice(const DeviceTensor& a, const DeviceTensor& b,
                                              int mode);
  // CheckOutput (compare.h) for tensors on the device: the same verdicts and the same words, from
  // a comparison that leaves the device only as counters and the elements a message names.
  Result<std::string> CheckOutputOnDevice(const DeviceTensor& c, const DeviceTensor& r,
                                          const std::string& where, bool hide = false);
  // CheckSame (compare.h) on the device.
  Result<std::string> CheckSameOnDevice(const DeviceTensor& a, const DeviceTensor& b, bool hide);
  // Classifies a failed stage of candidate (or reference) code. "" `extra` = during a call.
  Verdict Classify(const ExecOutcome& o, const std::string& where, const std::string& extra);
  // One call; classifies failures.
  Verdict Call(CandidateExec* ex, const TensorSet& in, TensorSet& out, const std::string& where);
  Verdict CheckGuardsAndInputs(const TensorSet& in, const TensorSet& out, const Inputs* inputs,
                               const std::string& where);
  // Verification case `index` (of its shape) with inputs from `seed`.
  Verdict VerifyCase(CandidateExec* cand, const DimBinding& dims, uint64_t seed, size_t index,
                     const std::string& where, bool hide);

  // ---- timing (gate_timing.cc)
  // Times `mod` over rotating input sets; when `check` is set, verifies every set's outputs (each
  // written by a timed call: the plugin poisons before every repetition) against the reference's.
  Verdict TimeAndVerify(CandidateExec* mod, const DimBinding& dims, TimingStats* stats, bool check,
                        GateResult* res);
  // What a kept baseline figure depends on: the reference, the task and shape, the device and the
  // timing settings.
  std::string BaselineKey(const std::string& ref_source, const DimBinding& dims) const;
  bool ReusedBaseline(const std::string& key, TimingStats* stats);
  void KeepBaseline(const std::string& key, const TimingStats& stats);
  // One call of the candidate on the first seen shape (the run a profiler watches).
  GateResult SingleCall(GateResult res);
  // sol_fraction and the floor no honest result can beat (gate_timing.cc says how).
  void SpeedOfLight(GateResult* res);
  void ProfileCandidate(const DimBinding& dims, GateResult* res);

  // ---- the reference (gate_reference.cc): what the candidate's outputs are compared with and
  // what its speedup is over. One interface with two kinds, the only code that tells them apart:
  // the task's kernel, run in this process (KernelReference), or golden data and a baseline figure
  // computed beforehand by PyTorch (GoldenReference, KernelBench tasks).

  // Expected outputs of one case: the reference kernel's, in this process's own memory, or given.
  struct Expected {
    TensorSet device;
    const std::vector<HostTensor>* given = nullptr;
    Result<HostTensor> Output(size_t i) const {
      return given ? Result<HostTensor>((*given)[i]) : device[i]->Download();
    }
  };

  class Reference {
   public:
    virtual ~Reference() = default;
    // Before the candidate is compiled (a profiling run, single_call, needs no expected outputs).
    virtual Verdict Prepare(GateResult* res) = 0;
    // Once the candidate compiled.
    virtual Verdict Load() = 0;
    // The inputs of verification case `i` (timing input set `i` when `timing`) when the
    // reference gives them; null: generated from the task's distributions.
    virtual const std::vector<HostTensor>* GivenInputs(bool timing, size_t i) const = 0;
    // The expected outputs for inputs `in` of that case.
    virtual Verdict Outputs(const DimBinding& dims, const TensorSet& in, bool timing, size_t i,
                            Expected* out, const std::string& where) = 0;
    // The baseline the speedup is over.
    virtual Verdict Baseline(const DimBinding& dims, TimingStats* stats, GateResult* res) = 0;
    // After the candidate was timed (work that must not overlap its timing).
    virtual void AfterTiming() {}
  };
  class KernelReference;
  class GoldenReference;
  // The task's reference kernel `source`, compiled and run by `exec` in this process.
  std::unique_ptr<Reference> MakeKernelReference(CandidateExec* exec, std::string source);
  // KernelBench's golden data and PyTorch's baseline figures.
  std::unique_ptr<Reference> MakeGoldenReference();

  BackendInstance* backend_;
  const PluginApi* api_;
  htam_device* device_;
  const TaskSpec& task_;
  GateOptions opt_;
  ProgressFn progress_;
  std::vector<uint8_t> canary_;
  gate_detail::OpTimes ops_;  // before pool_, which records into it until it is destroyed
  // Device buffers of this job's tensors (declared before any tensor member).
  gate_detail::BufferPool pool_;
  DeviceLock turn_;  // the device: shared while this job works on it, exclusive while timing
  CandidateExec* cand_ = nullptr;         // where the candidate runs (this process or the runner)
  CandidateExec* ref_ = nullptr;          // the reference, always in this process
  CandidateExec* sharer_ = nullptr;       // the runner, when buffers are shared with one
  std::unique_ptr<Reference> reference_;  // made by Run
  bool device_data_failed_ = false;
  std::string data_note_;
  std::string timing_note_;    // a timed phase did not get the timing lock in time
  std::string baseline_note_;  // the baseline came from an earlier job of this process
  std::vector<fb::StageTimeT> stage_ms_;
  std::string stage_name_;
  std::chrono::steady_clock::time_point stage_start_;
};

}  // namespace htam
