// cpu_stencil2d family: one 5-point Jacobi step on the host CPU. Knobs (defined above this line by
// the materializer): INTERIOR, TILE, ROWS, UNROLL. f32 only. The reference is the template at the
// baseline: every point tests whether it is on the border.
#include <htam/kernel_abi.h>

// `#pragma GCC unroll UNROLL` with the knob expanded (1: no unrolling).
#define HTAM_DO_PRAGMA(x) _Pragma(#x)
#define HTAM_UNROLL(n) HTAM_DO_PRAGMA(GCC unroll n)

static inline float point(const float* __restrict x, long H, long W, long i, long j) {
  const float* p = x + i * W + j;
  return 0.5f * p[0] + 0.125f * (p[-W] + p[W] + p[-1] + p[1]);
}

// Output rows [i, i + n) (n = ROWS or fewer at the end), columns [j0, j1).
static inline void rows_at(const float* __restrict x, float* __restrict y, long H, long W, long i,
                           long n, long j0, long j1) {
#if INTERIOR
  // Only interior rows reach here; the border columns are done apart.
  const long a = j0 < 1 ? 1 : j0, b = j1 > W - 1 ? W - 1 : j1;
  for (long r = 0; r < n; ++r) {
    if (j0 == 0) y[(i + r) * W] = x[(i + r) * W];
    if (j1 == W) y[(i + r) * W + W - 1] = x[(i + r) * W + W - 1];
  }
HTAM_UNROLL(UNROLL)
  for (long j = a; j < b; ++j)
    for (long r = 0; r < n; ++r) y[(i + r) * W + j] = point(x, H, W, i + r, j);
#else
HTAM_UNROLL(UNROLL)
  for (long j = j0; j < j1; ++j)
    for (long r = 0; r < n; ++r) {
      const long ii = i + r;
      y[ii * W + j] = (ii == 0 || ii == H - 1 || j == 0 || j == W - 1) ? x[ii * W + j]
                                                                       : point(x, H, W, ii, j);
    }
#endif
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  (void)stream;
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const long H = in[0].shape[0], W = in[0].shape[1];
#if TILE
  const long TW = TILE;
#else
  const long TW = W;
#endif
#if INTERIOR
  for (long j = 0; j < W; ++j) y[j] = x[j];
  if (H > 1)
    for (long j = 0; j < W; ++j) y[(H - 1) * W + j] = x[(H - 1) * W + j];
  const long i0 = 1, i1 = H - 1;
#else
  const long i0 = 0, i1 = H;
#endif
  for (long j0 = 0; j0 < W; j0 += TW)
    for (long i = i0; i < i1; i += ROWS)
      rows_at(x, y, H, W, i, i + ROWS <= i1 ? ROWS : i1 - i, j0, j0 + TW < W ? j0 + TW : W);
  return 0;
}
