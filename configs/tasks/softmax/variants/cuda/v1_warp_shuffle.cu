// softmax v1: same three passes as the reference, block reductions by warp shuffles (one barrier
// per reduction instead of eight).
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>
#include <math.h>

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// all threads get the result; sh needs 32 floats; blockDim.x multiple of 32
template <bool kMax>
__device__ float block_reduce(float v, float* sh) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // sh may still be read from a previous reduction
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : (kMax ? -INFINITY : 0.f);
  return kMax ? warp_max(v) : warp_sum(v);
}

__global__ void softmax_shfl(const float* __restrict__ x, float* __restrict__ y, long n) {
  __shared__ float sh[32];
  const float* row = x + blockIdx.x * n;
  float* out = y + blockIdx.x * n;
  float m = -INFINITY;
  for (long j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, row[j]);
  m = block_reduce<true>(m, sh);
  float sum = 0.f;
  for (long j = threadIdx.x; j < n; j += blockDim.x) sum += expf(row[j] - m);
  float inv = 1.0f / block_reduce<false>(sum, sh);
  for (long j = threadIdx.x; j < n; j += blockDim.x) out[j] = expf(row[j] - m) * inv;
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  long m = in[0].shape[0], n = in[0].shape[1];
  if (m == 0 || n == 0) return 0;
  softmax_shfl<<<(unsigned)m, 256, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (float*)out[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
