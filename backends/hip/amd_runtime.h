// The AMD runtime path of the HIP backend, written against the HIP runtime API of HIP 5.2
// (hip/hip_runtime_api.h, platform AMD). libamdhip64 is opened with dlopen rather than linked, so
// that the plugin loads — and compiles candidates — on machines without ROCm or without an AMD GPU;
// the entry points are resolved by name into a table typed from the header.
//
// One opened device holds: the stream handed to candidates, the cache-flush buffer, events, clock
// readings (sysfs pp_dpm_sclk / pp_dpm_mclk: read, never set), and the two ways to call a
// candidate: Call (one checked call, device idle at the end, hang = timeout) and Time (the timing
// protocol of DESIGN.md, the same as the CUDA backend's):
//   - before every repetition, outside the window: outputs poisoned on request, caches flushed by a
//     memset over a buffer of max(2 x L2, flush_min_bytes) (the L2 is small next to MI300's
//     256 MiB Infinity Cache, which the minimum covers), device idle;
//   - the window opens with an event on the candidate's stream and closes with an event on the null
//     stream (which waits for every blocking stream); after a device synchronize a third event
//     measures the lag; work on a non-blocking side stream shows as lag above the calibrated one,
//     and such a repetition is charged up to device idle.
// NOT RUN: no AMD GPU was reachable while this was written; it is compiled in CI only.
// Thread-safety: external synchronization required (the ABI calls one device from one thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "htam/backend.h"

namespace htam::hip {

struct HipApi;  // the resolved libamdhip64 entry points (amd_runtime.cc)

// An error in the ABI's terms.
struct AmdFault {
  htam_backend_error_code code = HTAM_ERR_UNKNOWN;
  std::string message;
  int32_t kernel_rc = 0;
};
using MaybeAmdFault = std::optional<AmdFault>;

struct AmdDeviceProps {
  int index = 0;
  std::string name;       // "AMD Instinct MI250X"
  std::string arch;       // processor of gcnArchName: "gfx90a"
  std::string arch_full;  // gcnArchName with features: "gfx90a:sramecc+:xnack-"
  uint64_t memory_bytes = 0;
  uint64_t l2_bytes = 0;
  int warp_size = 64;
  int max_sm_mhz = -1, max_mem_mhz = -1;
  std::string pci_bus_id;  // "0000:c1:00.0" (sysfs clock files live under it)
};

struct AmdClocks {
  int sm_mhz = -1, mem_mhz = -1;
};

struct AmdDeviceOptions {
  uint64_t flush_bytes = 0;                 // 0 = max(2 x L2, flush_min_bytes)
  uint64_t flush_min_bytes = 512ull << 20;  // covers MI300X's 256 MiB Infinity Cache twice
  int calibration_reps = 32;
  double lag_slack_us = 8.0;
};

struct AmdTimeStats {
  int warmup_done = 0;
  int off_stream_reps = 0;
  AmdClocks clocks;
};

// The HIP runtime library: loaded once per process.
class AmdRuntime {
 public:
  // dlopen(library) and resolve the entry points; Unavailable with the reason when it cannot.
  static Result<std::shared_ptr<AmdRuntime>> Load(const std::string& library);
  ~AmdRuntime();
  // Devices visible to the runtime (0 with no GPU; the reason in *why).
  std::vector<AmdDeviceProps> Probe(std::string* why) const;
  const HipApi& api() const { return *api_; }
  std::string ErrorText(int e) const;  // "hipErrorIllegalAddress (an illegal memory access ...)"

 private:
  AmdRuntime() = default;
  void* handle_ = nullptr;
  std::unique_ptr<HipApi> api_;
};

class AmdDevice {
 public:
  static Result<std::unique_ptr<AmdDevice>> Open(std::shared_ptr<AmdRuntime> rt,
                                                 const AmdDeviceProps& props,
                                                 const AmdDeviceOptions& options);
  ~AmdDevice();

  const AmdDeviceProps& props() const { return props_; }
  void* stream() const { return stream_; }
  bool poisoned() const { return poisoned_; }
  AmdClocks ReadClocks() const;

  // Memory (synchronous, complete on return).
  MaybeAmdFault Alloc(uint64_t bytes, void** out);
  void Free(void* p);
  MaybeAmdFault CopyToDevice(void* dst, const void* src, uint64_t bytes);
  MaybeAmdFault CopyToHost(void* dst, const void* src, uint64_t bytes);
  MaybeAmdFault Memset(void* dst, uint8_t value, uint64_t bytes);

  MaybeAmdFault Call(htam_kernel_fn fn, const htam_tensor* in, int nin, htam_tensor* out, int nout,
                     double timeout_ms);
  MaybeAmdFault Time(htam_kernel_fn fn, const htam_timing_request& request, double* rep_us,
                     AmdTimeStats* stats);
  // A runtime error as a fault; marks the device poisoned when the error is sticky.
  AmdFault FromHip(int e, const std::string& what);
  // Clears an error a candidate left pending (its static initializers may fail at load).
  MaybeAmdFault CheckPending(const std::string& what);

 private:
  AmdDevice() = default;
  MaybeAmdFault Select();
  MaybeAmdFault WaitIdle(void* closing_event, double timeout_ms);
  MaybeAmdFault Calibrate();

  std::shared_ptr<AmdRuntime> rt_;
  AmdDeviceProps props_;
  AmdDeviceOptions options_;
  void* stream_ = nullptr;
  void* flush_ = nullptr;
  uint64_t flush_size_ = 0;
  void* ev_start_ = nullptr;
  void* ev_stop_ = nullptr;
  void* ev_idle_ = nullptr;
  bool poisoned_ = false;
  bool calibrated_ = false;
  double lag_threshold_us_ = 0;
};

// Bytes spanned by a tensor (shape, strides, dtype); 0 for an empty tensor.
uint64_t TensorSpanBytes(const htam_tensor& t);
// "cur" clock in MHz from a pp_dpm_* file text ("0: 500Mhz\n1: 1700Mhz *\n" -> 1700); -1 if none.
int ParseDpmClock(const std::string& text);

}  // namespace htam::hip
