// elemwise family: y = x * sigmoid(x) + 0.5 * z. Knobs (defined above this line by the
// materializer): VEC, GRID_STRIDE, BLOCK, FASTMATH; DT_F16 selects half storage.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#if DT_F16
typedef __half T;
__device__ __forceinline__ float ld(T v) { return __half2float(v); }
__device__ __forceinline__ T st(float v) { return __float2half(v); }
#else
typedef float T;
__device__ __forceinline__ float ld(T v) { return v; }
__device__ __forceinline__ T st(float v) { return v; }
#endif

struct __align__(sizeof(T) * VEC) Pack { T v[VEC]; };

__device__ __forceinline__ float f(float x, float z) {
#if FASTMATH
  return __fdividef(x, 1.f + __expf(-x)) + 0.5f * z;
#else
  return x / (1.f + expf(-x)) + 0.5f * z;
#endif
}

// Each thread handles VEC consecutive elements per iteration; the last N % VEC are not covered.
__global__ void __launch_bounds__(BLOCK) chain(const T* __restrict__ x, const T* __restrict__ z,
                                                T* __restrict__ y, long npack) {
  long i = blockIdx.x * (long)BLOCK + threadIdx.x;
#if GRID_STRIDE
  for (; i < npack; i += (long)gridDim.x * BLOCK) {
#else
  if (i < npack) {
#endif
    Pack a = reinterpret_cast<const Pack*>(x)[i], b = reinterpret_cast<const Pack*>(z)[i], c;
#pragma unroll
    for (int k = 0; k < VEC; ++k) c.v[k] = st(f(ld(a.v[k]), ld(b.v[k])));
    reinterpret_cast<Pack*>(y)[i] = c;
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 2 || nout != 1) return 1;
  long n = htam_numel(&in[0]), npack = n / VEC;
  if (npack == 0) return 0;
  long blocks = (npack + BLOCK - 1) / BLOCK;
#if GRID_STRIDE
  int sms = 0, dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (blocks > 4L * sms) blocks = 4L * sms;
#endif
  chain<<<(unsigned)blocks, BLOCK, 0, (cudaStream_t)stream>>>(
      (const T*)in[0].data, (const T*)in[1].data, (T*)out[0].data, npack);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
