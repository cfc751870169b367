// One opened CUDA device: its primary context, the stream handed to candidates, the L2 flush
// buffer, clock readings, the roofline ceilings, and the two ways of calling a candidate: Call
// (one checked call, device idle at the end) and Time (the timing protocol of DESIGN.md).
//
// Timing protocol (docs/backends-cuda.md explains the choices). Before every repetition, outside
// the window, on the legacy stream: outputs poisoned (on request), L2 flushed by READING a
// preallocated buffer >= 2x L2 (clean lines only: no write-back lands in the window),
// persisting-L2 lines reset and the persisting limit set to 0, the stream's access-policy window
// cleared. Then, by mode (eval.cuda_timing_mode):
//   - "cupti" (default): the device is idle; the repetition is the span (first start to last end)
//     of the CUPTI kernel / memcpy / memset activity records of the call, on EVERY stream and
//     context of the process. Launch latency and host jitter are out; gaps between the
//     candidate's own kernels are in. Falls back to "sync" when libcupti is missing or its
//     self-test at device open finds no records.
//   - "sync": the device is idle; start event, call, then a device-wide synchronization waited
//     for on a helper thread (so that the end is detected the same way whether the work is on
//     the handed stream or on streams the candidate made itself), then an end event; minus the
//     median of the same sequence around an empty call. Launch latency stays in.
//   - "hold": an SM-filling hold kernel before each window on the candidate's stream; events on
//     that stream; a lag check after device idle. Cheap, but side-stream work is NOT reliably
//     charged (measured on an H100); all_streams = 0 in this mode.
// Thread-safety: external synchronization required (the ABI calls one device from one thread).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cupti_spans.h"
#include "backends/cuda/nvml_clocks.h"
#include "backends/cuda/nvrtc_module.h"
#include "base/status.h"
#include "htam/backend.h"

namespace htam::cuda {

// An error in the ABI's terms: class and message (and htam_kernel's return value, if any).
struct Fault {
  htam_backend_error_code code = HTAM_ERR_UNKNOWN;
  std::string message;
  int32_t kernel_rc = 0;
};
using MaybeFault = std::optional<Fault>;

struct DeviceOptions {
  bool measure_roofline = true;  // measure copy bandwidth and FMA / tensor rates at open
  uint64_t flush_bytes = 0;      // 0 = max(2 x L2, flush_min_bytes)
  uint64_t flush_min_bytes = 64ull << 20;
  int calibration_reps = 32;  // empty calls used to calibrate the close-of-window lag
  double lag_slack_us = 4.0;  // lag above calibration + this marks off-stream work
  double hold_us = 20.0;      // SM-filling hold before each window (0 = none)
  // true: "sync" mode (above). false with cupti false: "hold" mode.
  bool sync_window = false;
  // true: "cupti" mode (above; falls back to sync mode when libcupti is unavailable).
  bool cupti = true;
  // cupti mode: one flush per timing, repetitions told apart by CUPTI timestamps (self-tested).
  bool cupti_batch = true;
  uint64_t roofline_copy_bytes = 512ull << 20;  // size of the D2D copy probe
};

struct DeviceProps {
  int index = 0;
  std::string name;
  std::string arch;  // "sm_90a" on Hopper ("a" targets for 9.0 and 10.x)
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int max_threads_per_sm = 2048;
  uint64_t l2_bytes = 0;
  uint64_t memory_bytes = 0;
  int peak_sm_khz = 0, peak_mem_khz = 0;
  std::string pci_bus_id;
};

// Speed-of-light ceilings measured on this device (0 = not measured).
struct Roofline {
  double copy_bytes_per_s = 0;  // large D2D copy, bytes read + written
  double fp32_flops = 0;        // FMA-bound kernel
  double tensor16_flops = 0;    // bf16 mma.sync-bound kernel (wgmma can exceed it)
  std::string note;
};

struct TimeStats {
  int warmup_done = 0;
  int off_stream_reps = 0;  // hold mode: repetitions whose work outlived the closing event
  int empty_reps = 0;       // cupti mode: repetitions without any activity record (event window)
  double lag_us_calibrated = 0;
  ClockReading clocks;
};

class IdleWaiter;  // cuda_device_internal.h

class CudaDevice {
 public:
  static Result<std::unique_ptr<CudaDevice>> Open(int index, const DeviceOptions& options);
  // Properties of device `index` without opening it (for describe).
  static Result<DeviceProps> Probe(int index);
  ~CudaDevice();

  const DeviceProps& props() const { return props_; }
  cudaStream_t stream() const { return stream_; }
  ClockReading ReadClocks() const { return clocks_->Read(); }
  const Roofline& roofline() const { return roofline_; }
  // "hold", "sync" or "cupti": the timing mode in effect.
  std::string timing_mode() const {
    return cupti_ ? "cupti" : options_.sync_window ? "sync" : "hold";
  }
  // True when every stream's work is inside the measured time (cupti and sync modes).
  bool all_streams() const { return cupti_ != nullptr || options_.sync_window; }
  // The timing mode in effect: the CUPTI library and its self-test, or why it fell back.
  const std::string& timing_note() const { return timing_note_; }
  // True after a sticky error or a timeout: only release calls are valid now.
  bool poisoned() const { return poisoned_; }

  // One call of fn on the stream, then device idle, then error checks (see backend.h run).
  MaybeFault Call(htam_kernel_fn fn, const htam_tensor* in, int nin, htam_tensor* out, int nout,
                  double timeout_ms);
  // The timing protocol; fills rep_us[0..request.repetitions-1].
  MaybeFault Time(htam_kernel_fn fn, const htam_timing_request& request, double* rep_us,
                  TimeStats* stats);

  // A CUDA API error as a Fault (marks the device poisoned when sticky).
  Fault FromCuda(cudaError_t e, const std::string& what);

 private:
  CudaDevice();  // cuda_device.cc (IdleWaiter is complete there)
  Status Init(int index, const DeviceOptions& options);
  Status EnsureFlushBuffer(uint64_t bytes);
  MaybeFault WaitIdle(cudaEvent_t closing, double timeout_ms);
  MaybeFault CheckAfter(int rc, double timeout_ms, cudaEvent_t closing);
  void ResetPersistingL2();
  MaybeFault CalibrateLag();
  MaybeFault SyncIdle(double timeout_ms);  // device sync on the helper thread, bounded
  void CuptiSelfTest();
  bool CuptiBatchSelfTest();
  void MeasureRoofline();
  void Hold(cudaStream_t s, double us, bool wait_started);
  void Flush(uint64_t bytes, int rep);
  // Time's steps (cuda_timing.cc): one call of fn on input set `set`; the warm-up; what precedes
  // a timed repetition's window; the repetitions' times read from their events and spans.
  int CallSet(htam_kernel_fn fn, const htam_timing_request& req, int set);
  MaybeFault WarmUp(htam_kernel_fn fn, const htam_timing_request& req, TimeStats* stats);
  void PrepareRepetition(const htam_timing_request& req, int set, uint64_t flush, int r, bool hold);
  void ReadRepetitions(const std::vector<cudaEvent_t>& ev, int reps,
                       const std::vector<double>& spans, const std::vector<int>& records, bool sync,
                       double* rep_us, int* off_stream, int* empty);

  DeviceOptions options_;
  DeviceProps props_;
  cudaStream_t stream_ = nullptr;
  void* flush_ = nullptr;
  uint64_t flush_size_ = 0;
  cudaEvent_t idle_event_ = nullptr;
  std::unique_ptr<NvmlClocks> clocks_;
  NvrtcModule probes_;
  Roofline roofline_;
  bool poisoned_ = false;
  bool lag_calibrated_ = false;
  bool have_probes_ = false;                     // NVRTC module with hold / flush kernels loaded
  volatile unsigned* hold_flag_host_ = nullptr;  // host-mapped "hold started" flag
  void* hold_flag_device_ = nullptr;
  unsigned hold_ticket_ = 0;
  double lag_median_us_ = 0, lag_p90_us_ = 0;
  double sync_empty_us_ = 0;            // sync mode: median window of an empty call
  std::unique_ptr<CuptiSpans> cupti_;   // cupti mode
  bool cupti_batch_ = false;            // cupti mode with one flush per timing (self-tested)
  std::unique_ptr<IdleWaiter> waiter_;  // sync mode
  std::string timing_note_;
};

// Device source of the roofline probes and the hold kernel (compiled with NVRTC at device open).
const char* ProbeSource();

// Bytes spanned by a tensor (from its shape, strides and dtype); 0 for an empty tensor.
uint64_t TensorExtentBytes(const htam_tensor& t);

}  // namespace htam::cuda
