// softmax family. Knobs: ONLINE, WARP_SHUFFLE, VEC, FASTEXP, WARP_PER_ROW; DT_F16.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>

#if DT_F16
typedef __half T;
__device__ __forceinline__ float ld(T v) { return __half2float(v); }
__device__ __forceinline__ T st(float v) { return __float2half(v); }
#else
typedef float T;
__device__ __forceinline__ float ld(T v) { return v; }
__device__ __forceinline__ T st(float v) { return v; }
#endif
struct __align__(sizeof(T) * VEC) Pack { T v[VEC]; };
#define BLOCK 256
#if WARP_PER_ROW
#define LANES 32
#else
#define LANES BLOCK
#endif

__device__ __forceinline__ float ex(float v) {
#if FASTEXP
  return __expf(v);
#else
  return expf(v);
#endif
}

// Reduction over the LANES threads of a row: op 0 = max, 1 = sum. Every lane gets the result.
template <int OP>
__device__ __forceinline__ float comb(float a, float b) { return OP == 0 ? fmaxf(a, b) : a + b; }

template <int OP>
__device__ float row_reduce(float v, float* sh) {
#if WARP_PER_ROW || WARP_SHUFFLE
  for (int o = 16; o > 0; o >>= 1) v = comb<OP>(v, __shfl_xor_sync(0xffffffffu, v, o));
#if !WARP_PER_ROW
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
  __syncthreads();
  v = sh[0];
  for (int w = 1; w < BLOCK / 32; ++w) v = comb<OP>(v, sh[w]);
#endif
  return v;
#else
  __syncthreads();
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int k = BLOCK / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) sh[threadIdx.x] = comb<OP>(sh[threadIdx.x], sh[threadIdx.x + k]);
    __syncthreads();
  }
  return sh[0];
#endif
}

__global__ void __launch_bounds__(BLOCK) softmax(const T* __restrict__ x, T* __restrict__ y,
                                                  long m, long n) {
  __shared__ float sh[BLOCK];
#if WARP_PER_ROW
  long r = blockIdx.x * (long)(BLOCK / 32) + threadIdx.x / 32;
  int t = threadIdx.x % 32;
  if (r >= m) return;
#else
  long r = blockIdx.x;
  int t = threadIdx.x;
#endif
  const Pack* row = reinterpret_cast<const Pack*>(x + r * n);
  Pack* out = reinterpret_cast<Pack*>(y + r * n);
  long np = n / VEC;
  float mx = -INFINITY, sum = 0.f;
#if ONLINE
  for (long j = t; j < np; j += LANES) {
    Pack p = row[j];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      float v = ld(p.v[k]);
      if (v > mx) { sum = sum * ex(mx - v) + 1.f; mx = v; } else { sum += ex(v - mx); }
    }
  }
  float gmx = row_reduce<0>(mx, sh);
  sum = mx == -INFINITY ? 0.f : sum * ex(mx - gmx);
  mx = gmx;
  sum = row_reduce<1>(sum, sh);
#else
  for (long j = t; j < np; j += LANES) {
    Pack p = row[j];
#pragma unroll
    for (int k = 0; k < VEC; ++k) mx = fmaxf(mx, ld(p.v[k]));
  }
  mx = row_reduce<0>(mx, sh);
  for (long j = t; j < np; j += LANES) {
    Pack p = row[j];
#pragma unroll
    for (int k = 0; k < VEC; ++k) sum += ex(ld(p.v[k]) - mx);
  }
  sum = row_reduce<1>(sum, sh);
#endif
  float inv = 1.f / sum;
  for (long j = t; j < np; j += LANES) {
    Pack p = row[j], o;
#pragma unroll
    for (int k = 0; k < VEC; ++k) o.v[k] = st(ex(ld(p.v[k]) - mx) * inv);
    out[j] = o;
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  long m = in[0].shape[0], n = in[0].shape[1];
  long blocks = WARP_PER_ROW ? (m + BLOCK / 32 - 1) / (BLOCK / 32) : m;
  softmax<<<(unsigned)blocks, BLOCK, 0, (cudaStream_t)stream>>>((const T*)in[0].data,
                                                                (T*)out[0].data, m, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
