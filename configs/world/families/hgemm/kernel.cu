// hgemm family: C = relu(A B + bias), fp16 in/out, fp32 accumulation. Knobs: MMA, BT, FUSE, ASYNC.
// Needs K % 8 == 0 and N % 8 == 0 (16-byte chunks); M and N edges are predicated.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <stdint.h>
using namespace nvcuda;

#define BK 32
#define NTH 256
#define STAGES (ASYNC ? 2 : 1)
#define APAD 8
#define BPAD 8

__device__ __forceinline__ void copy16(half* dst, const half* src, bool ok) {
#if ASYNC
  unsigned s = (unsigned)__cvta_generic_to_shared(dst);
  int n = ok ? 16 : 0;  // zero-fill when out of range
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(n));
#else
  *reinterpret_cast<uint4*>(dst) = ok ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
#endif
}

__device__ __forceinline__ float epi(float v, const half* bias, int c) {
#if FUSE
  v += __half2float(bias[c]);
  return v > 0.f ? v : 0.f;
#else
  return v;
#endif
}

__global__ void __launch_bounds__(NTH) hgemm(const half* __restrict__ A, const half* __restrict__ B,
                                             const half* __restrict__ bias, half* __restrict__ C,
                                             int M, int N, int K) {
  __shared__ __align__(128) half As[STAGES][BT][BK + APAD];
  __shared__ __align__(128) half Bs[STAGES][BK][BT + BPAD];
  const int row0 = blockIdx.y * BT, col0 = blockIdx.x * BT, tid = threadIdx.x;
  auto load = [&](int st, int k0) {
    for (int e = tid; e < BT * BK / 8; e += NTH) {
      int r = e / (BK / 8), c = (e % (BK / 8)) * 8;
      int gr = row0 + r, gk = k0 + c;
      bool ok = gr < M && gk < K;
      copy16(&As[st][r][c], ok ? A + (long)gr * K + gk : A, ok);
      int kr = e / (BT / 8), cc = (e % (BT / 8)) * 8;
      int gk2 = k0 + kr, gc = col0 + cc;
      ok = gk2 < K && gc < N;
      copy16(&Bs[st][kr][cc], ok ? B + (long)gk2 * N + gc : B, ok);
    }
#if ASYNC
    asm volatile("cp.async.commit_group;\n" ::);
#endif
  };
  const int nk = (K + BK - 1) / BK;
#if MMA
  constexpr int FR = BT / 16, NF = (FR * FR + 7) / 8;
  const int warp = tid / 32, lane = tid % 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[NF];
#pragma unroll
  for (int f = 0; f < NF; ++f) wmma::fill_fragment(acc[f], 0.f);
#else
  constexpr int R = BT / 16;
  const int tx = tid % 16, ty = tid / 16;
  float acc[R][R];
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < R; ++j) acc[i][j] = 0.f;
#endif
  load(0, 0);
  for (int t = 0; t < nk; ++t) {
    const int cur = ASYNC ? (t & 1) : 0;
#if ASYNC
    if (t + 1 < nk) {
      load(cur ^ 1, (t + 1) * BK);
      asm volatile("cp.async.wait_group 1;\n" ::);
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::);
    }
#endif
    __syncthreads();
#if MMA
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
#pragma unroll
      for (int f = 0; f < NF; ++f) {
        int id = warp + f * 8;
        if (id < FR * FR) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
          wmma::load_matrix_sync(a, &As[cur][(id / FR) * 16][kk], BK + APAD);
          wmma::load_matrix_sync(b, &Bs[cur][kk][(id % FR) * 16], BT + BPAD);
          wmma::mma_sync(acc[f], a, b, acc[f]);
        }
      }
    }
#else
#pragma unroll 4
    for (int k = 0; k < BK; ++k) {
      float a[R], b[R];
#pragma unroll
      for (int i = 0; i < R; ++i) a[i] = __half2float(As[cur][ty + i * 16][k]);
#pragma unroll
      for (int j = 0; j < R; ++j) b[j] = __half2float(Bs[cur][k][tx + j * 16]);
#pragma unroll
      for (int i = 0; i < R; ++i)
#pragma unroll
        for (int j = 0; j < R; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
#endif
    __syncthreads();
#if !ASYNC
    if (t + 1 < nk) load(0, (t + 1) * BK);
#endif
  }
#if MMA
  __shared__ __align__(32) float scratch[8][16 * 16];
#pragma unroll
  for (int f = 0; f < NF; ++f) {
    int id = warp + f * 8;
    if (id < FR * FR) {
      wmma::store_matrix_sync(scratch[warp], acc[f], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        int r = row0 + (id / FR) * 16 + e / 16, c = col0 + (id % FR) * 16 + e % 16;
        if (r < M && c < N) C[(long)r * N + c] = __float2half(epi(scratch[warp][e], bias, c));
      }
      __syncwarp();
    }
  }
#else
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < R; ++j) {
      int r = row0 + ty + i * 16, c = col0 + tx + j * 16;
      if (r < M && c < N) C[(long)r * N + c] = __float2half(epi(acc[i][j], bias, c));
    }
#endif
}

__global__ void bias_relu(half* __restrict__ C, const half* __restrict__ bias, long total, int N) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < total) {
    float v = __half2float(C[i]) + __half2float(bias[i % N]);
    C[i] = __float2half(v > 0.f ? v : 0.f);
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 3 || nout != 1) return 1;
  int M = (int)in[0].shape[0], K = (int)in[0].shape[1], N = (int)in[1].shape[1];
  if (K % 8 || N % 8) return 3;
  cudaStream_t s = (cudaStream_t)stream;
  dim3 grid((N + BT - 1) / BT, (M + BT - 1) / BT);
  hgemm<<<grid, NTH, 0, s>>>((const half*)in[0].data, (const half*)in[1].data,
                             (const half*)in[2].data, (half*)out[0].data, M, N, K);
#if !FUSE
  long total = (long)M * N;
  bias_relu<<<(unsigned)((total + 255) / 256), 256, 0, s>>>((half*)out[0].data,
                                                             (const half*)in[2].data, total, N);
#endif
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
