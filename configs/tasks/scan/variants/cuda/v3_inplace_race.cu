// scan v3 (from reference): the Hillis-Steele block scan done in place in one shared buffer
// instead of ping-ponging between two (half the shared memory, no buffer index). Dead end: in
// each step a thread may read buf[i - d] after its owner already added to it in the same step
// (there is no barrier between the reads and the writes of a step), so warps that run ahead
// double-count: a data race whose result depends on warp scheduling.
// Otherwise the reference's three phases:
//  1. each 1024-thread block scans its 1024 elements and stores its total;
//  2. one block scans the block totals in chunks of 1024 with a running carry;
//  3. every block but the first adds the total of the blocks before it.
// The block totals live in a stream-ordered temporary allocation.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

constexpr int B = 1024;

__device__ int hillis_steele(int v, int* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int d = 1; d < B; d <<= 1) {
    if (threadIdx.x >= d) buf[threadIdx.x] += buf[threadIdx.x - d];  // races with the owner's +=
    __syncthreads();
  }
  return buf[threadIdx.x];
}

__global__ void scan_blocks(const int* __restrict__ x, int* __restrict__ y, int* __restrict__ sums,
                            long n) {
  __shared__ int buf[B];
  long i = blockIdx.x * (long)B + threadIdx.x;
  int v = hillis_steele(i < n ? x[i] : 0, buf);
  if (i < n) y[i] = v;
  if (threadIdx.x == B - 1) sums[blockIdx.x] = v;
}

__global__ void scan_sums(int* sums, long nb) {
  __shared__ int buf[B];
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
