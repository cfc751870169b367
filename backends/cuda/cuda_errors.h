// Classes of CUDA runtime errors, as the backend ABI reports them. A sticky error (illegal address,
// trap, misaligned access, launch failure) poisons the CUDA context for the rest of the process:
// only a fresh worker process recovers (EVALUATION-NOTES.md, KernelBench issue 76).
// Thread-safety: stateless functions.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace htam::cuda {

enum class CudaFault {
  kNone,
  kDeviceFault,   // sticky: the context is unusable in this process
  kOutOfMemory,   // allocation failed (not sticky)
  kLaunchFailed,  // a launch was refused cleanly (bad configuration, too much shared memory, ...)
  kUnavailable,   // no driver, no device
  kOther,         // any other API error (not sticky as far as the runtime tells)
};

CudaFault ClassifyCudaError(cudaError_t e);
// "cudaErrorIllegalAddress (an illegal memory access was encountered)"
std::string CudaErrorText(cudaError_t e);
const char* CudaFaultName(CudaFault f);

}  // namespace htam::cuda
