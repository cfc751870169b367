// FAULT: floods stdout (400 MB), then computes a correct GELU. Expected: ResourceLimit ("output
// flood", eval.max_output_kb); the next candidate runs in a fresh runner
// (tests/gpu/cuda_daemon_gpu_test.cc, containment).
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

#include <cstdio>

__global__ void gelu(const float* __restrict__ x, float* __restrict__ y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  static char line[4096];
  for (int i = 0; i < 4095; ++i) line[i] = 'x';
  for (int i = 0; i < 100000; ++i) fwrite(line, 1, sizeof line, stdout);
  fflush(stdout);
  long n = htam_numel(&in[0]);
  gelu<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (float*)out[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
