// gelu v3: replace erf by the tanh approximation 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))) with
// the fast tanh.approx instruction. Dead end: the approximation differs from exact GELU by up to
// ~1e-3, far outside the float32 tolerance of this task.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float tanh_fast(float v) {
  float r;
  asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}

__device__ __forceinline__ float gelu_tanh(float v) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * v * (1.0f + tanh_fast(k * (v + 0.044715f * v * v * v)));
}

__global__ void gelu_vec4(const float* __restrict__ x, float* __restrict__ y, long n) {
  long n4 = n / 4;
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 v = reinterpret_cast<const float4*>(x)[i];
    v.x = gelu_tanh(v.x); v.y = gelu_tanh(v.y); v.z = gelu_tanh(v.z); v.w = gelu_tanh(v.w);
    reinterpret_cast<float4*>(y)[i] = v;
  }
  long t = n4 * 4 + i;
  if (i < 4 && t < n) y[t] = gelu_tanh(x[t]);
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
