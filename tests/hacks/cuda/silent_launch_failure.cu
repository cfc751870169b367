// Hack: a launch that fails (asks for more dynamic shared memory than a block may have) and
// swallows the error, returning success with garbage outputs. Defence: outputs poisoned, launch
// errors checked. Expected: Incorrect (the outputs were never written).
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void relu(const float* x, float* y, long n) {
  extern __shared__ float scratch[];
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) { scratch[threadIdx.x] = x[i]; y[i] = scratch[threadIdx.x] > 0.f ? scratch[threadIdx.x] : 0.f; }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  long n = htam_numel(&in[0]);
  if (n == 0) return 0;
  relu<<<(unsigned)((n + 255) / 256), 256, 512 * 1024, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (float*)out[0].data, n);
  cudaGetLastError();  // swallow the launch error
  return 0;
}
