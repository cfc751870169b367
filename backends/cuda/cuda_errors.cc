// Mapping of cudaError_t to fault classes (CUDA 13 runtime error codes).
#include "backends/cuda/cuda_errors.h"

namespace htam::cuda {

CudaFault ClassifyCudaError(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return CudaFault::kNone;
    // Sticky errors: "the process is in an inconsistent state and any further CUDA work will
    // return the same error" (CUDA runtime API documentation of each code).
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorUnknown: return CudaFault::kDeviceFault;
    case cudaErrorMemoryAllocation: return CudaFault::kOutOfMemory;
    case cudaErrorLaunchOutOfResources:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDeviceFunction:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorCooperativeLaunchTooLarge:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorSharedObjectInitFailed:
    case cudaErrorInvalidKernelImage:
    case cudaErrorUnsupportedPtxVersion: return CudaFault::kLaunchFailed;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError: return CudaFault::kUnavailable;
    default: return CudaFault::kOther;
  }
}

std::string CudaErrorText(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

const char* CudaFaultName(CudaFault f) {
  switch (f) {
    case CudaFault::kNone: return "none";
    case CudaFault::kDeviceFault: return "device fault";
    case CudaFault::kOutOfMemory: return "out of memory";
    case CudaFault::kLaunchFailed: return "launch failed";
    case CudaFault::kUnavailable: return "unavailable";
    case CudaFault::kOther: return "error";
  }
  return "error";
}

}  // namespace htam::cuda
