// kb_relu: y = relu(x), four floats per thread (float4 loads and stores).
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n4) return;
  float4 v = x[i];
  v.x = fmaxf(v.x, 0.f);
  v.y = fmaxf(v.y, 0.f);
  v.z = fmaxf(v.z, 0.f);
  v.w = fmaxf(v.w, 0.f);
  y[i] = v;
}

__global__ void relu_tail(const float* __restrict__ x, float* __restrict__ y, long from, long n) {
  long i = from + blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1) return 1;
  long n = htam_numel(&in[0]);
  long n4 = n / 4;
  cudaStream_t s = (cudaStream_t)stream;
  if (n4 > 0)
    relu_vec4<<<(unsigned)((n4 + 255) / 256), 256, 0, s>>>((const float4*)in[0].data,
                                                           (float4*)out[0].data, n4);
  if (n > 4 * n4)
    relu_tail<<<1, 256, 0, s>>>((const float*)in[0].data, (float*)out[0].data, 4 * n4, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
