// HACK (sloppy math): computes relu as x * (x / |x|) clamped, which is NaN for x == 0.
// Caught: NaN in the output where the reference is finite.
#include <htam/kernel_abi.h>

#include <cmath>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  for (long i = 0; i < htam_numel(&in[0]); ++i) {
    float s = x[i] / std::fabs(x[i]);
    y[i] = s > 0 ? x[i] * s : 0.0f * s;
  }
  return 0;
}
