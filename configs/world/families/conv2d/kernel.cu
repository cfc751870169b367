// conv2d family: 3x3, stride 1, pad 1, NCHW. Knobs: SMEM_IN, KPT, SMEM_W, UNROLL.
// A block computes a 16 x 16 output tile for KPT output channels of one image.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

#define TS 16
#define MAXC 128
#if UNROLL
#define CUNROLL _Pragma("unroll 4")
#else
#define CUNROLL _Pragma("unroll 1")
#endif

__global__ void __launch_bounds__(TS * TS) conv(const float* __restrict__ x, const float* __restrict__ wt,
                                                float* __restrict__ y, int C, int H, int W, int K) {
  const int tilesW = (W + TS - 1) / TS;
  const int h0 = (blockIdx.x / tilesW) * TS, w0 = (blockIdx.x % tilesW) * TS;
  const int k0 = blockIdx.y * KPT, n = blockIdx.z;
  const int tx = threadIdx.x % TS, ty = threadIdx.x / TS;
  const int h = h0 + ty, w = w0 + tx;
#if SMEM_W
  __shared__ float ws[KPT * MAXC * 9];
  for (int e = threadIdx.x; e < KPT * C * 9; e += TS * TS) ws[e] = wt[(long)k0 * C * 9 + e];
  __syncthreads();
#define WGT(kk, c, t) ws[((kk) * C + (c)) * 9 + (t)]
#else
#define WGT(kk, c, t) wt[((long)(k0 + (kk)) * C + (c)) * 9 + (t)]
#endif
  float acc[KPT];
#pragma unroll
  for (int kk = 0; kk < KPT; ++kk) acc[kk] = 0.f;
  const float* xn = x + (long)n * C * H * W;
  CUNROLL
  for (int c = 0; c < C; ++c) {
    const float* xc = xn + (long)c * H * W;
#if SMEM_IN
    __shared__ float tile[TS + 2][TS + 2];
    __syncthreads();
    for (int e = threadIdx.x; e < (TS + 2) * (TS + 2); e += TS * TS) {
      int r = h0 - 1 + e / (TS + 2), s = w0 - 1 + e % (TS + 2);
      tile[e / (TS + 2)][e % (TS + 2)] = (r >= 0 && r < H && s >= 0 && s < W) ? xc[r * W + s] : 0.f;
    }
    __syncthreads();
#define X(r, s) tile[ty + (r)][tx + (s)]
#else
#define X(r, s) ((h + (r) - 1 >= 0 && h + (r) - 1 < H && w + (s) - 1 >= 0 && w + (s) - 1 < W) ? xc[(h + (r) - 1) * W + w + (s) - 1] : 0.f)
#endif
    float v[9];
#pragma unroll
    for (int t = 0; t < 9; ++t) v[t] = X(t / 3, t % 3);
#pragma unroll
    for (int kk = 0; kk < KPT; ++kk)
#pragma unroll
      for (int t = 0; t < 9; ++t) acc[kk] = fmaf(v[t], WGT(kk, c, t), acc[kk]);
  }
  if (h < H && w < W) {
#pragma unroll
    for (int kk = 0; kk < KPT; ++kk) y[(((long)n * K + k0 + kk) * H + h) * W + w] = acc[kk];
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 2 || nout != 1 || in[0].ndim != 4) return 1;
  int NB = (int)in[0].shape[0], C = (int)in[0].shape[1], H = (int)in[0].shape[2],
      W = (int)in[0].shape[3], K = (int)in[1].shape[0];
  if (SMEM_W && C > MAXC) return 3;
  dim3 grid(((H + TS - 1) / TS) * ((W + TS - 1) / TS), K / KPT, NB);
  conv<<<grid, TS * TS, 0, (cudaStream_t)stream>>>((const float*)in[0].data, (const float*)in[1].data,
                                                   (float*)out[0].data, C, H, W, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
