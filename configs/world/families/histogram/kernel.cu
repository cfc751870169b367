// histogram family. Knobs: PRIV, ITEMS, GRID_CAP, VEC.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

#define NTH 256
#define PER (ITEMS * VEC)  // values per thread per grid step

__global__ void zero(int* c, int nb) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < nb) c[i] = 0;
}

__global__ void __launch_bounds__(NTH) hist(const int* __restrict__ x, int* __restrict__ counts, long n, int nb) {
  extern __shared__ int priv[];
#if PRIV
  for (int b = threadIdx.x; b < nb; b += NTH) priv[b] = 0;
  __syncthreads();
#define BUMP(v) atomicAdd(&priv[v], 1)
#else
#define BUMP(v) atomicAdd(&counts[v], 1)
#endif
  const long nv = n / VEC;  // VEC > 1: the last n % VEC values are not read
  const long step = (long)gridDim.x * NTH * ITEMS;
  for (long base = (long)blockIdx.x * NTH * ITEMS + threadIdx.x; base < nv; base += step) {
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      long i = base + (long)k * NTH;
      if (i < nv) {
#if VEC == 4
        int4 v = reinterpret_cast<const int4*>(x)[i];
        BUMP(v.x); BUMP(v.y); BUMP(v.z); BUMP(v.w);
#else
        BUMP(x[i]);
#endif
      }
    }
  }
#if PRIV
  __syncthreads();
  for (int b = threadIdx.x; b < nb; b += NTH)
    if (priv[b]) atomicAdd(&counts[b], priv[b]);
#endif
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1) return 1;
  long n = htam_numel(&in[0]);
  int nb = (int)out[0].shape[0];
  cudaStream_t s = (cudaStream_t)stream;
  zero<<<(nb + 255) / 256, 256, 0, s>>>((int*)out[0].data, nb);
  long blocks = (n / VEC + (long)NTH * ITEMS - 1) / ((long)NTH * ITEMS);
#if GRID_CAP
  int sms = 0, dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (blocks > 8L * sms) blocks = 8L * sms;
#endif
  if (blocks < 1) blocks = 1;
  size_t smem = PRIV ? (size_t)nb * sizeof(int) : 0;
  hist<<<(unsigned)blocks, NTH, smem, s>>>((const int*)in[0].data, (int*)out[0].data, n, nb);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
