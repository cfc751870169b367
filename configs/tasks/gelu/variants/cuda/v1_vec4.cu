// gelu v1: 16-byte float4 loads/stores for the aligned body, scalar tail in the same launch.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float gelu(float v) {
  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

__global__ void gelu_vec4(const float* __restrict__ x, float* __restrict__ y, long n) {
  long n4 = n / 4;
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 v = reinterpret_cast<const float4*>(x)[i];
    v.x = gelu(v.x); v.y = gelu(v.y); v.z = gelu(v.z); v.w = gelu(v.w);
    reinterpret_cast<float4*>(y)[i] = v;
  }
  // tail: the first (n % 4) threads of the grid handle the last elements
  long t = n4 * 4 + i;
  if (i < 4 && t < n) y[t] = gelu(x[t]);
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1) return 1;
  long n = htam_numel(&in[0]);
  if (n == 0) return 0;
  long work = n / 4 > 4 ? n / 4 : 4;
  gelu_vec4<<<(unsigned)((work + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (float*)out[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
