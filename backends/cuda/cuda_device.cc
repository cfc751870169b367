// CudaDevice: open, checked calls, the timing protocol, roofline probes.
#include "backends/cuda/cuda_device.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "backends/cuda/cuda_errors.h"

namespace htam::cuda {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Roofline probes: device code only, compiled with NVRTC for the device's arch.
constexpr const char* kProbeSource = R"(
extern "C" __global__ void htam_fma_probe(float* out, int iters, float seed) {
  float a0 = seed + threadIdx.x, a1 = a0 + 1.f, a2 = a0 + 2.f, a3 = a0 + 3.f;
  float a4 = a0 + 4.f, a5 = a0 + 5.f, a6 = a0 + 6.f, a7 = a0 + 7.f;
  const float b = 0.999999f, c = 1e-7f;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      a0 = fmaf(a0, b, c); a1 = fmaf(a1, b, c); a2 = fmaf(a2, b, c); a3 = fmaf(a3, b, c);
      a4 = fmaf(a4, b, c); a5 = fmaf(a5, b, c); a6 = fmaf(a6, b, c); a7 = fmaf(a7, b, c);
    }
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}
extern "C" __global__ void htam_mma_probe(float* out, int iters) {
  unsigned a0 = 0x3f803f80u ^ threadIdx.x, a1 = 0x3f003f00u, a2 = 0x3e803e80u, a3 = 0x3f403f40u;
  unsigned b0 = 0x3f803f80u, b1 = 0x3c003c00u ^ threadIdx.x;
  float c[4][4];
#pragma unroll
  for (int k = 0; k < 4; ++k) { c[k][0] = c[k][1] = c[k][2] = c[k][3] = 0.f; }
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
          "{%8,%9}, {%0,%1,%2,%3};"
          : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 4; ++k) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
// Fills every thread slot of every SM for `ns` nanoseconds: launched on the legacy stream just
// before the window opens, it absorbs the candidate's launch latency and keeps side-stream
// kernels from running before the window (they cannot be scheduled while it holds the SMs).
extern "C" __global__ void __launch_bounds__(256, 8) htam_hold(unsigned long long ns,
                                                             volatile unsigned* started,
                                                             unsigned ticket) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  if (started && blockIdx.x == 0 && threadIdx.x == 0) {
    *started = ticket;  // host-mapped: tells the host that the SMs are held now
    __threadfence_system();
  }
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
// Cache flush by reading: every line of the buffer is loaded once; the xor keeps the loads alive.
extern "C" __global__ void htam_flush_read(const uint4* buf, unsigned long long n, unsigned* sink) {
  unsigned acc = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    uint4 v = buf[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}
)";

}  // namespace

// Sync mode: a thread that runs cudaDeviceSynchronize on request, so that the device thread can
// bound the wait (a hang on any stream becomes a timeout) and still see device idle the same way
// whatever streams the candidate used: the helper is already blocked in the synchronization when
// the work ends, for work on the handed stream and on the candidate's own streams alike. While a
// timing is active (SetActive) the helper spins for requests instead of sleeping, so that no
// wake-up latency lands in the window. Created at device open (the gate counts threads around
// calls). After a timeout the helper may stay blocked forever: it is detached, never joined.
class IdleWaiter {
 public:
  explicit IdleWaiter(int device) : st_(std::make_shared<State>()) {
    std::shared_ptr<State> st = st_;
    thread_ = std::thread([st, device] { Loop(st, device); });
  }
  ~IdleWaiter() {
    st_->stop = true;
    st_->cv.notify_all();
    if (stuck_) {
      thread_.detach();  // blocked in a synchronization that never ends; the process exits soon
    } else {
      thread_.join();
    }
  }
  void SetActive(bool on) {
    st_->active = on;
    st_->cv.notify_all();
  }
  // Device-wide synchronization on the helper; false when it did not end within timeout_ms.
  bool Sync(double timeout_ms, cudaError_t* err) {
    unsigned ticket = ++ticket_;
    st_->request.store(ticket, std::memory_order_release);
    if (!st_->active) st_->cv.notify_all();
    auto t0 = std::chrono::steady_clock::now();
    while (st_->done.load(std::memory_order_acquire) != ticket) {
      if (timeout_ms > 0 &&
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() >
              timeout_ms) {
        stuck_ = true;
        return false;
      }
    }
    *err = static_cast<cudaError_t>(st_->err.load());
    return true;
  }

 private:
  struct State {
    std::atomic<unsigned> request{0}, done{0};
    std::atomic<int> err{0};
    std::atomic<bool> stop{false}, active{false};
    std::mutex mu;
    std::condition_variable cv;
  };
  static void Loop(const std::shared_ptr<State>& st, int device) {
    cudaSetDevice(device);
    unsigned seen = 0;
    while (!st->stop) {
      unsigned r = st->request.load(std::memory_order_acquire);
      if (r == seen) {
        if (st->active) continue;  // spinning: a request comes within microseconds
        std::unique_lock<std::mutex> l(st->mu);
        st->cv.wait_for(l, std::chrono::milliseconds(20),
                        [&] { return st->stop || st->active || st->request.load() != seen; });
        continue;
      }
      seen = r;
      cudaError_t e = cudaDeviceSynchronize();
      st->err.store(static_cast<int>(e));
      st->done.store(r, std::memory_order_release);
    }
  }
  std::shared_ptr<State> st_;
  std::thread thread_;
  unsigned ticket_ = 0;
  bool stuck_ = false;
};

CudaDevice::CudaDevice() = default;

const char* ProbeSource() {
  return kProbeSource;
}

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

Status CudaDevice::EnsureFlushBuffer(uint64_t bytes) {
  if (flush_ && flush_size_ >= bytes) return Status::OK();
  if (flush_) cudaFree(flush_);
  flush_ = nullptr;
  flush_size_ = 0;
  cudaError_t e = cudaMalloc(&flush_, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    flush_ = nullptr;
    return Status::ResourceExhausted("cannot allocate the L2 flush buffer: " + CudaErrorText(e));
  }
  flush_size_ = bytes;
  return Status::OK();
}

void CudaDevice::ResetPersistingL2() {
  // Persisting lines would let a candidate keep its data in L2 across repetitions (llm.c PR 851).
  cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
  cudaCtxResetPersistingL2Cache();
  cudaStreamAttrValue v{};
  v.accessPolicyWindow.base_ptr = nullptr;
  v.accessPolicyWindow.num_bytes = 0;
  v.accessPolicyWindow.hitRatio = 0.f;
  v.accessPolicyWindow.hitProp = cudaAccessPropertyNormal;
  v.accessPolicyWindow.missProp = cudaAccessPropertyNormal;
  cudaStreamSetAttribute(stream_, cudaStreamAttributeAccessPolicyWindow, &v);
  cudaGetLastError();  // devices without persisting L2 refuse these calls; that is fine
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

// CUPTI must deliver records of this process's work, or the mode would time everything as 0 us:
// a short kernel (or a memset) is run with the device idle and must show up as one span. Also
// makes CUPTI start its own threads now, before any call that the gate brackets with a thread
// census.
void CudaDevice::CuptiSelfTest() {
  cudaDeviceSynchronize();
  cupti_->Begin();
  // One of each kind of work CUPTI is asked to record: a memset and a copy through the runtime,
  // and (where the probes loaded) a kernel through the driver API.
  void* scratch = nullptr;
  const size_t bytes = 1 << 20;
  if (cudaMalloc(&scratch, 2 * bytes) == cudaSuccess) {
    cudaMemsetAsync(scratch, 0, bytes, stream_);
    cudaMemcpyAsync(static_cast<char*>(scratch) + bytes, scratch, bytes, cudaMemcpyDeviceToDevice,
                    stream_);
  }
  if (have_probes_) Hold(stream_, 5.0, false);
  cudaError_t e = cudaDeviceSynchronize();
  int records = 0;
  double span = cupti_->EndUs(&records);
  if (scratch) cudaFree(scratch);
  cudaGetLastError();
  if (e != cudaSuccess || records < 1 || span <= 0) {
    timing_note_ = "CUPTI self-test saw " + std::to_string(records) + " records (span " +
                   std::to_string(span) + " us, " + cupti_->library() + "): sync timing mode";
    cupti_.reset();
  } else {
    timing_note_ = "CUPTI " + cupti_->library() + ": self-test " + std::to_string(records) +
                   " records, span " + std::to_string(span) + " us";
  }
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

MaybeFault CudaDevice::CalibrateLag() {
  // The closing sequence around a short honest kernel on the candidate's stream: close event on
  // the stream, idle event on the legacy stream, poll, device sync, "after" event. Its lag
  // (after - close) is what an honest candidate shows; more means work outlived the stream.
  int n = std::max(8, options_.calibration_reps);
  std::vector<double> lags;
  cudaEvent_t close, after;
  cudaEventCreate(&close);
  cudaEventCreate(&after);
  for (int i = 0; i < n; ++i) {
    Hold(stream_, 2.0, false);
    cudaEventRecord(close, stream_);
    cudaEventRecord(idle_event_, cudaStreamLegacy);
    if (MaybeFault f = WaitIdle(idle_event_, 10000)) {
      cudaEventDestroy(close);
      cudaEventDestroy(after);
      return f;
    }
    cudaEventRecord(after, stream_);
    cudaEventSynchronize(after);
    float ms = 0;
    cudaEventElapsedTime(&ms, close, after);
    lags.push_back(ms * 1000.0);
  }
  // Sync mode: the whole sequence of a repetition around an empty call (device idle, start,
  // device sync on the helper, after), with the helper spinning as during a timing.
  std::vector<double> empties;
  if (options_.sync_window && waiter_) {
    cudaEvent_t start;
    cudaEventCreate(&start);
    waiter_->SetActive(true);
    for (int i = 0; i < n; ++i) {
      cudaDeviceSynchronize();
      cudaEventRecord(start, stream_);
      if (MaybeFault f = SyncIdle(10000)) {
        waiter_->SetActive(false);
        cudaEventDestroy(start);
        cudaEventDestroy(close);
        cudaEventDestroy(after);
        return f;
      }
      cudaEventRecord(after, stream_);
      cudaEventSynchronize(after);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, after);
      empties.push_back(ms * 1000.0);
    }
    waiter_->SetActive(false);
    cudaEventDestroy(start);
    sync_empty_us_ = Quantile(empties, 0.5);
  }
  cudaEventDestroy(close);
  cudaEventDestroy(after);
  cudaGetLastError();
  lag_median_us_ = Quantile(lags, 0.5);
  lag_p90_us_ = Quantile(lags, 0.9);
  lag_calibrated_ = true;
  return std::nullopt;
}

void CudaDevice::Flush(uint64_t bytes, int rep) {
  // Reading (not writing) 2x L2 leaves only clean lines: no write-back of dirty flush lines is
  // charged to the candidate's window. On the legacy stream: blocking side streams cannot overlap.
  if (have_probes_) {
    const uint64_t n16 = bytes / 16;
    void* sink = static_cast<char*>(flush_) + (bytes - 16);
    void* buf = flush_;
    unsigned long long n = n16 > 1 ? n16 - 1 : 0;
    void* args[] = {&buf, &n, &sink};
    int blocks = props_.sm_count * 8;
    if (probes_.Launch("htam_flush_read", dim3(blocks), dim3(512), args, cudaStreamLegacy).ok())
      return;
    have_probes_ = false;
  }
  cudaMemsetAsync(flush_, (rep & 0x7f) + 1, bytes, cudaStreamLegacy);
}

MaybeFault CudaDevice::Time(htam_kernel_fn fn, const htam_timing_request& req, double* rep_us,
                            TimeStats* stats) {
  if (poisoned_) return Fault{HTAM_ERR_DEVICE_FAULT, "device unusable after an earlier fault", 0};
  if (req.num_sets < 1 || req.repetitions < 1 || rep_us == nullptr || req.num_inputs < 0 ||
      req.num_outputs < 0 || (req.num_inputs > 0 && !req.inputs) ||
      (req.num_outputs > 0 && !req.outputs)) {
    return Fault{HTAM_ERR_INVALID_ARGUMENT, "bad timing request", 0};
  }
  // At least 2x L2 whatever the host asks (a smaller flush leaves part of the working set and
  // dirty lines of the poison in L2); larger requests are honoured.
  uint64_t flush = std::max<uint64_t>(
      {req.flush_bytes, 2 * props_.l2_bytes, options_.flush_min_bytes, options_.flush_bytes});
  if (Status s = EnsureFlushBuffer(flush); !s.ok())
    return Fault{HTAM_ERR_OUT_OF_MEMORY, s.message(), 0};
  if (!lag_calibrated_) {
    if (MaybeFault f = CalibrateLag()) return f;
  }
  auto call = [&](int set) {
    const htam_tensor* in = req.inputs + static_cast<ptrdiff_t>(set) * req.num_inputs;
    htam_tensor* out = req.outputs + static_cast<ptrdiff_t>(set) * req.num_outputs;
    return fn(in, req.num_inputs, out, req.num_outputs, static_cast<htam_stream>(stream_));
  };

  // Warm-up: at least warmup_reps calls and at least warmup_ms.
  ResetPersistingL2();
  auto w0 = Clock::now();
  int warm = 0;
  while (warm < req.warmup_reps || (req.warmup_ms > 0 && MsSince(w0) < req.warmup_ms)) {
    cudaGetLastError();
    int rc = call(warm % req.num_sets);
    cudaEventRecord(idle_event_, cudaStreamLegacy);
    if (MaybeFault f = CheckAfter(rc, req.call_timeout_ms, idle_event_)) return f;
    ++warm;
    if (warm >= 100000) break;
  }
  if (stats) stats->warmup_done = warm;

  const int reps = req.repetitions;
  std::vector<cudaEvent_t> ev(3 * static_cast<size_t>(reps), nullptr);
  for (auto& e : ev) {
    if (cudaEventCreate(&e) != cudaSuccess) {
      for (auto& x : ev)
        if (x) cudaEventDestroy(x);
      return Fault{HTAM_ERR_INTERNAL, "cudaEventCreate failed", 0};
    }
  }
  auto destroy = [&] {
    for (auto& x : ev)
      if (x) cudaEventDestroy(x);
  };
  std::vector<double> spans(static_cast<size_t>(reps), 0.0);  // cupti mode
  std::vector<int> records(static_cast<size_t>(reps), 0);
  const bool sync = !cupti_ && options_.sync_window && waiter_;
  const bool hold = !cupti_ && !sync;
  if (sync) waiter_->SetActive(true);
  for (int r = 0; r < reps; ++r) {
    int set = r % req.num_sets;
    cudaEvent_t start = ev[3 * r], close = ev[3 * r + 1], after = ev[3 * r + 2];
    // Outside the window: poison, flush, reset persisting lines.
    if (req.poison) {
      htam_tensor* out = req.outputs + static_cast<ptrdiff_t>(set) * req.num_outputs;
      for (int o = 0; o < req.num_outputs; ++o) {
        uint64_t n = TensorExtentBytes(out[o]);
        if (n) cudaMemsetAsync(out[o].data, req.poison_byte, n, cudaStreamLegacy);
      }
    }
    Flush(flush, r);
    ResetPersistingL2();
    if (hold) {
      // On the candidate's stream (which waits for the legacy-stream flush): fills the SMs while
      // the candidate's launches queue up, so the window opens with the work ready.
      Hold(stream_, options_.hold_us, /*wait_started=*/true);
    } else {
      // cupti and sync: the device is idle when the call starts, so everything that runs until
      // the device is idle again is the call's.
      cudaDeviceSynchronize();
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
      if (sync) waiter_->SetActive(false);
      destroy();
      return FromCuda(e, "preparing repetition");
    }
    if (cupti_) cupti_->Begin();  // the device is idle: forget the preparation's records
    cudaEventRecord(start, stream_);
    int rc = call(set);
    MaybeFault f;
    if (sync) {
      // The end is device idle seen by the helper (already blocked in the synchronization when
      // the work ends, wherever it runs); no polling step whose cost differs between work on the
      // handed stream and work elsewhere.
      cudaError_t launch = cudaGetLastError();
      f = SyncIdle(req.call_timeout_ms);
      if (!f && launch != cudaSuccess) f = FromCuda(launch, "kernel launch");
      if (!f && rc != 0)
        f = Fault{HTAM_ERR_KERNEL_FAILED, "htam_kernel returned " + std::to_string(rc), rc};
      cudaEventRecord(close, stream_);
    } else {
      cudaEventRecord(close, stream_);
      cudaEventRecord(idle_event_, cudaStreamLegacy);
      f = CheckAfter(rc, req.call_timeout_ms, idle_event_);
    }
    if (f) {
      if (sync) waiter_->SetActive(false);
      if (!poisoned_) destroy();
      return f;
    }
    cudaEventRecord(after, stream_);
    if (cupti_) spans[r] = cupti_->EndUs(&records[r]);
  }
  if (sync) waiter_->SetActive(false);
  cudaError_t e = cudaEventSynchronize(ev[3 * (reps - 1) + 2]);
  if (e != cudaSuccess) {
    Fault f = FromCuda(e, "timing events");
    if (!poisoned_) destroy();
    return f;
  }
  int off_stream = 0, empty = 0;
  // Not widened by the calibration's spread: a noisy host must not let a short side-stream kernel
  // hide under the threshold (a false positive only adds a few microseconds to one repetition).
  double threshold = lag_median_us_ + options_.lag_slack_us;
  for (int r = 0; r < reps; ++r) {
    float window_ms = 0, lag_ms = 0;
    cudaEventElapsedTime(&window_ms, ev[3 * r], ev[3 * r + 1]);
    cudaEventElapsedTime(&lag_ms, ev[3 * r + 1], ev[3 * r + 2]);
    double window = window_ms * 1000.0, lag = lag_ms * 1000.0;
    if (cupti_) {
      // A call that issued no device work at all (CUPTI saw nothing) gets its event window:
      // launch overhead only, never 0.
      if (records[r] > 0) {
        rep_us[r] = spans[r];
      } else {
        ++empty;
        rep_us[r] = std::max(window, 0.001);
      }
      continue;
    }
    if (sync) {
      // start -> close spans the call up to device idle (close is recorded after it).
      rep_us[r] = std::max(0.001, window - sync_empty_us_);
      continue;
    }
    // Relative slack too: on long calls the host may be descheduled while it waits.
    if (lag > threshold + 0.02 * window) {
      // Work on another stream outlived the candidate's stream: charge it up to device idle.
      ++off_stream;
      window += lag - lag_median_us_;
    }
    rep_us[r] = window;
  }
  destroy();
  cudaGetLastError();
  if (stats) {
    stats->off_stream_reps = off_stream;
    stats->empty_reps = empty;
    stats->lag_us_calibrated = lag_median_us_;
    stats->clocks = clocks_->Read();
  }
  return std::nullopt;
}

void CudaDevice::Hold(cudaStream_t s, double us, bool wait_started) {
  if (!have_probes_ || us <= 0) return;
  unsigned long long ns = static_cast<unsigned long long>(us * 1000.0);
  unsigned ticket = ++hold_ticket_;
  void* flag = wait_started ? hold_flag_device_ : nullptr;
  void* args[] = {&ns, &flag, &ticket};
  // 256-thread blocks capped at 32 registers (launch bounds): max_threads_per_sm / 256 of them
  // are resident on every SM at once, so no thread slot is left for another kernel.
  int blocks = props_.sm_count * std::max(1, props_.max_threads_per_sm / 256);
  if (!probes_.Launch("htam_hold", dim3(blocks), dim3(256), args, s).ok()) {
    have_probes_ = false;
    return;
  }
  if (!flag) return;
  // Wait (bounded) until the hold runs: only then may the candidate launch, so that kernels it
  // puts on other streams find every SM busy and cannot run before the window opens.
  auto t0 = Clock::now();
  while (*hold_flag_host_ != ticket && MsSince(t0) < 2000) {
  }
}

void CudaDevice::MeasureRoofline() {
  auto t0 = Clock::now();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  // 1. Copy bandwidth: a large device-to-device copy, bytes read + written.
  uint64_t n = options_.measure_roofline
                   ? std::min<uint64_t>(options_.roofline_copy_bytes, props_.memory_bytes / 8)
                   : 0;
  void *src = nullptr, *dst = nullptr;
  if (n >= (1u << 20) && cudaMalloc(&src, n) == cudaSuccess && cudaMalloc(&dst, n) == cudaSuccess) {
    cudaMemsetAsync(src, 1, n, stream_);
    double best = 0;
    for (int i = 0; i < 6; ++i) {
      cudaEventRecord(a, stream_);
      cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream_);
      cudaEventRecord(b, stream_);
      cudaEventSynchronize(b);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      if (i > 0 && ms > 0) best = std::max(best, 2.0 * static_cast<double>(n) / (ms * 1e-3));
    }
    roofline_.copy_bytes_per_s = best;
  }
  if (src) cudaFree(src);
  if (dst) cudaFree(dst);
  cudaGetLastError();

  // 2. Arithmetic rates: NVRTC-compiled probes.
  auto compiled = NvrtcCompile(kProbeSource, "htam_probes.cu", props_.arch, {});
  if (!compiled.ok() || !compiled->ok) {
    roofline_.note =
        "probe compile failed: " + (compiled.ok() ? compiled->log : compiled.status().ToString());
  } else if (Status s = probes_.Load(compiled->cubin); !s.ok()) {
    roofline_.note = "probe load failed: " + s.ToString();
  } else {
    have_probes_ = true;
    void* hflag = nullptr;
    if (cudaHostAlloc(&hflag, sizeof(unsigned), cudaHostAllocMapped) == cudaSuccess) {
      hold_flag_host_ = static_cast<volatile unsigned*>(hflag);
      *hold_flag_host_ = 0;
      if (cudaHostGetDevicePointer(&hold_flag_device_, hflag, 0) != cudaSuccess)
        hold_flag_device_ = nullptr;
    }
    cudaGetLastError();
    int threads = 256, blocks = props_.sm_count * 8;
    float* out = nullptr;
    if (cudaMalloc(reinterpret_cast<void**>(&out), sizeof(float) * threads * blocks) ==
        cudaSuccess) {
      auto rate = [&](const char* kernel, void** args, double flops) {
        double best = 0;
        for (int i = 0; i < 4; ++i) {
          cudaEventRecord(a, stream_);
          if (!probes_.Launch(kernel, dim3(blocks), dim3(threads), args, stream_).ok()) return 0.0;
          cudaEventRecord(b, stream_);
          cudaEventSynchronize(b);
          float ms = 0;
          cudaEventElapsedTime(&ms, a, b);
          if (i > 0 && ms > 0) best = std::max(best, flops / (ms * 1e-3));
        }
        return best;
      };
      int iters = options_.measure_roofline ? 2048 : 0;
      float seed = 1.0f;
      void* fma_args[] = {&out, &iters, &seed};
      roofline_.fp32_flops =
          rate("htam_fma_probe", fma_args, 2.0 * 8 * 16 * double(iters) * threads * blocks);
      int mma_iters = options_.measure_roofline ? 2048 : 0;
      void* mma_args[] = {&out, &mma_iters};
      double warps = double(threads) / 32 * blocks;
      roofline_.tensor16_flops =
          rate("htam_mma_probe", mma_args, warps * mma_iters * 4 * (2.0 * 16 * 8 * 16));
      cudaFree(out);
    }
    cudaGetLastError();
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGetLastError();
  if (roofline_.note.empty()) {
    roofline_.note = "measured in " + std::to_string(static_cast<int>(MsSince(t0))) + " ms";
  }
}

}  // namespace htam::cuda
