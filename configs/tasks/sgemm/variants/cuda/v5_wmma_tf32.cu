// sgemm v5 (from v1): tensor cores in TF32 mode (wmma m16n16k8), 32x32 block tile, 4 warps,
// A/B tiles staged in shared memory with zero padding so that any M, N, K work. Dead end: TF32
// keeps 10 mantissa bits, so the products carry ~1e-3 relative error, far outside this task's
// float32 tolerance.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>
#include <mma.h>
using namespace nvcuda;

__global__ void sgemm_tf32(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ c, int m, int n, int k) {
  __shared__ __align__(32) float as[32][12];
  __shared__ __align__(32) float bs[8][36];
  __shared__ __align__(32) float cs[32][36];
  const int t = threadIdx.x, warp = t / 32;
  const int wm = warp / 2, wn = warp % 2;
  const int bm = blockIdx.y * 32, bn = blockIdx.x * 32;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  wmma::fill_fragment(acc, 0.f);
  for (int k0 = 0; k0 < k; k0 += 8) {
    for (int idx = t; idx < 32 * 8; idx += 128) {
      int r = idx / 8, cc = idx % 8;
      as[r][cc] = (bm + r < m && k0 + cc < k) ? a[(long)(bm + r) * k + k0 + cc] : 0.f;
      int rb = idx / 32, cb = idx % 32;
      bs[rb][cb] = (k0 + rb < k && bn + cb < n) ? b[(long)(k0 + rb) * n + bn + cb] : 0.f;
    }
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb;
    wmma::load_matrix_sync(fa, &as[wm * 16][0], 12);
    wmma::load_matrix_sync(fb, &bs[0][wn * 16], 36);
    for (int i = 0; i < fa.num_elements; ++i) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
    for (int i = 0; i < fb.num_elements; ++i) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
    wmma::mma_sync(acc, fa, fb, acc);
    __syncthreads();
  }
  wmma::store_matrix_sync(&cs[wm * 16][wn * 16], acc, 36, wmma::mem_row_major);
  __syncthreads();
  for (int idx = t; idx < 32 * 32; idx += 128) {
    int r = idx / 32, cc = idx % 32;
    if (bm + r < m && bn + cc < n) c[(long)(bm + r) * n + bn + cc] = cs[r][cc];
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 2 || nout != 1) return 1;
  int m = (int)in[0].shape[0], k = (int)in[0].shape[1], n = (int)in[1].shape[1];
  if (m == 0 || n == 0) return 0;
  dim3 grid((n + 31) / 32, (m + 31) / 32);
  sgemm_tf32<<<grid, 128, 0, (cudaStream_t)stream>>>((const float*)in[0].data,
                                                     (const float*)in[1].data,
                                                     (float*)out[0].data, m, n, k);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
