// transpose family: y[n][m] = x[m][n]. Knobs: SMEM, PAD, TD, COARSEN; DT_F16.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#if DT_F16
typedef __half T;
#else
typedef float T;
#endif
#define ROWS (TD / COARSEN)

__global__ void transpose(const T* __restrict__ x, T* __restrict__ y, int m, int n) {
  int bx = blockIdx.x * TD, by = blockIdx.y * TD;
#if SMEM
  __shared__ T tile[TD][TD + PAD];
  for (int r = threadIdx.y; r < TD; r += ROWS) {
    int i = by + r, j = bx + threadIdx.x;
    if (i < m && j < n) tile[r][threadIdx.x] = x[(long)i * n + j];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < TD; r += ROWS) {
    int j = bx + r, i = by + threadIdx.x;  // output row j (= input column), column i
    if (i < m && j < n) y[(long)j * m + i] = tile[threadIdx.x][r];
  }
#else
  for (int r = threadIdx.y; r < TD; r += ROWS) {
    int i = by + r, j = bx + threadIdx.x;
    if (i < m && j < n) y[(long)j * m + i] = x[(long)i * n + j];
  }
#endif
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  int m = (int)in[0].shape[0], n = (int)in[0].shape[1];
  dim3 grid((n + TD - 1) / TD, (m + TD - 1) / TD), block(TD, ROWS);
  transpose<<<grid, block, 0, (cudaStream_t)stream>>>((const T*)in[0].data, (T*)out[0].data, m, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
