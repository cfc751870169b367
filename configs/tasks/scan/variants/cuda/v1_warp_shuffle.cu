// scan v1: the reference's three phases with a warp-shuffle block scan: __shfl_up_sync scans
// within each warp, one warp scans the 32 warp totals, each warp adds its predecessor's
// total. Two barriers per block scan instead of eleven.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

constexpr int B = 1024;

// inclusive scan over the block (blockDim.x multiple of 32, at most 1024); sh: 32 ints
__device__ __forceinline__ int block_scan(int v, int* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    int t = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += t;
  }
  __syncthreads();  // sh may still be read by a previous call
  if (lane == 31) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int w = lane < nw ? sh[lane] : 0;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      int t = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += t;
    }
    sh[lane] = w;
  }
  __syncthreads();
  return warp > 0 ? v + sh[warp - 1] : v;
}

__global__ void scan_blocks(const int* __restrict__ x, int* __restrict__ y, int* __restrict__ sums,
                            long n) {
  __shared__ int sh[32];
  long i = blockIdx.x * (long)B + threadIdx.x;
  int v = block_scan(i < n ? x[i] : 0, sh);
  if (i < n) y[i] = v;
  if (threadIdx.x == B - 1) sums[blockIdx.x] = v;
}

__global__ void scan_sums(int* sums, long nb) {
  __shared__ int sh[32];
  int carry = 0;
  for (long base = 0; base < nb; base += B) {
    long i = base + threadIdx.x;
    int v = block_scan(i < nb ? sums[i] : 0, sh);
    if (i < nb) sums[i] = v + carry;
    carry += sh[(B >> 5) - 1];  // block total; sh is rewritten only after the next call's barrier
  }
}

__global__ void add_offsets(int* __restrict__ y, const int* __restrict__ sums, long n) {
  long i = (blockIdx.x + 1L) * B + threadIdx.x;
  if (i < n) y[i] += sums[blockIdx.x];
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1) return 1;
  long n = htam_numel(&in[0]);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  long nb = (n + B - 1) / B;
  int* sums = nullptr;
  if (cudaMallocAsync((void**)&sums, sizeof(int) * nb, s) != cudaSuccess) return 2;
  scan_blocks<<<(unsigned)nb, B, 0, s>>>((const int*)in[0].data, (int*)out[0].data, sums, n);
  if (nb > 1) {
    scan_sums<<<1, B, 0, s>>>(sums, nb);
    add_offsets<<<(unsigned)(nb - 1), B, 0, s>>>((int*)out[0].data, sums, n);
  }
  cudaFreeAsync(sums, s);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
