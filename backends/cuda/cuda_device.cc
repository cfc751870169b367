// CudaDevice: open and close, properties, checked calls and the bounded wait for device idle.
// The timing protocol is in cuda_timing.cc, the roofline probes and the backend's own kernels in
// cuda_roofline.cc.
#include "backends/cuda/cuda_device.h"

#include "backends/cuda/cuda_device_internal.h"
#include "backends/cuda/cuda_errors.h"

namespace htam::cuda {

CudaDevice::CudaDevice() = default;

uint64_t TensorExtentBytes(const htam_tensor& t) {
  if (t.ndim < 0 || t.ndim > HTAM_MAX_DIMS) return 0;
  uint64_t last = 0;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] <= 0) return 0;
    int64_t stride = t.strides[i];
    if (stride < 0) return 0;
    last += static_cast<uint64_t>(t.shape[i] - 1) * static_cast<uint64_t>(stride);
  }
  return (last + 1) * static_cast<uint64_t>(htam_dtype_size(t.dtype));
}

Result<DeviceProps> CudaDevice::Probe(int index) {
  DeviceProps p;
  cudaDeviceProp prop{};
  cudaError_t e = cudaGetDeviceProperties(&prop, index);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return Status::Unavailable("cudaGetDeviceProperties(" + std::to_string(index) +
                               "): " + CudaErrorText(e));
  }
  p.index = index;
  p.name = prop.name;
  p.cc_major = prop.major;
  p.cc_minor = prop.minor;
  // Arch-specific targets (wgmma, setmaxnreg on 9.0; tcgen05 on 10.x) need the "a" variant.
  bool arch_specific = (prop.major == 9 && prop.minor == 0) || prop.major == 10;
  p.arch =
      "sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + (arch_specific ? "a" : "");
  p.sm_count = prop.multiProcessorCount;
  p.l2_bytes = static_cast<uint64_t>(prop.l2CacheSize);
  p.max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  p.memory_bytes = prop.totalGlobalMem;
  cudaDeviceGetAttribute(&p.peak_sm_khz, cudaDevAttrClockRate, index);
  cudaDeviceGetAttribute(&p.peak_mem_khz, cudaDevAttrMemoryClockRate, index);
  char bus[64] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, index) == cudaSuccess) p.pci_bus_id = bus;
  cudaGetLastError();
  return p;
}

Result<std::unique_ptr<CudaDevice>> CudaDevice::Open(int index, const DeviceOptions& options) {
  std::unique_ptr<CudaDevice> d(new CudaDevice());
  HTAM_RETURN_IF_ERROR(d->Init(index, options));
  return d;
}

Status CudaDevice::Init(int index, const DeviceOptions& options) {
  options_ = options;
  HTAM_ASSIGN_OR_RETURN(props_, Probe(index));
  if (options_.cupti) {
    // Before the context exists, so that CUPTI sees it from its creation.
    auto c = CuptiSpans::Open();
    if (c.ok()) {
      cupti_ = std::move(c).value();
    } else {
      timing_note_ = "CUPTI unavailable (" + c.status().message() + "): sync timing mode";
    }
  }
  cudaError_t e = cudaSetDevice(index);
  if (e == cudaSuccess) e = cudaFree(nullptr);  // creates the primary context now
  if (e != cudaSuccess) return Status::Unavailable("cannot open CUDA device: " + CudaErrorText(e));
  // A blocking stream: the legacy default stream waits for it, which closes the timing window.
  if ((e = cudaStreamCreateWithFlags(&stream_, cudaStreamDefault)) != cudaSuccess ||
      (e = cudaEventCreate(&idle_event_)) != cudaSuccess) {
    return Status::Internal("stream/event creation: " + CudaErrorText(e));
  }
  clocks_ =
      std::make_unique<NvmlClocks>(props_.pci_bus_id, props_.peak_sm_khz, props_.peak_mem_khz);
  MeasureRoofline();
  if (cupti_) CuptiSelfTest();
  if (options_.cupti && !cupti_) options_.sync_window = true;  // every stream still counted
  if (options_.sync_window) waiter_ = std::make_unique<IdleWaiter>(index);
  return Status::OK();
}

CudaDevice::~CudaDevice() {
  // After a fault or a timeout nothing may wait on the device: a hung kernel never ends, and
  // unloading a module or freeing memory would wait for it. The process exits soon anyway.
  if (poisoned_) {
    probes_.Leak();
    // No CUPTI flush on a dead context (it could wait on work that never ends).
    static_cast<void>(cupti_.release());
  }
  waiter_.reset();  // joins the helper, or detaches it when it is stuck in a synchronization
  if (!poisoned_) {
    cudaDeviceSynchronize();
    if (flush_) cudaFree(flush_);
    if (hold_flag_host_) cudaFreeHost(const_cast<unsigned*>(hold_flag_host_));
    if (idle_event_) cudaEventDestroy(idle_event_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaGetLastError();
}

Fault CudaDevice::FromCuda(cudaError_t e, const std::string& what) {
  Fault f;
  CudaFault c = ClassifyCudaError(e);
  switch (c) {
    case CudaFault::kDeviceFault:
      f.code = HTAM_ERR_DEVICE_FAULT;
      poisoned_ = true;
      break;
    case CudaFault::kOutOfMemory: f.code = HTAM_ERR_OUT_OF_MEMORY; break;
    case CudaFault::kLaunchFailed: f.code = HTAM_ERR_KERNEL_FAILED; break;
    case CudaFault::kUnavailable: f.code = HTAM_ERR_UNAVAILABLE; break;
    default: f.code = HTAM_ERR_KERNEL_FAILED; break;
  }
  f.message = what + ": " + CudaErrorText(e);
  return f;
}

// Waits until `closing` (recorded on the legacy stream) has completed, polling against a deadline,
// then synchronizes the whole device and collects launch errors.
MaybeFault CudaDevice::WaitIdle(cudaEvent_t closing, double timeout_ms) {
  auto t0 = Clock::now();
  for (;;) {
    cudaError_t q = cudaEventQuery(closing);
    if (q == cudaSuccess) break;
    if (q != cudaErrorNotReady) return FromCuda(q, "kernel execution");
    if (timeout_ms > 0 && MsSince(t0) > timeout_ms) {
      poisoned_ = true;  // the kernel may still run; only a new process gets the device back
      return Fault{HTAM_ERR_TIMEOUT,
                   "candidate still running after " + std::to_string(timeout_ms) + " ms", 0};
    }
    std::this_thread::yield();
  }
  cudaError_t e = cudaDeviceSynchronize();  // non-blocking streams too
  if (e != cudaSuccess) return FromCuda(e, "kernel execution");
  return std::nullopt;
}

MaybeFault CudaDevice::CheckAfter(int rc, double timeout_ms, cudaEvent_t closing) {
  // A launch refused by the runtime (bad configuration, too much shared memory) leaves its error
  // on this thread; read it before waiting so that it is not confused with a fault.
  cudaError_t launch = cudaGetLastError();
  if (MaybeFault f = WaitIdle(closing, timeout_ms)) return f;
  if (launch != cudaSuccess) return FromCuda(launch, "kernel launch");
  cudaError_t late = cudaGetLastError();
  if (late != cudaSuccess) return FromCuda(late, "kernel launch");
  if (rc != 0) {
    return Fault{HTAM_ERR_KERNEL_FAILED, "htam_kernel returned " + std::to_string(rc), rc};
  }
  return std::nullopt;
}

MaybeFault CudaDevice::SyncIdle(double timeout_ms) {
  cudaError_t e = cudaSuccess;
  if (!waiter_->Sync(timeout_ms, &e)) {
    poisoned_ = true;  // the work may still run; only a new process gets the device back
    return Fault{HTAM_ERR_TIMEOUT,
                 "candidate still running after " + std::to_string(timeout_ms) + " ms", 0};
  }
  if (e != cudaSuccess) return FromCuda(e, "kernel execution");
  return std::nullopt;
}

MaybeFault CudaDevice::Call(htam_kernel_fn fn, const htam_tensor* in, int nin, htam_tensor* out,
                            int nout, double timeout_ms) {
  if (poisoned_) return Fault{HTAM_ERR_DEVICE_FAULT, "device unusable after an earlier fault", 0};
  cudaGetLastError();  // never inherit a pending error from earlier code
  int rc = fn(in, nin, out, nout, static_cast<htam_stream>(stream_));
  cudaError_t e = cudaEventRecord(idle_event_, cudaStreamLegacy);
  if (e != cudaSuccess) return FromCuda(e, "after htam_kernel");
  return CheckAfter(rc, timeout_ms, idle_event_);
}
}  // namespace htam::cuda
