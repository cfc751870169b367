// scan family: inclusive row prefix sums. Knobs: WARP_SCAN, ITEMS, BLOCK, STAGE. A block walks its
// row in chunks of BLOCK * ITEMS elements, carrying the running total.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

#define CHUNK (BLOCK * ITEMS)

__device__ float block_scan(float v, float* sh, float* total) {  // inclusive, over BLOCK threads
  const int t = threadIdx.x;
#if WARP_SCAN
  const int lane = t % 32, w = t / 32;
  for (int o = 1; o < 32; o <<= 1) {
    float u = __shfl_up_sync(~0u, v, o);
    if (lane >= o) v += u;
  }
  if (lane == 31) sh[w] = v;
  __syncthreads();
  if (w == 0) {
    float s = lane < BLOCK / 32 ? sh[lane] : 0.f;
    for (int o = 1; o < 32; o <<= 1) {
      float u = __shfl_up_sync(~0u, s, o);
      if (lane >= o) s += u;
    }
    if (lane < BLOCK / 32) sh[lane] = s;
  }
  __syncthreads();
  if (w > 0) v += sh[w - 1];
  *total = sh[BLOCK / 32 - 1];
  __syncthreads();
  return v;
#else
  float* a = sh;
  float* b = sh + BLOCK;
  a[t] = v;
  __syncthreads();
  for (int o = 1; o < BLOCK; o <<= 1) {
    b[t] = t >= o ? a[t] + a[t - o] : a[t];
    __syncthreads();
    float* tmp = a; a = b; b = tmp;
  }
  v = a[t];
  *total = a[BLOCK - 1];
  __syncthreads();
  return v;
#endif
}

__global__ void __launch_bounds__(BLOCK) scan(const float* __restrict__ x, float* __restrict__ y, long n) {
  __shared__ float sh[2 * BLOCK];
#if STAGE && ITEMS > 1
  __shared__ float st[CHUNK];
#endif
  const float* row = x + blockIdx.x * n;
  float* out = y + blockIdx.x * n;
  float carry = 0.f;
  for (long base = 0; base < n; base += CHUNK) {
    float v[ITEMS];
#if STAGE && ITEMS > 1
    for (int e = threadIdx.x; e < CHUNK; e += BLOCK) st[e] = base + e < n ? row[base + e] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) v[k] = st[threadIdx.x * ITEMS + k];
#else
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      long i = base + threadIdx.x * ITEMS + k;
      v[k] = i < n ? row[i] : 0.f;
    }
#endif
#pragma unroll
    for (int k = 1; k < ITEMS; ++k) v[k] += v[k - 1];
    float total;
    float incl = block_scan(v[ITEMS - 1], sh, &total);
    float off = carry + incl - v[ITEMS - 1];
#if STAGE && ITEMS > 1
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) st[threadIdx.x * ITEMS + k] = v[k] + off;
    __syncthreads();
    for (int e = threadIdx.x; e < CHUNK; e += BLOCK)
      if (base + e < n) out[base + e] = st[e];
    __syncthreads();
#else
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      long i = base + threadIdx.x * ITEMS + k;
      if (i < n) out[i] = v[k] + off;
    }
#endif
    carry += total;
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  long m = in[0].shape[0], n = in[0].shape[1];
  scan<<<(unsigned)m, BLOCK, 0, (cudaStream_t)stream>>>((const float*)in[0].data, (float*)out[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
