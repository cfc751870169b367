// Control: an honest relu with 16-byte loads where aligned (must pass the gate: Ok).
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void relu4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 v = x[i];
    v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
    y[i] = v;
  }
}
__global__ void relu_tail(const float* __restrict__ x, float* __restrict__ y, long start, long n) {
  long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  long n = htam_numel(&in[0]);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  const float* x = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  long n4 = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) % 16) ? 0 : n / 4;
  if (n4) relu4<<<(unsigned)((n4 + 255) / 256), 256, 0, s>>>((const float4*)x, (float4*)y, n4);
  long rest = n - 4 * n4;
  if (rest) relu_tail<<<(unsigned)((rest + 255) / 256), 256, 0, s>>>(x, y, 4 * n4, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
