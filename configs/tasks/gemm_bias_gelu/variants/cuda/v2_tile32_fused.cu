// gemm_bias_gelu v2 (from v1): 32x32 shared-memory tiles of A and W (one output per thread) with
// the bias + GELU epilogue applied in registers before the store.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void gemm_tile(const float* __restrict__ a, const float* __restrict__ w,
                          const float* __restrict__ bias, float* __restrict__ y, int m, int n,
                          int k) {
  __shared__ float as[32][32];
  __shared__ float ws[32][32];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * 32 + ty, col = blockIdx.x * 32 + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < k; k0 += 32) {
    as[ty][tx] = (row < m && k0 + tx < k) ? a[(long)row * k + k0 + tx] : 0.f;
    ws[ty][tx] = (k0 + ty < k && col < n) ? w[(long)(k0 + ty) * n + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int p = 0; p < 32; ++p) acc += as[ty][p] * ws[p][tx];
    __syncthreads();
  }
  if (row < m && col < n) {
    float v = acc + bias[col];
    y[(long)row * n + col] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 3 || nout != 1) return 1;
  int m = (int)in[0].shape[0], k = (int)in[0].shape[1], n = (int)in[1].shape[1];
  if (m == 0 || n == 0) return 0;
  dim3 block(32, 32);
  dim3 grid((n + 31) / 32, (m + 31) / 32);
  gemm_tile<<<grid, block, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (const float*)in[1].data, (const float*)in[2].data,
      (float*)out[0].data, m, n, k);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
