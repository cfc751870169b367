// rowsum, HIP v3 (parent: v1): one wavefront per row when rows are short (N <= 1024), so that the
// many short rows of an M=65536, N=256 matrix keep every compute unit busy without block-wide
// barriers; long rows keep v1's block per row. Rows per 256-thread block = 256 / warpSize (4 on
// CDNA's 64-lane wavefronts, 8 on NVIDIA's 32-lane warps), computed at run time.
#include <htam/kernel_abi.h>
#include <hip/hip_runtime.h>

__device__ __forceinline__ float wave_sum(float v) {
  for (int offset = warpSize / 2; offset > 0; offset >>= 1) v += __shfl_down(v, offset);
  return v;
}

__global__ void rowsum_wave_per_row(const float* __restrict__ x, float* __restrict__ y, long m,
                                    long n) {
  const int lane = threadIdx.x % warpSize;
  const long r = blockIdx.x * (long)(blockDim.x / warpSize) + threadIdx.x / warpSize;
  if (r >= m) return;  // a whole wavefront leaves together: the shuffles stay converged
  const float* row = x + r * n;
  float acc = 0.f;
  for (long j = lane; j < n; j += warpSize) acc += row[j];
  acc = wave_sum(acc);
  if (lane == 0) y[r] = acc;
}

__global__ void rowsum_block_per_row(const float* __restrict__ x, float* __restrict__ y, long n) {
  extern __shared__ float partial[];
  const float* row = x + blockIdx.x * n;
  float acc = 0.f;
  for (long j = threadIdx.x; j < n; j += blockDim.x) acc += row[j];
  const int lane = threadIdx.x % warpSize, wave = threadIdx.x / warpSize;
  acc = wave_sum(acc);
  if (lane == 0) partial[wave] = acc;
  __syncthreads();
  if (wave == 0) {
    float v = lane < (int)(blockDim.x / warpSize) ? partial[lane] : 0.f;
    v = wave_sum(v);
    if (lane == 0) y[blockIdx.x] = v;
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  long m = in[0].shape[0], n = in[0].shape[1];
  if (m == 0) return 0;
  int device = 0, wave = 0;
  if (hipGetDevice(&device) != hipSuccess ||
      hipDeviceGetAttribute(&wave, hipDeviceAttributeWarpSize, device) != hipSuccess || wave <= 0)
    return 3;
  const int threads = 256;
  hipStream_t s = (hipStream_t)stream;
  if (n <= 1024) {
    const long rows_per_block = threads / wave;
    hipLaunchKernelGGL(rowsum_wave_per_row, dim3((unsigned)((m + rows_per_block - 1) / rows_per_block)),
                       dim3(threads), 0, s, (const float*)in[0].data, (float*)out[0].data, m, n);
  } else {
    hipLaunchKernelGGL(rowsum_block_per_row, dim3((unsigned)m), dim3(threads),
                       (threads / wave) * sizeof(float), s, (const float*)in[0].data,
                       (float*)out[0].data, n);
  }
  return hipGetLastError() == hipSuccess ? 0 : 2;
}
