// softmax v4 (from v2): drop the max subtraction, so one pass computes sum(exp(x)) directly and
// the rescaling of the online form disappears. Dead end: exp(100) overflows float32 (inf), and
// inf/inf gives NaN in every row that holds a large input.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>
#include <math.h>

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void softmax_nomax(const float* __restrict__ x, float* __restrict__ y, long n) {
  __shared__ float sh[32];
  const float* row = x + blockIdx.x * n;
  float* out = y + blockIdx.x * n;
  float sum = 0.f;
  for (long j = threadIdx.x; j < n; j += blockDim.x) sum += expf(row[j]);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  sum = warp_sum(sum);
  if (lane == 0) sh[warp] = sum;
  __syncthreads();
  sum = warp_sum(lane < nw ? sh[lane] : 0.f);
  float inv = 1.0f / sum;
  for (long j = threadIdx.x; j < n; j += blockDim.x) out[j] = expf(row[j]) * inv;
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  long m = in[0].shape[0], n = in[0].shape[1];
  if (m == 0 || n == 0) return 0;
  softmax_nomax<<<(unsigned)m, 256, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (float*)out[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
