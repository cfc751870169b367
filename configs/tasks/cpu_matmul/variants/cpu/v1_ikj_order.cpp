// cpu_matmul v1: i-k-j loop order: the innermost loop streams a row of B and a row of C
// (unit stride), which the compiler vectorizes.
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* a = static_cast<const float*>(in[0].data);
  const float* b = static_cast<const float*>(in[1].data);
  float* c = static_cast<float*>(out[0].data);
  const long m = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[1];
  for (long i = 0; i < m; ++i) {
    float* ci = c + i * n;
    for (long j = 0; j < n; ++j) ci[j] = 0.0f;
    for (long p = 0; p < k; ++p) {
      const float aip = a[i * k + p];
      const float* bp = b + p * n;
      for (long j = 0; j < n; ++j) ci[j] += aip * bp[j];
    }
  }
  return 0;
}
