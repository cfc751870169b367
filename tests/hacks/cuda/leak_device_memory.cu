// Not a cheat, a leak: a correct GELU that keeps a "scratch" buffer of 60 % of the device's
// memory in a static and never frees it. The allocation outlives the module: a runner that served
// the next candidate with it would leave that candidate 40 % of the device, and a second such
// candidate fails to allocate. Expected: Ok, with a note that the runner is replaced; the next
// candidate (this one again) Ok in a fresh runner (eval.runner_leak_mb; with 0 the second one
// fails, which is what the limit prevents). tests/gpu/cuda_daemon_gpu_test.cc.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void gelu(const float* __restrict__ x, float* __restrict__ y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
}

static void* scratch = nullptr;

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1) return 1;
  if (!scratch) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 3;
    if (cudaMalloc(&scratch, total_b / 10 * 6) != cudaSuccess) return 4;  // kept, never freed
  }
  long n = htam_numel(&in[0]);
  if (n == 0) return 0;
  gelu<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (float*)out[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
