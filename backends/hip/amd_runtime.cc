// AMD runtime path: libamdhip64 through dlopen, device memory, checked calls, the timing protocol.
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include "backends/hip/amd_runtime.h"

#include <dlfcn.h>
#include <hip/hip_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace htam::hip {

// Entry points by name, typed after hip_runtime_api.h (HIP 5.2). Every one is required.
struct HipApi {
  hipError_t (*GetDeviceCount)(int*);
  hipError_t (*GetDeviceProperties)(hipDeviceProp_t*, int);
  hipError_t (*DeviceGetPCIBusId)(char*, int, int);
  hipError_t (*SetDevice)(int);
  hipError_t (*DeviceSynchronize)();
  hipError_t (*GetLastError)();
  const char* (*GetErrorName)(hipError_t);
  const char* (*GetErrorString)(hipError_t);
  hipError_t (*StreamCreateWithFlags)(hipStream_t*, unsigned);
  hipError_t (*StreamDestroy)(hipStream_t);
  hipError_t (*StreamSynchronize)(hipStream_t);
  hipError_t (*EventCreate)(hipEvent_t*);
  hipError_t (*EventDestroy)(hipEvent_t);
  hipError_t (*EventRecord)(hipEvent_t, hipStream_t);
  hipError_t (*EventQuery)(hipEvent_t);
  hipError_t (*EventSynchronize)(hipEvent_t);
  hipError_t (*EventElapsedTime)(float*, hipEvent_t, hipEvent_t);
  hipError_t (*Malloc)(void**, size_t);
  hipError_t (*Free)(void*);
  hipError_t (*MemcpyAsync)(void*, const void*, size_t, hipMemcpyKind, hipStream_t);
  hipError_t (*MemsetAsync)(void*, int, size_t, hipStream_t);
};

namespace {

template <typename F>
bool Resolve(void* h, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(h, name));
  if (!*out) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *out != nullptr;
}

hipStream_t S(void* s) {
  return static_cast<hipStream_t>(s);
}
hipEvent_t E(void* e) {
  return static_cast<hipEvent_t>(e);
}

bool Sticky(hipError_t e) {
  switch (e) {
    case hipErrorIllegalAddress:
    case hipErrorLaunchFailure:
    case hipErrorAssert:
    case hipErrorLaunchTimeOut:
    case hipErrorECCNotCorrectable:
    case hipErrorPriorLaunchFailure:
    case hipErrorContextIsDestroyed:
    case hipErrorRuntimeMemory:
    case hipErrorRuntimeOther:
    case hipErrorUnknown: return true;
    default: return false;
  }
}

int ReadDpm(const std::string& bus, const char* file) {
  if (bus.empty()) return -1;
  std::string bus_lower = bus;
  for (char& c : bus_lower) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  std::ifstream f("/sys/bus/pci/devices/" + bus_lower + "/" + file);
  if (!f) return -1;
  std::ostringstream ss;
  ss << f.rdbuf();
  return ParseDpmClock(ss.str());
}

using Clock = std::chrono::steady_clock;

}  // namespace

int ParseDpmClock(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find('*') == std::string::npos) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    int mhz = std::atoi(line.c_str() + colon + 1);
    return mhz > 0 ? mhz : -1;
  }
  return -1;
}

uint64_t TensorSpanBytes(const htam_tensor& t) {
  if (t.ndim < 0 || t.ndim > HTAM_MAX_DIMS) return 0;
  uint64_t last = 0;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] <= 0) return 0;
    last += uint64_t(t.shape[i] - 1) * uint64_t(t.strides[i] > 0 ? t.strides[i] : 0);
  }
  return (last + 1) * uint64_t(htam_dtype_size(t.dtype));
}

// ---- AmdRuntime ----------------------------------------------------------------------------

Result<std::shared_ptr<AmdRuntime>> AmdRuntime::Load(const std::string& library) {
  dlerror();
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    return Status::Unavailable("cannot load the HIP runtime " + library + ": " + (why ? why : "?"));
  }
  auto api = std::make_unique<HipApi>();
  std::string missing;
  Resolve(h, "hipGetDeviceCount", &api->GetDeviceCount, &missing);
  Resolve(h, "hipGetDeviceProperties", &api->GetDeviceProperties, &missing);
  Resolve(h, "hipDeviceGetPCIBusId", &api->DeviceGetPCIBusId, &missing);
  Resolve(h, "hipSetDevice", &api->SetDevice, &missing);
  Resolve(h, "hipDeviceSynchronize", &api->DeviceSynchronize, &missing);
  Resolve(h, "hipGetLastError", &api->GetLastError, &missing);
  Resolve(h, "hipGetErrorName", &api->GetErrorName, &missing);
  Resolve(h, "hipGetErrorString", &api->GetErrorString, &missing);
  Resolve(h, "hipStreamCreateWithFlags", &api->StreamCreateWithFlags, &missing);
  Resolve(h, "hipStreamDestroy", &api->StreamDestroy, &missing);
  Resolve(h, "hipStreamSynchronize", &api->StreamSynchronize, &missing);
  Resolve(h, "hipEventCreate", &api->EventCreate, &missing);
  Resolve(h, "hipEventDestroy", &api->EventDestroy, &missing);
  Resolve(h, "hipEventRecord", &api->EventRecord, &missing);
  Resolve(h, "hipEventQuery", &api->EventQuery, &missing);
  Resolve(h, "hipEventSynchronize", &api->EventSynchronize, &missing);
  Resolve(h, "hipEventElapsedTime", &api->EventElapsedTime, &missing);
  Resolve(h, "hipMalloc", &api->Malloc, &missing);
  Resolve(h, "hipFree", &api->Free, &missing);
  Resolve(h, "hipMemcpyAsync", &api->MemcpyAsync, &missing);
  Resolve(h, "hipMemsetAsync", &api->MemsetAsync, &missing);
  if (!missing.empty()) {
    dlclose(h);
    return Status::Unavailable(library + " lacks " + missing);
  }
  std::shared_ptr<AmdRuntime> rt(new AmdRuntime);
  rt->handle_ = h;
  rt->api_ = std::move(api);
  return rt;
}

// The runtime stays mapped: candidates loaded against it register their code objects with it and
// may run destructors after the plugin is gone.
AmdRuntime::~AmdRuntime() = default;

std::string AmdRuntime::ErrorText(int e) const {
  hipError_t h = static_cast<hipError_t>(e);
  return std::string(api_->GetErrorName(h)) + " (" + api_->GetErrorString(h) + ")";
}

std::vector<AmdDeviceProps> AmdRuntime::Probe(std::string* why) const {
  std::vector<AmdDeviceProps> out;
  int n = 0;
  hipError_t e = api_->GetDeviceCount(&n);
  if (e != hipSuccess || n <= 0) {
    if (why) *why = "no AMD GPU: hipGetDeviceCount: " + ErrorText(e);
    return out;
  }
  for (int i = 0; i < n; ++i) {
    hipDeviceProp_t p;
    std::memset(&p, 0, sizeof p);
    if (api_->GetDeviceProperties(&p, i) != hipSuccess) continue;
    AmdDeviceProps d;
    d.index = i;
    d.name.assign(p.name, strnlen(p.name, sizeof p.name));
    d.arch_full.assign(p.gcnArchName, strnlen(p.gcnArchName, sizeof p.gcnArchName));
    d.arch = d.arch_full.substr(0, d.arch_full.find(':'));
    d.memory_bytes = p.totalGlobalMem;
    d.l2_bytes = p.l2CacheSize > 0 ? uint64_t(p.l2CacheSize) : 0;
    d.warp_size = p.warpSize;
    d.max_sm_mhz = p.clockRate > 0 ? p.clockRate / 1000 : -1;
    d.max_mem_mhz = p.memoryClockRate > 0 ? p.memoryClockRate / 1000 : -1;
    char bus[64] = {0};
    if (api_->DeviceGetPCIBusId(bus, sizeof bus, i) == hipSuccess) d.pci_bus_id = bus;
    out.push_back(d);
  }
  (void)api_->GetLastError();
  return out;
}

// ---- AmdDevice -----------------------------------------------------------------------------

Result<std::unique_ptr<AmdDevice>> AmdDevice::Open(std::shared_ptr<AmdRuntime> rt,
                                                   const AmdDeviceProps& props,
                                                   const AmdDeviceOptions& options) {
  std::unique_ptr<AmdDevice> d(new AmdDevice);
  d->rt_ = std::move(rt);
  d->props_ = props;
  d->options_ = options;
  const HipApi& a = d->rt_->api();
  auto fail = [&](hipError_t e, const char* what) {
    return Status::Unavailable(std::string(what) + ": " + d->rt_->ErrorText(e));
  };
  hipError_t e = a.SetDevice(props.index);
  if (e != hipSuccess) return fail(e, "hipSetDevice");
  hipStream_t s = nullptr;
  // A blocking stream: the closing event on the null stream then waits for it.
  if ((e = a.StreamCreateWithFlags(&s, hipStreamDefault)) != hipSuccess)
    return fail(e, "hipStreamCreateWithFlags");
  d->stream_ = s;
  for (void** ev : {&d->ev_start_, &d->ev_stop_, &d->ev_idle_}) {
    hipEvent_t h = nullptr;
    if ((e = a.EventCreate(&h)) != hipSuccess) return fail(e, "hipEventCreate");
    *ev = h;
  }
  uint64_t flush = options.flush_bytes
                       ? options.flush_bytes
                       : std::max<uint64_t>(2 * props.l2_bytes, options.flush_min_bytes);
  if ((e = a.Malloc(&d->flush_, flush)) != hipSuccess) return fail(e, "hipMalloc(flush buffer)");
  d->flush_size_ = flush;
  return d;
}

AmdDevice::~AmdDevice() {
  if (!rt_ || poisoned_) return;  // a dead context: leave its objects to process exit
  const HipApi& a = rt_->api();
  (void)a.SetDevice(props_.index);
  if (flush_) (void)a.Free(flush_);
  for (void* ev : {ev_start_, ev_stop_, ev_idle_})
    if (ev) (void)a.EventDestroy(E(ev));
  if (stream_) (void)a.StreamDestroy(S(stream_));
  (void)a.GetLastError();
}

AmdClocks AmdDevice::ReadClocks() const {
  AmdClocks c;
  c.sm_mhz = ReadDpm(props_.pci_bus_id, "pp_dpm_sclk");
  c.mem_mhz = ReadDpm(props_.pci_bus_id, "pp_dpm_mclk");
  return c;
}

AmdFault AmdDevice::FromHip(int code, const std::string& what) {
  hipError_t e = static_cast<hipError_t>(code);
  AmdFault f;
  f.message = what + ": " + rt_->ErrorText(e);
  if (Sticky(e)) {
    poisoned_ = true;
    f.code = HTAM_ERR_DEVICE_FAULT;
  } else if (e == hipErrorOutOfMemory) {
    f.code = HTAM_ERR_OUT_OF_MEMORY;
  } else if (e == hipErrorInvalidConfiguration || e == hipErrorLaunchOutOfResources ||
             e == hipErrorInvalidDeviceFunction || e == hipErrorNoBinaryForGpu ||
             e == hipErrorInvalidValue) {
    f.code = HTAM_ERR_KERNEL_FAILED;
  } else if (e == hipErrorNoDevice || e == hipErrorInsufficientDriver) {
    f.code = HTAM_ERR_UNAVAILABLE;
  } else {
    f.code = HTAM_ERR_KERNEL_FAILED;
  }
  return f;
}

MaybeAmdFault AmdDevice::Select() {
  if (poisoned_)
    return AmdFault{HTAM_ERR_DEVICE_FAULT, "device unusable after an earlier fault", 0};
  hipError_t e = rt_->api().SetDevice(props_.index);
  if (e != hipSuccess) return FromHip(e, "hipSetDevice");
  return std::nullopt;
}

MaybeAmdFault AmdDevice::CheckPending(const std::string& what) {
  hipError_t e = rt_->api().GetLastError();
  if (e != hipSuccess && Sticky(e)) return FromHip(e, what);
  return std::nullopt;
}

MaybeAmdFault AmdDevice::Alloc(uint64_t bytes, void** out) {
  *out = nullptr;
  if (auto f = Select()) return f;
  if (bytes == 0) return std::nullopt;
  hipError_t e = rt_->api().Malloc(out, bytes);
  if (e != hipSuccess) {
    AmdFault f = FromHip(e, "hipMalloc(" + std::to_string(bytes) + ")");
    (void)rt_->api().GetLastError();
    return f;
  }
  return std::nullopt;
}

void AmdDevice::Free(void* p) {
  if (!p || poisoned_) return;
  (void)rt_->api().SetDevice(props_.index);
  (void)rt_->api().Free(p);
  (void)rt_->api().GetLastError();
}

MaybeAmdFault AmdDevice::CopyToDevice(void* dst, const void* src, uint64_t bytes) {
  if (auto f = Select()) return f;
  const HipApi& a = rt_->api();
  hipError_t e = a.MemcpyAsync(dst, src, bytes, hipMemcpyHostToDevice, S(stream_));
  if (e == hipSuccess) e = a.StreamSynchronize(S(stream_));
  if (e != hipSuccess) return FromHip(e, "copy to device");
  return std::nullopt;
}

MaybeAmdFault AmdDevice::CopyToHost(void* dst, const void* src, uint64_t bytes) {
  if (auto f = Select()) return f;
  const HipApi& a = rt_->api();
  // The whole device first: side-stream work of a candidate must not race with the read-back.
  hipError_t e = a.DeviceSynchronize();
  if (e == hipSuccess) e = a.MemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, S(stream_));
  if (e == hipSuccess) e = a.StreamSynchronize(S(stream_));
  if (e != hipSuccess) return FromHip(e, "copy to host");
  return std::nullopt;
}

MaybeAmdFault AmdDevice::Memset(void* dst, uint8_t value, uint64_t bytes) {
  if (auto f = Select()) return f;
  const HipApi& a = rt_->api();
  hipError_t e = a.MemsetAsync(dst, value, bytes, S(stream_));
  if (e == hipSuccess) e = a.StreamSynchronize(S(stream_));
  if (e != hipSuccess) return FromHip(e, "memset");
  return std::nullopt;
}

// Waits for `closing` (recorded on the null stream) with a deadline, then for the whole device.
// A hang is a timeout; the device is then unusable in this process (the kernel cannot be killed).
MaybeAmdFault AmdDevice::WaitIdle(void* closing, double timeout_ms) {
  const HipApi& a = rt_->api();
  auto deadline =
      Clock::now() + std::chrono::microseconds(int64_t((timeout_ms > 0 ? timeout_ms : 1e9) * 1000));
  for (;;) {
    hipError_t q = a.EventQuery(E(closing));
    if (q == hipSuccess) break;
    if (q != hipErrorNotReady) return FromHip(q, "waiting for the candidate");
    if (Clock::now() > deadline) {
      poisoned_ = true;
      return AmdFault{
          HTAM_ERR_TIMEOUT,
          "the candidate's work did not finish within " + std::to_string(timeout_ms) + " ms", 0};
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  hipError_t e = a.DeviceSynchronize();
  if (e == hipSuccess) e = a.GetLastError();
  if (e != hipSuccess) return FromHip(e, "after the candidate's call");
  return std::nullopt;
}

MaybeAmdFault AmdDevice::Call(htam_kernel_fn fn, const htam_tensor* in, int nin, htam_tensor* out,
                              int nout, double timeout_ms) {
  if (auto f = Select()) return f;
  const HipApi& a = rt_->api();
  (void)a.GetLastError();  // nothing the candidate left behind counts against this call
  int rc = fn(in, nin, out, nout, stream_);
  hipError_t e = a.EventRecord(E(ev_stop_), nullptr);
  if (e != hipSuccess) return FromHip(e, "hipEventRecord");
  if (auto f = WaitIdle(ev_stop_, timeout_ms)) {
    f->kernel_rc = rc;
    return f;
  }
  if (rc != 0)
    return AmdFault{HTAM_ERR_KERNEL_FAILED, "htam_kernel returned " + std::to_string(rc), rc};
  return std::nullopt;
}

// The close-of-window lag of an empty window (null-stream event -> device idle -> event), whose
// 90th percentile plus a slack separates ordinary lag from work left on a non-blocking stream.
MaybeAmdFault AmdDevice::Calibrate() {
  const HipApi& a = rt_->api();
  std::vector<double> lag;
  for (int i = 0; i < std::max(4, options_.calibration_reps); ++i) {
    hipError_t e = a.EventRecord(E(ev_stop_), nullptr);
    if (e == hipSuccess) e = a.DeviceSynchronize();
    if (e == hipSuccess) e = a.EventRecord(E(ev_idle_), nullptr);
    if (e == hipSuccess) e = a.EventSynchronize(E(ev_idle_));
    float ms = 0;
    if (e == hipSuccess) e = a.EventElapsedTime(&ms, E(ev_stop_), E(ev_idle_));
    if (e != hipSuccess) return FromHip(e, "calibrating the timing window");
    lag.push_back(ms * 1000.0);
  }
  std::sort(lag.begin(), lag.end());
  lag_threshold_us_ = lag[lag.size() * 9 / 10] + options_.lag_slack_us;
  calibrated_ = true;
  return std::nullopt;
}

MaybeAmdFault AmdDevice::Time(htam_kernel_fn fn, const htam_timing_request& r, double* rep_us,
                              AmdTimeStats* stats) {
  if (r.num_sets < 1 || r.repetitions < 1 || !rep_us)
    return AmdFault{HTAM_ERR_INVALID_ARGUMENT, "timing request needs sets, repetitions and rep_us",
                    0};
  if (auto f = Select()) return f;
  if (!calibrated_)
    if (auto f = Calibrate()) return f;
  const HipApi& a = rt_->api();
  auto call = [&](int set) {
    return fn(r.inputs + size_t(set) * r.num_inputs, r.num_inputs,
              r.outputs + size_t(set) * r.num_outputs, r.num_outputs, stream_);
  };
  // Warm-up: untimed, checked calls.
  auto w0 = Clock::now();
  int warm = 0;
  while (warm < r.warmup_reps ||
         std::chrono::duration<double, std::milli>(Clock::now() - w0).count() < r.warmup_ms) {
    if (auto f = Call(fn, r.inputs + size_t(warm % r.num_sets) * r.num_inputs, r.num_inputs,
                      r.outputs + size_t(warm % r.num_sets) * r.num_outputs, r.num_outputs,
                      r.call_timeout_ms)) {
      return f;
    }
    if (++warm >= 100000) break;
  }
  stats->warmup_done = warm;
  uint64_t flush = r.flush_bytes ? std::min<uint64_t>(r.flush_bytes, flush_size_) : flush_size_;
  for (int rep = 0; rep < r.repetitions; ++rep) {
    int set = rep % r.num_sets;
    hipError_t e = hipSuccess;
    if (r.poison) {
      for (int o = 0; o < r.num_outputs && e == hipSuccess; ++o) {
        const htam_tensor& t = r.outputs[size_t(set) * r.num_outputs + o];
        e = a.MemsetAsync(t.data, r.poison_byte, TensorSpanBytes(t), S(stream_));
      }
    }
    if (e == hipSuccess && flush) e = a.MemsetAsync(flush_, rep & 0xff, flush, S(stream_));
    if (e == hipSuccess) e = a.DeviceSynchronize();
    if (e == hipSuccess) e = a.EventRecord(E(ev_start_), S(stream_));
    if (e != hipSuccess) return FromHip(e, "preparing repetition " + std::to_string(rep));
    (void)a.GetLastError();
    int rc = call(set);
    e = a.EventRecord(E(ev_stop_), nullptr);
    if (e != hipSuccess) return FromHip(e, "hipEventRecord");
    if (auto f = WaitIdle(ev_stop_, r.call_timeout_ms)) {
      f->kernel_rc = rc;
      return f;
    }
    if (rc != 0)
      return AmdFault{HTAM_ERR_KERNEL_FAILED, "htam_kernel returned " + std::to_string(rc), rc};
    e = a.EventRecord(E(ev_idle_), nullptr);
    if (e == hipSuccess) e = a.EventSynchronize(E(ev_idle_));
    float window_ms = 0, lag_ms = 0;
    if (e == hipSuccess) e = a.EventElapsedTime(&window_ms, E(ev_start_), E(ev_stop_));
    if (e == hipSuccess) e = a.EventElapsedTime(&lag_ms, E(ev_stop_), E(ev_idle_));
    if (e != hipSuccess) return FromHip(e, "reading the timing events");
    double us = window_ms * 1000.0;
    if (lag_ms * 1000.0 > lag_threshold_us_) {  // work outlived the closing event
      us += lag_ms * 1000.0;
      ++stats->off_stream_reps;
    }
    rep_us[rep] = us;
  }
  stats->clocks = ReadClocks();
  return std::nullopt;
}

}  // namespace htam::hip
