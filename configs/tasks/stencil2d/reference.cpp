// stencil2d reference for the CPU backend.
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream) {
  if (nin != 1 || nout != 1 || in[0].ndim != 2) return 1;
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const int64_t h = in[0].shape[0], w = in[0].shape[1];
  for (int64_t i = 0; i < h; ++i) {
    for (int64_t j = 0; j < w; ++j) {
      const float up = i > 0 ? x[(i - 1) * w + j] : 0.f;
      const float down = i + 1 < h ? x[(i + 1) * w + j] : 0.f;
      const float left = j > 0 ? x[i * w + j - 1] : 0.f;
      const float right = j + 1 < w ? x[i * w + j + 1] : 0.f;
      y[i * w + j] = 0.5f * x[i * w + j] + 0.125f * (up + down + left + right);
    }
  }
  return 0;
}
