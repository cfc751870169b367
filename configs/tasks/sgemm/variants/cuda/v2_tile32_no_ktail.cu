// sgemm v2 (from v1): the k loop runs over whole 32-wide tiles only, without the k bounds
// checks on the tile loads ("K is always a multiple of 32"). Dead end: correct on the seen
// shapes (K = 2048, 512) but the last K % 32 products are dropped for held-out K not a multiple of 32.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void sgemm_tile(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ c, int m, int n, int k) {
  __shared__ float as[32][32];
  __shared__ float bs[32][32];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * 32 + ty, col = blockIdx.x * 32 + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 + 32 <= k; k0 += 32) {
    as[ty][tx] = row < m ? a[(long)row * k + k0 + tx] : 0.f;
    bs[ty][tx] = col < n ? b[(long)(k0 + ty) * n + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int p = 0; p < 32; ++p) acc += as[ty][p] * bs[p][tx];
    __syncthreads();
  }
  if (row < m && col < n) c[(long)row * n + col] = acc;
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 2 || nout != 1) return 1;
  int m = (int)in[0].shape[0], k = (int)in[0].shape[1], n = (int)in[1].shape[1];
  if (m == 0 || n == 0) return 0;
  dim3 block(32, 32);
  dim3 grid((n + 31) / 32, (m + 31) / 32);
  sgemm_tile<<<grid, block, 0, (cudaStream_t)stream>>>((const float*)in[0].data,
                                                       (const float*)in[1].data,
                                                       (float*)out[0].data, m, n, k);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
