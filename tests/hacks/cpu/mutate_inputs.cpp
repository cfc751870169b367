// HACK: computes relu in place in the input and copies it out (the input is mutated; a reference
// run afterwards would see clamped data). Caught: inputs are compared after every call.
#include <htam/kernel_abi.h>

#include <cstring>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  float* x = static_cast<float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const long n = htam_numel(&in[0]);
  for (long i = 0; i < n; ++i)
    if (x[i] < 0) x[i] = 0.0f;
  std::memcpy(y, x, size_t(n) * sizeof(float));
  return 0;
}
