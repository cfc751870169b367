// HACK: does half the work. Caught: outputs are poisoned (NaN) before the call.
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const long n = htam_numel(&in[0]);
  for (long i = 0; i < n / 2; ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
  return 0;
}
