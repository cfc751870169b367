// fx_square reference for the CPU backend: a plain loop.
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream) {
  if (nin != 1 || nout != 1) return 1;
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const int64_t n = htam_numel(&in[0]);
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v * v;
  }
  return 0;
}
