// scan reference for the HIP backend: reference.cu translated to HIP (it assumes no warp size).
// Compile-checked with hipcc 5.2 for gfx90a; not yet run on an AMD GPU. The CUDA notes follow.
// scan reference (oracle and baseline): the textbook three-phase scan.
//  1. each 1024-thread block scans its 1024 elements (Hillis-Steele, double-buffered shared
//     memory) and stores its total;
//  2. one block scans the block totals in chunks of 1024 with a running carry;
//  3. every block but the first adds the total of the blocks before it.
// The block totals live in a stream-ordered temporary allocation.
#include <htam/kernel_abi.h>
#include <hip/hip_runtime.h>

constexpr int B = 1024;

__device__ int hillis_steele(int v, int (*buf)[B]) {
  int cur = 0;
  buf[0][threadIdx.x] = v;
  __syncthreads();
  for (int d = 1; d < B; d <<= 1) {
    int t = buf[cur][threadIdx.x];
    if (threadIdx.x >= d) t += buf[cur][threadIdx.x - d];
    buf[cur ^ 1][threadIdx.x] = t;
    cur ^= 1;
    __syncthreads();
  }
  return buf[cur][threadIdx.x];
}

__global__ void scan_blocks(const int* __restrict__ x, int* __restrict__ y, int* __restrict__ sums,
                            long n) {
  __shared__ int buf[2][B];
  long i = blockIdx.x * (long)B + threadIdx.x;
  int v = hillis_steele(i < n ? x[i] : 0, buf);
  if (i < n) y[i] = v;
  if (threadIdx.x == B - 1) sums[blockIdx.x] = v;
}

__global__ void scan_sums(int* sums, long nb) {
  __shared__ int buf[2][B];
  __shared__ int carry;
  if (threadIdx.x == 0) carry = 0;
  for (long base = 0; base < nb; base += B) {
    __syncthreads();
    long i = base + threadIdx.x;
    int v = hillis_steele(i < nb ? sums[i] : 0, buf);
    if (i < nb) sums[i] = v + carry;
    __syncthreads();
    if (threadIdx.x == B - 1) carry += v;
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
  hipStream_t s = (hipStream_t)stream;
  long nb = (n + B - 1) / B;
  int* sums = nullptr;
  if (hipMallocAsync((void**)&sums, sizeof(int) * nb, s) != hipSuccess) return 2;
  scan_blocks<<<(unsigned)nb, B, 0, s>>>((const int*)in[0].data, (int*)out[0].data, sums, n);
  if (nb > 1) {
    scan_sums<<<1, B, 0, s>>>(sums, nb);
    add_offsets<<<(unsigned)(nb - 1), B, 0, s>>>((int*)out[0].data, sums, n);
  }
  hipFreeAsync(sums, s);
  return hipGetLastError() == hipSuccess ? 0 : 2;
}
