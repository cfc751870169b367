// Hack: computes once per (input, output) pair and skips the work when called again with the same
// pointers (caching across timed calls). Defence: outputs poisoned before every timed repetition
// and verified afterwards. Expected: Incorrect.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void relu(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  static const void* seen_in[64];
  static void* seen_out[64];
  static int count = 0;
  for (int k = 0; k < count; ++k)
    if (seen_in[k] == in[0].data && seen_out[k] == out[0].data) return 0;
  if (count < 64) { seen_in[count] = in[0].data; seen_out[count] = out[0].data; ++count; }
  long n = htam_numel(&in[0]);
  if (n == 0) return 0;
  relu<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>((const float*)in[0].data,
                                                                     (float*)out[0].data, n);
  return 0;
}
