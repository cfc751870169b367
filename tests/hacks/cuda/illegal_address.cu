// Bug: writes through a wild pointer -> cudaErrorIllegalAddress, a sticky error that poisons the
// CUDA context. Expected: Crash naming the CUDA error; the worker must be restarted (the tests
// run it in a child process and then evaluate a good candidate in a fresh one).
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void wild(float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  float* p = reinterpret_cast<float*>(0x10) + i;
  if (i < n) *p = 1.f;
  y[0] = 0.f;
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  long n = htam_numel(&in[0]);
  wild<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>((float*)out[0].data, n);
  return 0;
}
