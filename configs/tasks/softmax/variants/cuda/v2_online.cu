// softmax v2 (from v1): online softmax. One pass keeps a running (max, sum) per thread, rescaling
// the sum when the max grows; the pairs are merged across the block; a second pass writes.
// Two reads of the row instead of three.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>
#include <math.h>

struct MS { float m, s; };

__device__ __forceinline__ MS merge(MS a, MS b) {
  float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};
  float s = (a.m == -INFINITY ? 0.f : a.s * expf(a.m - m)) +
            (b.m == -INFINITY ? 0.f : b.s * expf(b.m - m));
  return {m, s};
}

__device__ __forceinline__ MS warp_merge(MS v) {
  for (int o = 16; o > 0; o >>= 1) {
    MS w{__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = merge(v, w);
  }
  return v;
}

__global__ void softmax_online(const float* __restrict__ x, float* __restrict__ y, long n) {
  __shared__ float shm[32], shs[32];
  const float* row = x + blockIdx.x * n;
  float* out = y + blockIdx.x * n;
  MS v{-INFINITY, 0.f};
  for (long j = threadIdx.x; j < n; j += blockDim.x) {
    float t = row[j];
    if (t > v.m) { v.s = v.s * expf(v.m - t) + 1.f; v.m = t; }
    else v.s += expf(t - v.m);
  }
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_merge(v);
  if (lane == 0) { shm[warp] = v.m; shs[warp] = v.s; }
  __syncthreads();
  v = lane < nw ? MS{shm[lane], shs[lane]} : MS{-INFINITY, 0.f};
  v = warp_merge(v);
  float inv = 1.0f / v.s;
  for (long j = threadIdx.x; j < n; j += blockDim.x) out[j] = expf(row[j] - v.m) * inv;
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  long m = in[0].shape[0], n = in[0].shape[1];
  if (m == 0 || n == 0) return 0;
  softmax_online<<<(unsigned)m, 256, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (float*)out[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
