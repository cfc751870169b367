// rmsnorm v3 (from v1): "the last barrier is only there for warp 0, drop it". Dead end: warps
// 1..7 then read part[0] before warp 0 has stored the block total into it, and scale their part
// of the row with warp 0's partial sum.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void rmsnorm_race(const float* __restrict__ x, const float* __restrict__ w,
                             float* __restrict__ y, long n) {
  __shared__ float part[32];
  const float* row = x + blockIdx.x * n;
  float* out = y + blockIdx.x * n;
  float acc = 0.f;
  for (long j = threadIdx.x; j < n; j += blockDim.x) acc += row[j] * row[j];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  acc = warp_sum(acc);
  if (lane == 0) part[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = warp_sum(lane < nw ? part[lane] : 0.f);
    if (lane == 0) part[0] = acc;
  }
  float scale = rsqrtf(part[0] / (float)n + 1e-6f);  // no barrier: races with the store above
  for (long j = threadIdx.x; j < n; j += blockDim.x) out[j] = row[j] * scale * w[j];
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 2 || nout != 1 || in[0].ndim != 2) return 1;
  long m = in[0].shape[0], n = in[0].shape[1];
  if (m == 0 || n == 0) return 0;
  rmsnorm_race<<<(unsigned)m, 256, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (const float*)in[1].data, (float*)out[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
