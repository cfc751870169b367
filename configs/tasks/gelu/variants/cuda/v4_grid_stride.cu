// gelu v4: persistent grid-stride loop over float4s, grid sized to 4 blocks per SM instead of one
// thread per vector; tail handled by block 0.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float gelu(float v) {
  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

__global__ void gelu_gs(const float* __restrict__ x, float* __restrict__ y, long n) {
  long n4 = n / 4;
  long stride = (long)gridDim.x * blockDim.x;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = reinterpret_cast<const float4*>(x)[i];
    v.x = gelu(v.x); v.y = gelu(v.y); v.z = gelu(v.z); v.w = gelu(v.w);
    reinterpret_cast<float4*>(y)[i] = v;
  }
  if (blockIdx.x == 0 && threadIdx.x < 4) {
    long t = n4 * 4 + threadIdx.x;
    if (t < n) y[t] = gelu(x[t]);
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1) return 1;
  long n = htam_numel(&in[0]);
  if (n == 0) return 0;
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  long need = (n / 4 + 255) / 256;
  long blocks = need < (long)sms * 4 ? need : (long)sms * 4;
  if (blocks < 1) blocks = 1;
  gelu_gs<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (float*)out[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
