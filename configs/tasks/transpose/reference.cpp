// transpose reference for the CPU backend.
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const int64_t m = in[0].shape[0], n = in[0].shape[1];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) y[j * m + i] = x[i * n + j];
  return 0;
}
