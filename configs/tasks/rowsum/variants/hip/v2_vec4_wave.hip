// rowsum, HIP v2 (parent: v1): 16-byte float4 loads with four independent accumulators when every
// row is 16-byte aligned (N % 4 == 0), the scalar loop otherwise; the same warpSize-driven
// wavefront reduction as v1 (64 lanes on CDNA, 32 on NVIDIA), no lane count written down.
#include <htam/kernel_abi.h>
#include <hip/hip_runtime.h>

__device__ __forceinline__ float wave_sum(float v) {
  for (int offset = warpSize / 2; offset > 0; offset >>= 1) v += __shfl_down(v, offset);
  return v;
}

__global__ void rowsum_vec4(const float* __restrict__ x, float* __restrict__ y, long n, bool vec) {
  extern __shared__ float partial[];
  const float* row = x + blockIdx.x * n;
  float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
  if (vec) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
    for (long j = threadIdx.x; j < n / 4; j += blockDim.x) {
      float4 v = row4[j];
      a0 += v.x;
      a1 += v.y;
      a2 += v.z;
      a3 += v.w;
    }
  } else {
    for (long j = threadIdx.x; j < n; j += blockDim.x) a0 += row[j];
  }
  float acc = (a0 + a1) + (a2 + a3);
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
  const bool vec = n % 4 == 0 && reinterpret_cast<uintptr_t>(in[0].data) % 16 == 0;
  const int threads = 256;
  hipLaunchKernelGGL(rowsum_vec4, dim3((unsigned)m), dim3(threads), (threads / wave) * sizeof(float),
                     (hipStream_t)stream, (const float*)in[0].data, (float*)out[0].data, n, vec);
  return hipGetLastError() == hipSuccess ? 0 : 2;
}
