// transpose v5 (from v2): 64x64 tiles, 32x8 threads, each thread moves 16 elements (8 rows x 2
// tile halves), padded rows; four times the work per block to amortize index arithmetic and
// block scheduling.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void transpose64(const float* __restrict__ x, float* __restrict__ y, long m, long n) {
  __shared__ float tile[64][65];
  long bx = blockIdx.x * 64L, by = blockIdx.y * 64L;
  int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
  for (int r = ty; r < 64; r += 8) {
#pragma unroll
    for (int c = tx; c < 64; c += 32) {
      long i = by + r, j = bx + c;
      if (i < m && j < n) tile[r][c] = x[i * n + j];
    }
  }
  __syncthreads();
#pragma unroll
  for (int r = ty; r < 64; r += 8) {
#pragma unroll
    for (int c = tx; c < 64; c += 32) {
      long j = bx + r, i = by + c;
      if (j < n && i < m) y[j * m + i] = tile[c][r];
    }
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  long m = in[0].shape[0], n = in[0].shape[1];
  if (m == 0 || n == 0) return 0;
  dim3 block(32, 8);
  dim3 grid((unsigned)((n + 63) / 64), (unsigned)((m + 63) / 64));
  transpose64<<<grid, block, 0, (cudaStream_t)stream>>>((const float*)in[0].data,
                                                        (float*)out[0].data, m, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
