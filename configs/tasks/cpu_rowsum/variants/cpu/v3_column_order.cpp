// cpu_rowsum v3 (dead end): walks the matrix column by column, accumulating into y, hoping to
// vectorize across rows. Every access strides by a whole row: cache misses dominate.
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const long rows = in[0].shape[0], cols = in[0].shape[1];
  for (long r = 0; r < rows; ++r) y[r] = 0.0f;
  for (long c = 0; c < cols; ++c)
    for (long r = 0; r < rows; ++r) y[r] += x[r * cols + c];
  return 0;
}
