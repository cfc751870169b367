// scan v2 (from v1): thread coarsening. Each of 512 threads scans 8 consecutive elements in
// registers (two 16-byte loads for full tiles), the block scans only the 512 thread totals with
// warp shuffles, and each thread adds its exclusive prefix to its 8 values: a 4096-element tile
// per block, 4x fewer block totals, and 8 elements of independent work per thread.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

constexpr int T = 512, IPT = 8, TILE = T * IPT, BS = 1024;

__device__ __forceinline__ int block_scan(int v, int* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    int t = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += t;
  }
  __syncthreads();
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

__device__ __forceinline__ void load8(const int* x, long base, long n, bool vec, int v[IPT]) {
  if (vec && base + IPT <= n) {
    int4 a = *reinterpret_cast<const int4*>(x + base);
    int4 b = *reinterpret_cast<const int4*>(x + base + 4);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
  } else {
#pragma unroll
    for (int j = 0; j < IPT; ++j) v[j] = base + j < n ? x[base + j] : 0;
  }
}

__device__ __forceinline__ void store8(int* y, long base, long n, bool vec, const int v[IPT]) {
  if (vec && base + IPT <= n) {
    *reinterpret_cast<int4*>(y + base) = make_int4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<int4*>(y + base + 4) = make_int4(v[4], v[5], v[6], v[7]);
  } else {
#pragma unroll
    for (int j = 0; j < IPT; ++j)
      if (base + j < n) y[base + j] = v[j];
  }
}

__global__ void __launch_bounds__(T) scan_tiles(const int* __restrict__ x, int* __restrict__ y,
                                                int* __restrict__ sums, long n, bool vec) {
  __shared__ int sh[32];
  long base = blockIdx.x * (long)TILE + threadIdx.x * (long)IPT;
  int v[IPT];
  load8(x, base, n, vec, v);
#pragma unroll
  for (int j = 1; j < IPT; ++j) v[j] += v[j - 1];
  int incl = block_scan(v[IPT - 1], sh);
  int excl = incl - v[IPT - 1];
#pragma unroll
  for (int j = 0; j < IPT; ++j) v[j] += excl;
  store8(y, base, n, vec, v);
  if (threadIdx.x == T - 1) sums[blockIdx.x] = incl;
}

__global__ void scan_sums(int* sums, long nb) {
  __shared__ int sh[32];
  int carry = 0;
  for (long base = 0; base < nb; base += BS) {
    long i = base + threadIdx.x;
    int v = block_scan(i < nb ? sums[i] : 0, sh);
    if (i < nb) sums[i] = v + carry;
    carry += sh[(BS >> 5) - 1];
  }
}

__global__ void __launch_bounds__(T) add_offsets(int* __restrict__ y, const int* __restrict__ sums,
                                                 long n, bool vec) {
  long base = (blockIdx.x + 1L) * TILE + threadIdx.x * (long)IPT;
  if (base >= n) return;
  int off = sums[blockIdx.x];
  int v[IPT];
  load8(y, base, n, vec, v);
#pragma unroll
  for (int j = 0; j < IPT; ++j) v[j] += off;
  store8(y, base, n, vec, v);
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1) return 1;
  long n = htam_numel(&in[0]);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  const int* x = (const int*)in[0].data;
  int* y = (int*)out[0].data;
  bool vec = (((uintptr_t)x | (uintptr_t)y) & 15) == 0;
  long nb = (n + TILE - 1) / TILE;
  int* sums = nullptr;
  if (cudaMallocAsync((void**)&sums, sizeof(int) * nb, s) != cudaSuccess) return 2;
  scan_tiles<<<(unsigned)nb, T, 0, s>>>(x, y, sums, n, vec);
  if (nb > 1) {
    scan_sums<<<1, BS, 0, s>>>(sums, nb);
    add_offsets<<<(unsigned)(nb - 1), T, 0, s>>>(y, sums, n, vec);
  }
  cudaFreeAsync(sums, s);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
