// Spans of device work from CUPTI activity records (kernels, memcpy, memset on EVERY stream of
// every context of the process), the method of NVIDIA's SOL-ExecBench: the time of a call is the
// last end minus the first start of the work it issued, whatever streams it used. libcupti is
// loaded with dlopen (optional at run time). Used by the "cupti" timing mode
// (eval.cuda_timing_mode, the default).
// Thread-safety: CUPTI activity collection is process-wide, so at most one CuptiSpans exists per
// process (a second Open is Unavailable); it is used by the device thread; the buffer callbacks
// take an internal lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace htam::cuda {

class CuptiSpans {
 public:
  // Loads libcupti and enables kernel/memcpy/memset activity records. Unavailable when absent.
  // Call before the CUDA context is created where possible (records of every context are
  // collected either way). Search order: $HTAM_CUPTI_LIBRARY, the directory of the loaded
  // libcudart, the loader's path (libcupti.so.13, libcupti.so), /usr/local/cuda/{lib64,lib,
  // extras/CUPTI/lib64, targets/x86_64-linux/lib}.
  static Result<std::unique_ptr<CuptiSpans>> Open();
  ~CuptiSpans();

  // Flushes and forgets every record so far, and starts a new span at the current CUPTI
  // timestamp (call with the device idle, just before the call): records that ended before it
  // are never counted, even if CUPTI delivers them late.
  void Begin();
  // Flushes (call with the device idle, after the call) and returns the span of the records
  // since Begin() in microseconds, and how many there were. 0 records = 0 us.
  double EndUs(int* records);

  // Batch mode: many calls, ONE flush. BeginBatch() flushes and starts keeping every record;
  // around call r the caller reads Now() just before it starts (device idle) and again once the
  // device is idle after it; EndBatch() flushes once and gives each call the span of the records
  // that started inside its window [begin[r], end[r]] (records outside every window, such as the
  // preparation between calls, are not counted). The same spans as Begin()/EndUs() per call,
  // without two forced flushes per call. Needs CUPTI's timestamp (CanBatch()).
  bool CanBatch() const;
  uint64_t Now() const;
  void BeginBatch();
  void EndBatch(const std::vector<uint64_t>& begin, const std::vector<uint64_t>& end,
                double* spans_us, int* records);
  // Leaves batch mode without a flush (a fault: the device may be hung or poisoned).
  void AbortBatch();
  // The library that was loaded.
  const std::string& library() const { return path_; }

 private:
  CuptiSpans() = default;
  void* lib_ = nullptr;
  std::string path_;
};

}  // namespace htam::cuda
