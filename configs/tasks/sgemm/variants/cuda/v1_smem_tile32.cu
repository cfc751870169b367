// sgemm v1: 32x32 tiles of A and B staged in shared memory by a 32x32 thread block; each
// element loaded from global memory is reused 32 times from shared memory.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void sgemm_tile(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ c, int m, int n, int k) {
  __shared__ float as[32][32];
  __shared__ float bs[32][32];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * 32 + ty, col = blockIdx.x * 32 + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < k; k0 += 32) {
    as[ty][tx] = (row < m && k0 + tx < k) ? a[(long)row * k + k0 + tx] : 0.f;
    bs[ty][tx] = (k0 + ty < k && col < n) ? b[(long)(k0 + ty) * n + col] : 0.f;
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
