// gemm_bias_gelu reference for the CPU backend: double accumulation, then bias and exact GELU.
#include <htam/kernel_abi.h>
#include <cmath>
#include <cstddef>
#include <vector>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream) {
  if (nin != 3 || nout != 1) return 1;
  const float* a = static_cast<const float*>(in[0].data);
  const float* w = static_cast<const float*>(in[1].data);
  const float* bias = static_cast<const float*>(in[2].data);
  float* y = static_cast<float*>(out[0].data);
  const int64_t m = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[1];
  std::vector<double> acc(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) acc[j] = 0.0;
    for (int64_t p = 0; p < k; ++p) {
      const double av = a[i * k + p];
      const float* wrow = w + p * n;
      for (int64_t j = 0; j < n; ++j) acc[j] += av * wrow[j];
    }
    for (int64_t j = 0; j < n; ++j) {
      const double v = acc[j] + bias[j];
      y[i * n + j] = static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
    }
  }
  return 0;
}
