// softmax v5 (from v2): online softmax with float4 loads/stores when N % 4 == 0 and the __expf
// intrinsic (ex2.approx based; a few ulp, well inside rtol 1e-4).
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>
#include <math.h>

struct MS { float m, s; };

__device__ __forceinline__ MS merge(MS a, MS b) {
  float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};
  float s = (a.m == -INFINITY ? 0.f : a.s * __expf(a.m - m)) +
            (b.m == -INFINITY ? 0.f : b.s * __expf(b.m - m));
  return {m, s};
}
__device__ __forceinline__ void push(MS& v, float t) {
  if (t > v.m) { v.s = v.s * __expf(v.m - t) + 1.f; v.m = t; }
  else v.s += __expf(t - v.m);
}
__device__ __forceinline__ MS warp_merge(MS v) {
  for (int o = 16; o > 0; o >>= 1) {
    MS w{__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = merge(v, w);
  }
  return v;
}

template <bool kVec>
__global__ void softmax_v(const float* __restrict__ x, float* __restrict__ y, long n) {
  __shared__ float shm[32], shs[32];
  const float* row = x + blockIdx.x * n;
  float* out = y + blockIdx.x * n;
  MS v{-INFINITY, 0.f};
  if (kVec) {
    const float4* r4 = reinterpret_cast<const float4*>(row);
    for (long j = threadIdx.x; j < n / 4; j += blockDim.x) {
      float4 t = __ldg(r4 + j);
      push(v, t.x); push(v, t.y); push(v, t.z); push(v, t.w);
    }
  } else {
    for (long j = threadIdx.x; j < n; j += blockDim.x) push(v, __ldg(row + j));
  }
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_merge(v);
  if (lane == 0) { shm[warp] = v.m; shs[warp] = v.s; }
  __syncthreads();
  v = lane < nw ? MS{shm[lane], shs[lane]} : MS{-INFINITY, 0.f};
  v = warp_merge(v);
  float inv = 1.0f / v.s, mx = v.m;
  if (kVec) {
    const float4* r4 = reinterpret_cast<const float4*>(row);
    float4* o4 = reinterpret_cast<float4*>(out);
    for (long j = threadIdx.x; j < n / 4; j += blockDim.x) {
      float4 t = __ldg(r4 + j);
      t.x = __expf(t.x - mx) * inv; t.y = __expf(t.y - mx) * inv;
      t.z = __expf(t.z - mx) * inv; t.w = __expf(t.w - mx) * inv;
      o4[j] = t;
    }
  } else {
    for (long j = threadIdx.x; j < n; j += blockDim.x) out[j] = __expf(row[j] - mx) * inv;
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  long m = in[0].shape[0], n = in[0].shape[1];
  if (m == 0 || n == 0) return 0;
  const float* x = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  bool vec = n % 4 == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)y & 15) == 0;
  if (vec) softmax_v<true><<<(unsigned)m, 256, 0, (cudaStream_t)stream>>>(x, y, n);
  else softmax_v<false><<<(unsigned)m, 256, 0, (cudaStream_t)stream>>>(x, y, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
