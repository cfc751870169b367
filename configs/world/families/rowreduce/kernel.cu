// rowreduce family: y[m] = sum_n x[m,n]. Knobs: VEC, WARP_SHUFFLE, WARP_PER_ROW, BLOCK; DT_F16.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#if DT_F16
typedef __half T;
__device__ __forceinline__ float ld(T v) { return __half2float(v); }
#else
typedef float T;
__device__ __forceinline__ float ld(T v) { return v; }
#endif
struct __align__(sizeof(T) * VEC) Pack { T v[VEC]; };

// Partial sum of one row by `lanes` threads starting at lane `t`; VEC > 1 skips the N % VEC tail.
__device__ __forceinline__ float partial(const T* __restrict__ row, long n, int t, int lanes) {
  float s = 0.f;
  const Pack* p = reinterpret_cast<const Pack*>(row);
  for (long j = t; j < n / VEC; j += lanes) {
    Pack v = p[j];
#pragma unroll
    for (int k = 0; k < VEC; ++k) s += ld(v.v[k]);
  }
  return s;
}

__device__ __forceinline__ float warp_sum(float s) {
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

__global__ void __launch_bounds__(BLOCK) rowsum(const T* __restrict__ x, float* __restrict__ y,
                                                 long m, long n) {
#if WARP_PER_ROW
  long r = blockIdx.x * (long)(BLOCK / 32) + threadIdx.x / 32;
  if (r >= m) return;
  float s = warp_sum(partial(x + r * n, n, threadIdx.x % 32, 32));
  if (threadIdx.x % 32 == 0) y[r] = s;
#else
  __shared__ float sh[BLOCK];
  long r = blockIdx.x;
  float s = partial(x + r * n, n, threadIdx.x, BLOCK);
#if WARP_SHUFFLE
  s = warp_sum(s);
  if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < BLOCK / 32 ? sh[threadIdx.x] : 0.f;
    s = warp_sum(s);
    if (threadIdx.x == 0) y[r] = s;
  }
#else
  sh[threadIdx.x] = s;
  __syncthreads();
  for (int k = BLOCK / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[r] = sh[0];
#endif
#endif
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  long m = in[0].shape[0], n = in[0].shape[1];
#if WARP_PER_ROW
  long blocks = (m + BLOCK / 32 - 1) / (BLOCK / 32);
#else
  long blocks = m;
#endif
  rowsum<<<(unsigned)blocks, BLOCK, 0, (cudaStream_t)stream>>>((const T*)in[0].data,
                                                               (float*)out[0].data, m, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
