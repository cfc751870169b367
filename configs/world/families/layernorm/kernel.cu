// layernorm family. Knobs: WELFORD, WARP_SHUFFLE, VEC, WARP_PER_ROW, BLOCK; DT_F16.
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
#if WARP_PER_ROW
#define LANES 32
#else
#define LANES BLOCK
#endif

struct Stat { float n, mean, m2; };  // Welford state; also (count, sum, -) for plain sums

__device__ __forceinline__ Stat merge(Stat a, Stat b) {
#if WELFORD
  float n = a.n + b.n;
  if (n == 0.f) return a;
  float d = b.mean - a.mean, fb = b.n / n;
  return {n, a.mean + d * fb, a.m2 + b.m2 + d * d * a.n * fb};
#else
  return {a.n + b.n, a.mean + b.mean, 0.f};
#endif
}

__device__ Stat reduce(Stat s, Stat* sh) {
#if WARP_PER_ROW || WARP_SHUFFLE
  for (int o = 16; o > 0; o >>= 1) {
    Stat t = {__shfl_xor_sync(~0u, s.n, o), __shfl_xor_sync(~0u, s.mean, o),
              __shfl_xor_sync(~0u, s.m2, o)};
    s = merge(s, t);
  }
#if !WARP_PER_ROW
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = s;
  __syncthreads();
  s = sh[0];
  for (int w = 1; w < BLOCK / 32; ++w) s = merge(s, sh[w]);
#endif
  return s;
#else
  __syncthreads();
  sh[threadIdx.x] = s;
  __syncthreads();
  for (int k = BLOCK / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) sh[threadIdx.x] = merge(sh[threadIdx.x], sh[threadIdx.x + k]);
    __syncthreads();
  }
  return sh[0];
#endif
}

__global__ void __launch_bounds__(BLOCK) layernorm(const T* __restrict__ x, const T* __restrict__ w,
                                                    const T* __restrict__ b, T* __restrict__ y,
                                                    long m, long n) {
  __shared__ Stat sh[BLOCK];
#if WARP_PER_ROW
  long r = blockIdx.x * (long)(BLOCK / 32) + threadIdx.x / 32;
  int t = threadIdx.x % 32;
  if (r >= m) return;
#else
  long r = blockIdx.x;
  int t = threadIdx.x;
#endif
  const Pack* row = reinterpret_cast<const Pack*>(x + r * n);
  long np = n / VEC;
  float mean, var;
#if WELFORD
  Stat s = {0.f, 0.f, 0.f};
  for (long j = t; j < np; j += LANES) {
    Pack p = row[j];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      float v = ld(p.v[k]);
      s.n += 1.f;
      float d = v - s.mean;
      s.mean += d / s.n;
      s.m2 += d * (v - s.mean);
    }
  }
  s = reduce(s, sh);
  mean = s.mean;
  var = s.m2 / (float)n;
#else
  Stat s = {0.f, 0.f, 0.f};
  for (long j = t; j < np; j += LANES) {
    Pack p = row[j];
#pragma unroll
    for (int k = 0; k < VEC; ++k) s.mean += ld(p.v[k]);
  }
  mean = reduce(s, sh).mean / (float)n;
  s = {0.f, 0.f, 0.f};
  for (long j = t; j < np; j += LANES) {
    Pack p = row[j];
#pragma unroll
    for (int k = 0; k < VEC; ++k) { float d = ld(p.v[k]) - mean; s.mean += d * d; }
  }
  var = reduce(s, sh).mean / (float)n;
#endif
  float rstd = rsqrtf(var + 1e-5f);
  const Pack* wp = reinterpret_cast<const Pack*>(w);
  const Pack* bp = reinterpret_cast<const Pack*>(b);
  Pack* out = reinterpret_cast<Pack*>(y + r * n);
  for (long j = t; j < np; j += LANES) {
    Pack p = row[j], wv = wp[j], bv = bp[j], o;
#pragma unroll
    for (int k = 0; k < VEC; ++k) o.v[k] = st((ld(p.v[k]) - mean) * rstd * ld(wv.v[k]) + ld(bv.v[k]));
    out[j] = o;
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 3 || nout != 1 || in[0].ndim != 2) return 1;
  long m = in[0].shape[0], n = in[0].shape[1];
  long blocks = WARP_PER_ROW ? (m + BLOCK / 32 - 1) / (BLOCK / 32) : m;
  layernorm<<<(unsigned)blocks, BLOCK, 0, (cudaStream_t)stream>>>(
      (const T*)in[0].data, (const T*)in[1].data, (const T*)in[2].data, (T*)out[0].data, m, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
