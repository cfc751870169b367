// softmax v3 (from v1): the row is read from global memory once into dynamic shared memory
// (up to 48K floats, opting in to more than 48 KB); max, sum and the output are computed from
// shared memory. Rows that do not fit fall back to the three-pass kernel.
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
template <bool kMax>
__device__ float block_reduce(float v, float* sh) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : (kMax ? -INFINITY : 0.f);
  return kMax ? warp_max(v) : warp_sum(v);
}

template <bool kCache>
__global__ void softmax_cache(const float* __restrict__ x, float* __restrict__ y, long n) {
  extern __shared__ float rowbuf[];
  __shared__ float sh[32];
  const float* row = x + blockIdx.x * n;
  float* out = y + blockIdx.x * n;
  float m = -INFINITY;
  for (long j = threadIdx.x; j < n; j += blockDim.x) {
    float t = row[j];
    if (kCache) rowbuf[j] = t;
    m = fmaxf(m, t);
  }
  m = block_reduce<true>(m, sh);
  float sum = 0.f;
  for (long j = threadIdx.x; j < n; j += blockDim.x) {
    float e = expf((kCache ? rowbuf[j] : row[j]) - m);
    if (kCache) rowbuf[j] = e;
    sum += e;
  }
  float inv = 1.0f / block_reduce<false>(sum, sh);
  for (long j = threadIdx.x; j < n; j += blockDim.x)
    out[j] = kCache ? rowbuf[j] * inv : expf(row[j] - m) * inv;
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  long m = in[0].shape[0], n = in[0].shape[1];
  if (m == 0 || n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  const float* x = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  size_t bytes = sizeof(float) * (size_t)n;
  if (bytes <= 48 * 1024 * 4) {
    if (bytes > 48 * 1024 &&
        cudaFuncSetAttribute(softmax_cache<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)bytes) != cudaSuccess)
      return 2;
    softmax_cache<true><<<(unsigned)m, 512, bytes, s>>>(x, y, n);
  } else {
    softmax_cache<false><<<(unsigned)m, 512, 0, s>>>(x, y, n);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
