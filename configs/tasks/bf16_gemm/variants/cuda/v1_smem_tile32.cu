// bf16_gemm v1: 32x32 shared-memory tiles (operands converted to float when staged), one output
// per thread, float32 FMAs on the CUDA cores.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__global__ void gemm_tile(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                          __nv_bfloat16* __restrict__ c, int m, int n, int k) {
  __shared__ float as[32][32];
  __shared__ float bs[32][32];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * 32 + ty, col = blockIdx.x * 32 + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < k; k0 += 32) {
    as[ty][tx] = (row < m && k0 + tx < k) ? __bfloat162float(a[(long)row * k + k0 + tx]) : 0.f;
    bs[ty][tx] = (k0 + ty < k && col < n) ? __bfloat162float(b[(long)(k0 + ty) * n + col]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int p = 0; p < 32; ++p) acc += as[ty][p] * bs[p][tx];
    __syncthreads();
  }
  if (row < m && col < n) c[(long)row * n + col] = __float2bfloat16_rn(acc);
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 2 || nout != 1) return 1;
  int m = (int)in[0].shape[0], k = (int)in[0].shape[1], n = (int)in[1].shape[1];
  if (m == 0 || n == 0) return 0;
  dim3 block(32, 32);
  dim3 grid((n + 31) / 32, (m + 31) / 32);
  gemm_tile<<<grid, block, 0, (cudaStream_t)stream>>>((const __nv_bfloat16*)in[0].data,
                                                      (const __nv_bfloat16*)in[1].data,
                                                      (__nv_bfloat16*)out[0].data, m, n, k);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
