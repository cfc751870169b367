// cpu_rowsum reference: one float accumulator per row, summed in order (a serial dependency
// chain the compiler may not reorder without -ffast-math).
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const long rows = in[0].shape[0], cols = in[0].shape[1];
  for (long r = 0; r < rows; ++r) {
    float acc = 0.0f;
    for (long c = 0; c < cols; ++c) acc += x[r * cols + c];
    y[r] = acc;
  }
  return 0;
}
