// softmax reference for the HIP backend: reference.cu translated to HIP (it assumes no warp size).
// Compile-checked with hipcc 5.2 for gfx90a; not yet run on an AMD GPU. The CUDA notes follow.
// softmax reference (oracle and baseline): one 256-thread block per row, three passes over the
// row (max, sum of exp, write), shared-memory tree reductions.
#include <htam/kernel_abi.h>
#include <hip/hip_runtime.h>
#include <math.h>

__global__ void softmax_ref(const float* __restrict__ x, float* __restrict__ y, long n) {
  __shared__ float sh[256];
  const float* row = x + blockIdx.x * n;
  float* out = y + blockIdx.x * n;
  float m = -INFINITY;
  for (long j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, row[j]);
  sh[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  m = sh[0];
  __syncthreads();
  float sum = 0.f;
  for (long j = threadIdx.x; j < n; j += blockDim.x) sum += expf(row[j] - m);
  sh[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  float inv = 1.0f / sh[0];
  for (long j = threadIdx.x; j < n; j += blockDim.x) out[j] = expf(row[j] - m) * inv;
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  long m = in[0].shape[0], n = in[0].shape[1];
  if (m == 0 || n == 0) return 0;
  softmax_ref<<<(unsigned)m, 256, 0, (hipStream_t)stream>>>(
      (const float*)in[0].data, (float*)out[0].data, n);
  return hipGetLastError() == hipSuccess ? 0 : 2;
}
