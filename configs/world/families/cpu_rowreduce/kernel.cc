// cpu_rowreduce family: y[r] = sum_c x[r, c] on the host CPU. Knobs (defined above this line by
// the materializer): ACC, ROWS, BLOCKSUM, PREFETCH. f32 only. The reference is the template at the
// baseline: one double accumulator per row, summed in order (a serial chain the compiler may not
// reorder without -ffast-math).
#include <htam/kernel_abi.h>

#if BLOCKSUM
typedef float Acc;   // per block of 256 columns; blocks are added in double
#define SPAN 256L
#else
typedef double Acc;  // over the whole row
#define SPAN (1L << 62)
#endif

// Adds x[c0, c1) of ROWS rows (row stride `cols`) into tot[0..ROWS).
static inline void span(const float* __restrict x, long cols, long c0, long c1, double* tot) {
  Acc acc[ROWS][ACC] = {};
  long c = c0;
  for (; c + ACC <= c1; c += ACC) {
#if PREFETCH
    for (int r = 0; r < ROWS; ++r) __builtin_prefetch(x + r * cols + c + 256);
#endif
    for (int r = 0; r < ROWS; ++r)
      for (int k = 0; k < ACC; ++k) acc[r][k] += x[r * cols + c + k];
  }
  for (; c < c1; ++c)
    for (int r = 0; r < ROWS; ++r) acc[r][0] += x[r * cols + c];
  for (int r = 0; r < ROWS; ++r) {
    Acc s = 0;
    for (int k = 0; k < ACC; ++k) s += acc[r][k];
    tot[r] += s;
  }
}

static inline void rows_at(const float* __restrict x, long cols, float* __restrict y) {
  double tot[ROWS] = {};
  for (long c0 = 0; c0 < cols; c0 += SPAN) span(x, cols, c0, cols - c0 < SPAN ? cols : c0 + SPAN, tot);
  for (int r = 0; r < ROWS; ++r) y[r] = static_cast<float>(tot[r]);
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  (void)stream;
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const long rows = in[0].shape[0], cols = in[0].shape[1];
  long r = 0;
  for (; r + ROWS <= rows; r += ROWS) rows_at(x + r * cols, cols, y + r);
  // The last rows % ROWS rows, one at a time.
  for (; r < rows; ++r) {
    double t = 0;
    for (long c = 0; c < cols; ++c) t += x[r * cols + c];
    y[r] = static_cast<float>(t);
  }
  return 0;
}
