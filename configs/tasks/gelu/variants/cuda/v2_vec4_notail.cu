// gelu v2: float4 body only, launched over n/4 vectors. Dead end: the n % 4 tail is never
// written, which the seen shapes (multiples of 4) do not reveal.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float gelu(float v) {
  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

__global__ void gelu_vec4(const float* __restrict__ x, float* __restrict__ y, long n4) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 v = reinterpret_cast<const float4*>(x)[i];
    v.x = gelu(v.x); v.y = gelu(v.y); v.z = gelu(v.z); v.w = gelu(v.w);
    reinterpret_cast<float4*>(y)[i] = v;
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1) return 1;
  long n4 = htam_numel(&in[0]) / 4;
  if (n4 == 0) return 0;
  gelu_vec4<<<(unsigned)((n4 + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (float*)out[0].data, n4);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
