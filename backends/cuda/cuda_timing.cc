// CudaDevice's timing protocol: the cache flush, the hold kernel, the launch-lag calibration, the
// CUPTI self-test and Time() in its three modes (cupti, sync, hold; backends/cuda/cuda_device.h).
#include <cmath>

#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_device_internal.h"
#include "backends/cuda/cuda_errors.h"

namespace htam::cuda {

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
    if (options_.cupti_batch) {
      cupti_batch_ = CuptiBatchSelfTest();
      if (!cupti_batch_) timing_note_ += "; one flush per repetition (batch self-test failed)";
    }
  }
}

// Batch mode must give each window exactly its own work: two windows of one memset each, with a
// memset between them (outside every window, as a repetition's preparation is).
bool CudaDevice::CuptiBatchSelfTest() {
  if (!cupti_->CanBatch()) return false;
  void* scratch = nullptr;
  if (cudaMalloc(&scratch, 1 << 20) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  std::vector<uint64_t> begin, end;
  cudaDeviceSynchronize();
  cupti_->BeginBatch();
  for (int w = 0; w < 2; ++w) {
    cudaMemsetAsync(scratch, 1, 1 << 20, cudaStreamLegacy);  // between windows: not counted
    cudaDeviceSynchronize();
    begin.push_back(cupti_->Now());
    cudaMemsetAsync(scratch, 0, 1 << 20, stream_);
    cudaDeviceSynchronize();
    end.push_back(cupti_->Now());
  }
  double spans[2] = {0, 0};
  int records[2] = {0, 0};
  cupti_->EndBatch(begin, end, spans, records);
  cudaFree(scratch);
  cudaGetLastError();
  return records[0] == 1 && records[1] == 1 && spans[0] > 0 && spans[1] > 0;
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

int CudaDevice::CallSet(htam_kernel_fn fn, const htam_timing_request& req, int set) {
  const htam_tensor* in = req.inputs + static_cast<ptrdiff_t>(set) * req.num_inputs;
  htam_tensor* out = req.outputs + static_cast<ptrdiff_t>(set) * req.num_outputs;
  return fn(in, req.num_inputs, out, req.num_outputs, static_cast<htam_stream>(stream_));
}

// Warm-up: at least warmup_reps calls and at least warmup_ms.
MaybeFault CudaDevice::WarmUp(htam_kernel_fn fn, const htam_timing_request& req, TimeStats* stats) {
  ResetPersistingL2();
  auto w0 = Clock::now();
  int warm = 0;
  while (warm < req.warmup_reps || (req.warmup_ms > 0 && MsSince(w0) < req.warmup_ms)) {
    cudaGetLastError();
    int rc = CallSet(fn, req, warm % req.num_sets);
    cudaEventRecord(idle_event_, cudaStreamLegacy);
    if (MaybeFault f = CheckAfter(rc, req.call_timeout_ms, idle_event_)) return f;
    ++warm;
    if (warm >= 100000) break;
  }
  if (stats) stats->warmup_done = warm;
  return std::nullopt;
}

// Outside the window of repetition `r` (input set `set`): poison, flush, reset persisting lines,
// then the hold kernel (hold mode) or device idle (cupti and sync).
void CudaDevice::PrepareRepetition(const htam_timing_request& req, int set, uint64_t flush, int r,
                                   bool hold) {
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
}

// Each repetition's time from its events (start, close, after: ev[3r..3r+2]) and, in cupti mode,
// its CUPTI span; counts the repetitions charged for off-stream work and those with no records.
void CudaDevice::ReadRepetitions(const std::vector<cudaEvent_t>& ev, int reps,
                                 const std::vector<double>& spans, const std::vector<int>& records,
                                 bool sync, double* rep_us, int* off_stream, int* empty) {
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
        ++*empty;
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
      ++*off_stream;
      window += lag - lag_median_us_;
    }
    rep_us[r] = window;
  }
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
  if (MaybeFault f = WarmUp(fn, req, stats)) return f;

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
  // cupti: one flush for all repetitions (each call's records are found by its window's CUPTI
  // timestamps) where CUPTI has timestamps; else a flush before and after every call.
  const bool batch = cupti_ && cupti_batch_;
  std::vector<uint64_t> win_begin, win_end;
  struct BatchEnd {  // leaves batch mode on every early way out (a fault), without a flush
    CuptiSpans* c;
    ~BatchEnd() {
      if (c) c->AbortBatch();
    }
  } batch_end{nullptr};
  if (batch) {
    win_begin.reserve(static_cast<size_t>(reps));
    win_end.reserve(static_cast<size_t>(reps));
    cupti_->BeginBatch();
    batch_end.c = cupti_.get();
  }
  if (sync) waiter_->SetActive(true);
  for (int r = 0; r < reps; ++r) {
    int set = r % req.num_sets;
    cudaEvent_t start = ev[3 * r], close = ev[3 * r + 1], after = ev[3 * r + 2];
    PrepareRepetition(req, set, flush, r, hold);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
      if (sync) waiter_->SetActive(false);
      destroy();
      return FromCuda(e, "preparing repetition");
    }
    if (batch)
      win_begin.push_back(cupti_->Now());  // the device is idle: the window opens
    else if (cupti_)
      cupti_->Begin();  // the device is idle: forget the preparation's records
    cudaEventRecord(start, stream_);
    int rc = CallSet(fn, req, set);
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
    if (batch)
      win_end.push_back(cupti_->Now());  // the device is idle again: the window closes
    else if (cupti_)
      spans[r] = cupti_->EndUs(&records[r]);
  }
  if (batch) {
    batch_end.c = nullptr;
    cupti_->EndBatch(win_begin, win_end, spans.data(), records.data());
  }
  if (sync) waiter_->SetActive(false);
  cudaError_t e = cudaEventSynchronize(ev[3 * (reps - 1) + 2]);
  if (e != cudaSuccess) {
    Fault f = FromCuda(e, "timing events");
    if (!poisoned_) destroy();
    return f;
  }
  int off_stream = 0, empty = 0;
  ReadRepetitions(ev, reps, spans, records, sync, rep_us, &off_stream, &empty);
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
}  // namespace htam::cuda
