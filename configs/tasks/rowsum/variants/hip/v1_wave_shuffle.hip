// rowsum, HIP v1 (parent: reference): wavefront shuffles instead of the shared-memory tree.
// Wavefront-size aware: the lane count is warpSize (64 on CDNA GPUs such as gfx90a/gfx942, 32 on
// RDNA and on NVIDIA), read at run time on the device and queried on the host to size the shared
// partials — nothing assumes 32 lanes.
#include <htam/kernel_abi.h>
#include <hip/hip_runtime.h>

__device__ __forceinline__ float wave_sum(float v) {
  for (int offset = warpSize / 2; offset > 0; offset >>= 1) v += __shfl_down(v, offset);
  return v;  // lane 0 holds the wave's total
}

__global__ void rowsum_wave(const float* __restrict__ x, float* __restrict__ y, long n) {
  extern __shared__ float partial[];  // one float per wavefront of the block
  const float* row = x + blockIdx.x * n;
  float acc = 0.f;
  for (long j = threadIdx.x; j < n; j += blockDim.x) acc += row[j];
  const int lane = threadIdx.x % warpSize, wave = threadIdx.x / warpSize;
  const int waves = blockDim.x / warpSize;
  acc = wave_sum(acc);
  if (lane == 0) partial[wave] = acc;
  __syncthreads();
  if (wave == 0) {
    float v = lane < waves ? partial[lane] : 0.f;
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
  const int threads = 256;  // a multiple of 32 and of 64
  hipLaunchKernelGGL(rowsum_wave, dim3((unsigned)m), dim3(threads), (threads / wave) * sizeof(float),
                     (hipStream_t)stream, (const float*)in[0].data, (float*)out[0].data, n);
  return hipGetLastError() == hipSuccess ? 0 : 2;
}
