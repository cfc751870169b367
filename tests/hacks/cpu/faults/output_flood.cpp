// FAULT: floods stdout. ResourceLimit once the capture limit is passed; the daemon keeps only a
// capped excerpt.
#include <htam/kernel_abi.h>

#include <cstdio>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  static char line[4096];
  for (int i = 0; i < 4095; ++i) line[i] = 'x';
  for (int i = 0; i < 100000; ++i) fwrite(line, 1, sizeof line, stdout);
  fflush(stdout);
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  for (long i = 0; i < htam_numel(&in[0]); ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
  return 0;
}
