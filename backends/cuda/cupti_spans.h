// Spans of device work from CUPTI activity records (kernels, memcpy, memset on EVERY stream), the
// method of NVIDIA's SOL-ExecBench: the time of a call is last end - first start of the work it
// issued, whatever streams it used. libcupti is loaded with dlopen (optional at run time).
// Used by the "cupti" timing mode (eval.cuda_timing_mode). NOT YET RUN ON A GPU.
// Thread-safety: CUPTI activity collection is process-wide; one CuptiSpans per process, used by
// the device thread; the buffer callbacks take an internal lock.
#pragma once

#include <memory>
#include <string>

#include "daemon/util/status.h"

namespace htam::cuda {

class CuptiSpans {
 public:
  // Loads libcupti and enables kernel/memcpy/memset activity records. Unavailable when absent.
  static Result<std::unique_ptr<CuptiSpans>> Open();
  ~CuptiSpans();

  // Flushes and forgets every record so far (call with the device idle, just before the call).
  void Begin();
  // Flushes (call with the device idle, after the call) and returns the span of the records
  // since Begin() in microseconds, and how many there were. 0 records = 0 us.
  double EndUs(int* records);

 private:
  CuptiSpans() = default;
  void* lib_ = nullptr;
};

}  // namespace htam::cuda
