// cpu_rowsum reference: one double accumulator per row, summed in order (a serial dependency
// chain the compiler may not reorder without -ffast-math). The sum is kept in double so that the
// golden row sums are exact to float precision: a float running sum over 70001 terms carries
// rounding error near the task's atol, and a correct float candidate that sums in another order
// would then be judged against the reference's own error.
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const long rows = in[0].shape[0], cols = in[0].shape[1];
  for (long r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (long c = 0; c < cols; ++c) acc += x[r * cols + c];
    y[r] = static_cast<float>(acc);
  }
  return 0;
}
