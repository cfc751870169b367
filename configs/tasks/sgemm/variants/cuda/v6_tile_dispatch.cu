// sgemm v6 (from v4): shape-dependent dispatch between the two register-blocked kernels. The
// 128x128 kernel of v4 only wins when its 16-byte path applies (K, N % 4 == 0) and its grid
// fills the GPU (at least one tile per SM); ragged or small shapes (two held-out shapes ran
// slower with v4 than with v3) go to the 64x64, 4x4-per-thread kernel of v3,
// which has 4x more blocks for the same shape.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

constexpr int SM_BM = 64, SM_BN = 64, SM_BK = 16;  // small-tile kernel (v3)

__global__ void __launch_bounds__(256) sgemm_rb(const float* __restrict__ a,
                                                const float* __restrict__ b,
                                                float* __restrict__ c, int m, int n, int k) {
  __shared__ float as[SM_BK][SM_BM];
  __shared__ float bs[SM_BK][SM_BN];
  int t = threadIdx.x;
  int tr = t / 16, tc = t % 16;
  int bm = blockIdx.y * SM_BM, bn = blockIdx.x * SM_BN;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < k; k0 += SM_BK) {
    {  // A tile: 64 rows x 16 cols, 4 per thread
      int r = t / 4, cc = (t % 4) * 4;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        int gr = bm + r, gk = k0 + cc + q;
        as[cc + q][r] = (gr < m && gk < k) ? a[(long)gr * k + gk] : 0.f;
      }
    }
    {  // B tile: 16 rows x 64 cols, 4 per thread
      int r = t / 16, cc = (t % 16) * 4;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        int gk = k0 + r, gc = bn + cc + q;
        bs[r][cc + q] = (gk < k && gc < n) ? b[(long)gk * n + gc] : 0.f;
      }
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < SM_BK; ++p) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = as[p][tr * 4 + i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = bs[p][tc * 4 + j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    int gr = bm + tr * 4 + i;
    if (gr >= m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int gc = bn + tc * 4 + j;
      if (gc < n) c[(long)gr * n + gc] = acc[i][j];
    }
  }
}

constexpr int BM = 128, BN = 128, BK = 8;

template <bool kVec>
__global__ void __launch_bounds__(256) sgemm_128(const float* __restrict__ a,
                                                 const float* __restrict__ b,
                                                 float* __restrict__ c, int m, int n, int k) {
  __shared__ __align__(16) float as[BK][BM];
  __shared__ __align__(16) float bs[BK][BN];
  const int t = threadIdx.x;
  const int tr = t / 16, tc = t % 16;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  const int ar = t >> 1, ac = (t & 1) * 4;   // A tile 128 x 8: one row, four columns each
  const int br = t >> 5, bc = (t & 31) * 4;  // B tile 8 x 128: one row, four columns each
  float acc[8][8] = {};
  for (int k0 = 0; k0 < k; k0 += BK) {
    const int gr = bm + ar;
    if (kVec) {
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (gr < m && k0 + ac < k) v = *reinterpret_cast<const float4*>(a + (long)gr * k + k0 + ac);
      as[ac + 0][ar] = v.x; as[ac + 1][ar] = v.y; as[ac + 2][ar] = v.z; as[ac + 3][ar] = v.w;
    } else {
#pragma unroll
      for (int q = 0; q < 4; ++q)
        as[ac + q][ar] = (gr < m && k0 + ac + q < k) ? a[(long)gr * k + k0 + ac + q] : 0.f;
    }
    const int gk = k0 + br;
    if (kVec) {
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (gk < k && bn + bc < n) v = *reinterpret_cast<const float4*>(b + (long)gk * n + bn + bc);
      *reinterpret_cast<float4*>(&bs[br][bc]) = v;
    } else {
#pragma unroll
      for (int q = 0; q < 4; ++q)
        bs[br][bc + q] = (gk < k && bn + bc + q < n) ? b[(long)gk * n + bn + bc + q] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < BK; ++p) {
      float av[8], bv[8];
      *reinterpret_cast<float4*>(&av[0]) = *reinterpret_cast<const float4*>(&as[p][tr * 8]);
      *reinterpret_cast<float4*>(&av[4]) = *reinterpret_cast<const float4*>(&as[p][tr * 8 + 4]);
      *reinterpret_cast<float4*>(&bv[0]) = *reinterpret_cast<const float4*>(&bs[p][tc * 8]);
      *reinterpret_cast<float4*>(&bv[4]) = *reinterpret_cast<const float4*>(&bs[p][tc * 8 + 4]);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int gr = bm + tr * 8 + i;
    if (gr >= m) continue;
#pragma unroll
    for (int j = 0; j < 8; j += 4) {
      const int gc = bn + tc * 8 + j;
      if (kVec && gc + 3 < n) {
        *reinterpret_cast<float4*>(c + (long)gr * n + gc) =
            make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (gc + q < n) c[(long)gr * n + gc + q] = acc[i][j + q];
      }
    }
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 2 || nout != 1) return 1;
  int m = (int)in[0].shape[0], k = (int)in[0].shape[1], n = (int)in[1].shape[1];
  if (m == 0 || n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  const float* a = (const float*)in[0].data;
  const float* b = (const float*)in[1].data;
  float* c = (float*)out[0].data;
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  bool vec = k % 4 == 0 && n % 4 == 0 && (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15) == 0;
  long big_tiles = (long)((m + BM - 1) / BM) * ((n + BN - 1) / BN);
  if (vec && big_tiles >= sms) {
    dim3 grid((n + BN - 1) / BN, (m + BM - 1) / BM);
    sgemm_128<true><<<grid, 256, 0, s>>>(a, b, c, m, n, k);
  } else {
    dim3 grid((n + SM_BN - 1) / SM_BN, (m + SM_BM - 1) / SM_BM);
    sgemm_rb<<<grid, 256, 0, s>>>(a, b, c, m, n, k);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
