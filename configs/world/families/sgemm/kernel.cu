// sgemm family: C = A B (fp32). Knobs: TILE, REG, DBUF. Shared tiles of A (transposed) and B with
// a K slice of 16; each thread owns REG x REG outputs strided by TILE/REG.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

#define BK 16
#define TPR (TILE / REG)
#define NT (TPR * TPR)
#define NBUF (DBUF ? 2 : 1)

__global__ void __launch_bounds__(NT <= 1024 ? NT : 1024)
sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[NBUF][BK][TILE];
  __shared__ float Bs[NBUF][BK][TILE];
  const int tx = threadIdx.x % TPR, ty = threadIdx.x / TPR;
  const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
  float acc[REG][REG];
#pragma unroll
  for (int i = 0; i < REG; ++i)
#pragma unroll
    for (int j = 0; j < REG; ++j) acc[i][j] = 0.f;
  auto load = [&](int buf, int k0) {
    for (int e = threadIdx.x; e < TILE * BK; e += NT) {
      int r = e / BK, c = e % BK;
      int gr = row0 + r, gk = k0 + c;
      As[buf][c][r] = (gr < M && gk < K) ? A[(long)gr * K + gk] : 0.f;
      int kr = e / TILE, cc = e % TILE;
      int gk2 = k0 + kr, gc = col0 + cc;
      Bs[buf][kr][cc] = (gk2 < K && gc < N) ? B[(long)gk2 * N + gc] : 0.f;
    }
  };
  const int nk = (K + BK - 1) / BK;
  load(0, 0);
  __syncthreads();
  for (int t = 0; t < nk; ++t) {
    const int cur = DBUF ? (t & 1) : 0;
#if DBUF
    if (t + 1 < nk) load(cur ^ 1, (t + 1) * BK);
#endif
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[REG], b[REG];
#pragma unroll
      for (int i = 0; i < REG; ++i) a[i] = As[cur][k][ty + i * TPR];
#pragma unroll
      for (int j = 0; j < REG; ++j) b[j] = Bs[cur][k][tx + j * TPR];
#pragma unroll
      for (int i = 0; i < REG; ++i)
#pragma unroll
        for (int j = 0; j < REG; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
#if !DBUF
    if (t + 1 < nk) {
      load(0, (t + 1) * BK);
      __syncthreads();
    }
#endif
  }
#pragma unroll
  for (int i = 0; i < REG; ++i)
#pragma unroll
    for (int j = 0; j < REG; ++j) {
      int r = row0 + ty + i * TPR, c = col0 + tx + j * TPR;
      if (r < M && c < N) C[(long)r * N + c] = acc[i][j];
    }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 2 || nout != 1) return 1;
  int M = (int)in[0].shape[0], K = (int)in[0].shape[1], N = (int)in[1].shape[1];
  dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  sgemm<<<grid, NT, 0, (cudaStream_t)stream>>>((const float*)in[0].data, (const float*)in[1].data,
                                               (float*)out[0].data, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
