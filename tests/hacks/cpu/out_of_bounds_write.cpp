// HACK: a sloppy vector loop that rounds N up to a multiple of 16 and writes past the end of the
// output. Caught: guard bytes after every buffer.
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const long n = htam_numel(&in[0]);
  const long padded = (n + 16) / 16 * 16;
  for (long i = 0; i < padded; ++i) y[i] = i < n && x[i] > 0 ? x[i] : 0.0f;
  return 0;
}
