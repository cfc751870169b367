// softmax reference for the CPU backend: max-subtracted, double accumulation.
#include <htam/kernel_abi.h>
#include <cmath>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const int64_t m = in[0].shape[0], n = in[0].shape[1];
  for (int64_t i = 0; i < m; ++i) {
    const float* row = x + i * n;
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(row[j]) - mx);
    for (int64_t j = 0; j < n; ++j)
      y[i * n + j] = static_cast<float>(std::exp(static_cast<double>(row[j]) - mx) / sum);
  }
  return 0;
}
