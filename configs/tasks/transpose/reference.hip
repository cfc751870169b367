// transpose reference for the HIP backend: reference.cu translated to HIP (it assumes no warp size).
// Compile-checked with hipcc 5.2 for gfx90a; not yet run on an AMD GPU. The CUDA notes follow.
// transpose reference (oracle and baseline): one thread per element, 32x8 blocks; reads of x
// are coalesced along n, writes of y are strided by M.
#include <htam/kernel_abi.h>
#include <hip/hip_runtime.h>

__global__ void transpose_ref(const float* __restrict__ x, float* __restrict__ y, long m,
                              long n) {
  long j = blockIdx.x * (long)blockDim.x + threadIdx.x;  // column of x
  long i = blockIdx.y * (long)blockDim.y + threadIdx.y;  // row of x
  if (i < m && j < n) y[j * m + i] = x[i * n + j];
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  long m = in[0].shape[0], n = in[0].shape[1];
  if (m == 0 || n == 0) return 0;
  dim3 block(32, 8);
  dim3 grid((unsigned)((n + 31) / 32), (unsigned)((m + 7) / 8));
  transpose_ref<<<grid, block, 0, (hipStream_t)stream>>>((const float*)in[0].data,
                                                          (float*)out[0].data, m, n);
  return hipGetLastError() == hipSuccess ? 0 : 2;
}
