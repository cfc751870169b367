// bf16_gemm v4 (from v2): 128x128 block tile, k step 32, 8 warps each owning a 64x32 warp tile
// (4x2 wmma fragments, 8 float accumulators), so each A fragment feeds 2 MMAs and each B
// fragment 4. Padded shared-memory rows (40 and 136 bf16) against bank conflicts; 16-byte
// global loads when K and N are multiples of 8, zero-filled scalar loads otherwise; each warp
// writes its fragments through a small per-warp staging buffer with masked bf16 stores.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <mma.h>
using namespace nvcuda;

constexpr int BM = 128, BN = 128, BK = 32, LDA = BK + 8, LDB = BN + 8;

template <bool kVec>
__global__ void __launch_bounds__(256) gemm_wt(const __nv_bfloat16* __restrict__ a,
                                               const __nv_bfloat16* __restrict__ b,
                                               __nv_bfloat16* __restrict__ c, int m, int n,
                                               int k) {
  __shared__ __align__(128) __nv_bfloat16 as[BM][LDA];
  __shared__ __align__(128) __nv_bfloat16 bs[BK][LDB];
  __shared__ __align__(128) float stage[8][256];
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int wm = warp / 4, wn = warp % 4;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  const __nv_bfloat16 zero = __float2bfloat16(0.f);
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);
  for (int k0 = 0; k0 < k; k0 += BK) {
    if (kVec) {
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        int idx = t + q * 256;
        int r = idx / 4, c8 = (idx % 4) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (bm + r < m && k0 + c8 < k) v = *reinterpret_cast<const uint4*>(a + (long)(bm + r) * k + k0 + c8);
        *reinterpret_cast<uint4*>(&as[r][c8]) = v;
        int rb = idx / 16, cb = (idx % 16) * 8;
        uint4 w = make_uint4(0, 0, 0, 0);
        if (k0 + rb < k && bn + cb < n) w = *reinterpret_cast<const uint4*>(b + (long)(k0 + rb) * n + bn + cb);
        *reinterpret_cast<uint4*>(&bs[rb][cb]) = w;
      }
    } else {
      for (int idx = t; idx < BM * BK; idx += 256) {
        int r = idx / BK, cc = idx % BK;
        as[r][cc] = (bm + r < m && k0 + cc < k) ? a[(long)(bm + r) * k + k0 + cc] : zero;
        int rb = idx / BN, cb = idx % BN;
        bs[rb][cb] = (k0 + rb < k && bn + cb < n) ? b[(long)(k0 + rb) * n + bn + cb] : zero;
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb[2];
#pragma unroll
      for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(fa[i], &as[wm * 64 + i * 16][kk], LDA);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &bs[kk][wn * 32 + j * 16], LDB);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(stage[warp], acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        int gr = bm + wm * 64 + i * 16 + e / 16, gc = bn + wn * 32 + j * 16 + e % 16;
        if (gr < m && gc < n) c[(long)gr * n + gc] = __float2bfloat16_rn(stage[warp][e]);
      }
      __syncwarp();
    }
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 2 || nout != 1) return 1;
  int m = (int)in[0].shape[0], k = (int)in[0].shape[1], n = (int)in[1].shape[1];
  if (m == 0 || n == 0) return 0;
  const __nv_bfloat16* a = (const __nv_bfloat16*)in[0].data;
  const __nv_bfloat16* b = (const __nv_bfloat16*)in[1].data;
  __nv_bfloat16* c = (__nv_bfloat16*)out[0].data;
  dim3 grid((n + BN - 1) / BN, (m + BM - 1) / BM);
  bool vec = k % 8 == 0 && n % 8 == 0 && (((uintptr_t)a | (uintptr_t)b) & 15) == 0;
  if (vec) gemm_wt<true><<<grid, 256, 0, (cudaStream_t)stream>>>(a, b, c, m, n, k);
  else gemm_wt<false><<<grid, 256, 0, (cudaStream_t)stream>>>(a, b, c, m, n, k);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
