// Bug: writes one element past each end of the output. Defence: guard regions around buffers.
// Expected: Incorrect (guard bytes changed).
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void relu(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
  if (i == 0) { y[n] = 1.f; y[-1] = 1.f; }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  long n = htam_numel(&in[0]);
  if (n == 0) return 0;
  relu<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>((const float*)in[0].data,
                                                                     (float*)out[0].data, n);
  return 0;
}
