// stencil2d reference for the HIP backend: reference.cu translated to HIP (it assumes no warp size).
// Compile-checked with hipcc 5.2 for gfx90a; not yet run on an AMD GPU. The CUDA notes follow.
// stencil2d reference (oracle and baseline): one thread per output, 16x16 blocks, every
// neighbour read from global memory with a bounds check.
#include <htam/kernel_abi.h>
#include <hip/hip_runtime.h>

__global__ void stencil_ref(const float* __restrict__ x, float* __restrict__ y, long h, long w) {
  long j = blockIdx.x * (long)blockDim.x + threadIdx.x;
  long i = blockIdx.y * (long)blockDim.y + threadIdx.y;
  if (i >= h || j >= w) return;
  float up = i > 0 ? x[(i - 1) * w + j] : 0.f;
  float down = i + 1 < h ? x[(i + 1) * w + j] : 0.f;
  float left = j > 0 ? x[i * w + j - 1] : 0.f;
  float right = j + 1 < w ? x[i * w + j + 1] : 0.f;
  y[i * w + j] = 0.5f * x[i * w + j] + 0.125f * (up + down + left + right);
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  long h = in[0].shape[0], w = in[0].shape[1];
  if (h == 0 || w == 0) return 0;
  dim3 block(16, 16);
  dim3 grid((unsigned)((w + 15) / 16), (unsigned)((h + 15) / 16));
  stencil_ref<<<grid, block, 0, (hipStream_t)stream>>>((const float*)in[0].data,
                                                        (float*)out[0].data, h, w);
  return hipGetLastError() == hipSuccess ? 0 : 2;
}
