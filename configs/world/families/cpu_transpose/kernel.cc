// cpu_transpose family: B = A^T on the host CPU. Knobs (defined above this line by the
// materializer): ORDER, TILE, MICRO, UNROLL. f32 only. The reference is the template at the
// baseline: row by row over A, writes strided by R.
#include <htam/kernel_abi.h>

// `#pragma GCC unroll UNROLL` with the knob expanded (1: no unrolling).
#define HTAM_DO_PRAGMA(x) _Pragma(#x)
#define HTAM_UNROLL(n) HTAM_DO_PRAGMA(GCC unroll n)

// B[j, i] = A[i, j] for i in [i0, i1), j in [j0, j1).
static inline void block(const float* __restrict a, float* __restrict b, long rows, long cols,
                         long i0, long i1, long j0, long j1) {
#if MICRO
  // 4 x 4 through registers; the block's extent is assumed to be a multiple of 4 (no tail).
  for (long i = i0; i + 4 <= i1; i += 4)
    for (long j = j0; j + 4 <= j1; j += 4) {
      float v[4][4];
      for (int p = 0; p < 4; ++p)
        for (int q = 0; q < 4; ++q) v[p][q] = a[(i + p) * cols + j + q];
      for (int q = 0; q < 4; ++q)
        for (int p = 0; p < 4; ++p) b[(j + q) * rows + i + p] = v[p][q];
    }
#elif ORDER
  for (long j = j0; j < j1; ++j) {
HTAM_UNROLL(UNROLL)
    for (long i = i0; i < i1; ++i) b[j * rows + i] = a[i * cols + j];
  }
#else
  for (long i = i0; i < i1; ++i) {
HTAM_UNROLL(UNROLL)
    for (long j = j0; j < j1; ++j) b[j * rows + i] = a[i * cols + j];
  }
#endif
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  (void)stream;
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  const float* a = static_cast<const float*>(in[0].data);
  float* b = static_cast<float*>(out[0].data);
  const long rows = in[0].shape[0], cols = in[0].shape[1];
#if TILE
#if ORDER
  for (long j0 = 0; j0 < cols; j0 += TILE)
    for (long i0 = 0; i0 < rows; i0 += TILE)
#else
  for (long i0 = 0; i0 < rows; i0 += TILE)
    for (long j0 = 0; j0 < cols; j0 += TILE)
#endif
      block(a, b, rows, cols, i0, i0 + TILE < rows ? i0 + TILE : rows, j0,
            j0 + TILE < cols ? j0 + TILE : cols);
#else
  block(a, b, rows, cols, 0, rows, 0, cols);
#endif
  return 0;
}
