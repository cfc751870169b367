// attention family: one warp per query, keys in tiles of 32 (lane j scores key j of the tile).
// Knobs: ONLINE, KV_SMEM, QPB, FASTEXP. D must be 64 (the template's head size).
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>
#include <math.h>

#define D 64
#define TK 32

__device__ __forceinline__ float ex(float v) {
#if FASTEXP
  return __expf(v);
#else
  return expf(v);
#endif
}
__device__ __forceinline__ float wmax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(~0u, v, o));
  return v;
}
__device__ __forceinline__ float wsum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
  return v;
}

__global__ void __launch_bounds__(QPB * 32) attn(const float* __restrict__ q, const float* __restrict__ k,
                                                 const float* __restrict__ v, float* __restrict__ o, int L,
                                                 float scale) {
  extern __shared__ float scores[];  // ONLINE == 0: QPB x L
  __shared__ float qs[QPB][D];
#if KV_SMEM
  __shared__ float Ks[TK][D + 1], Vs[TK][D];
#endif
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int bh = blockIdx.y, i = blockIdx.x * QPB + warp;
  const bool active = i < L;
  const float* kb = k + (long)bh * L * D;
  const float* vb = v + (long)bh * L * D;
  if (active) {
    qs[warp][lane] = q[((long)bh * L + i) * D + lane] * scale;
    qs[warp][lane + 32] = q[((long)bh * L + i) * D + lane + 32] * scale;
  }
  __syncwarp();
  float m = -INFINITY, l = 0.f, acc0 = 0.f, acc1 = 0.f;
  for (int j0 = 0; j0 < L; j0 += TK) {
#if KV_SMEM
    __syncthreads();
    for (int e = threadIdx.x; e < TK * D; e += QPB * 32) {
      int r = e / D, c = e % D;
      bool ok = j0 + r < L;
      Ks[r][c] = ok ? kb[(long)(j0 + r) * D + c] : 0.f;
      Vs[r][c] = ok ? vb[(long)(j0 + r) * D + c] : 0.f;
    }
    __syncthreads();
#define KEL(r, c) Ks[r][c]
#define VEL(r, c) Vs[r][c]
#else
#define KEL(r, c) kb[(long)(j0 + (r)) * D + (c)]
#define VEL(r, c) vb[(long)(j0 + (r)) * D + (c)]
#endif
    if (!active) continue;
    const int j = j0 + lane;
    float s = -INFINITY;
    if (j < L) {
      s = 0.f;
#pragma unroll 16
      for (int c = 0; c < D; ++c) s = fmaf(qs[warp][c], KEL(lane, c), s);
    }
#if ONLINE
    float mn = fmaxf(m, wmax(s));
    float p = j < L ? ex(s - mn) : 0.f;
    float corr = ex(m - mn);
    l = l * corr + wsum(p);
    acc0 *= corr;
    acc1 *= corr;
    m = mn;
    const int nk = min(TK, L - j0);
    for (int r = 0; r < nk; ++r) {
      float pr = __shfl_sync(~0u, p, r);
      acc0 = fmaf(pr, VEL(r, lane), acc0);
      acc1 = fmaf(pr, VEL(r, lane + 32), acc1);
    }
#else
    if (j < L) scores[warp * L + j] = s;
    m = fmaxf(m, wmax(s));
#endif
  }
#if !ONLINE
  if (active) {
    __syncwarp();
    for (int j = lane; j < L; j += 32) {
      float p = ex(scores[warp * L + j] - m);
      scores[warp * L + j] = p;
      l += p;
    }
    l = wsum(l);
    __syncwarp();
  }
  for (int j0 = 0; j0 < L; j0 += TK) {
#if KV_SMEM
    __syncthreads();
    for (int e = threadIdx.x; e < TK * D; e += QPB * 32) {
      int r = e / D, c = e % D;
      Vs[r][c] = j0 + r < L ? vb[(long)(j0 + r) * D + c] : 0.f;
    }
    __syncthreads();
#endif
    if (!active) continue;
    const int nk = min(TK, L - j0);
    for (int r = 0; r < nk; ++r) {
      float pr = scores[warp * L + j0 + r];
      acc0 = fmaf(pr, VEL(r, lane), acc0);
      acc1 = fmaf(pr, VEL(r, lane + 32), acc1);
    }
  }
#endif
  if (active) {
    float inv = 1.f / l;
    o[((long)bh * L + i) * D + lane] = acc0 * inv;
    o[((long)bh * L + i) * D + lane + 32] = acc1 * inv;
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 3 || nout != 1 || in[0].ndim != 3 || in[0].shape[2] != D) return 1;
  int BH = (int)in[0].shape[0], L = (int)in[0].shape[1];
  size_t smem = ONLINE ? 0 : (size_t)QPB * L * sizeof(float);
  dim3 grid((L + QPB - 1) / QPB, BH);
  attn<<<grid, QPB * 32, smem, (cudaStream_t)stream>>>((const float*)in[0].data, (const float*)in[1].data,
                                                       (const float*)in[2].data, (float*)out[0].data, L,
                                                       1.0f / sqrtf((float)D));
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
