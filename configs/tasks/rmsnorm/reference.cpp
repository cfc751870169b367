// rmsnorm reference for the CPU backend: double accumulation of the sum of squares.
#include <htam/kernel_abi.h>
#include <cmath>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream) {
  if (nin != 2 || nout != 1 || in[0].ndim != 2) return 1;
  const float* x = static_cast<const float*>(in[0].data);
  const float* w = static_cast<const float*>(in[1].data);
  float* y = static_cast<float*>(out[0].data);
  const int64_t m = in[0].shape[0], n = in[0].shape[1];
  for (int64_t i = 0; i < m; ++i) {
    const float* row = x + i * n;
    double ss = 0.0;
    for (int64_t j = 0; j < n; ++j) ss += static_cast<double>(row[j]) * row[j];
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-6);
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = static_cast<float>(row[j] * scale * w[j]);
  }
  return 0;
}
