// cpu_matmul v2: v1 blocked over K and N (64 x 256 tiles) so that the slice of B in use stays in
// L2 while a block of rows of A sweeps it.
#include <htam/kernel_abi.h>

#include <algorithm>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* a = static_cast<const float*>(in[0].data);
  const float* b = static_cast<const float*>(in[1].data);
  float* c = static_cast<float*>(out[0].data);
  const long m = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[1];
  constexpr long KB = 64, NB = 256;
  for (long i = 0; i < m * n; ++i) c[i] = 0.0f;
  for (long p0 = 0; p0 < k; p0 += KB) {
    const long p1 = std::min(k, p0 + KB);
    for (long j0 = 0; j0 < n; j0 += NB) {
      const long j1 = std::min(n, j0 + NB);
      for (long i = 0; i < m; ++i) {
        float* ci = c + i * n;
        for (long p = p0; p < p1; ++p) {
          const float aip = a[i * k + p];
          const float* bp = b + p * n;
          for (long j = j0; j < j1; ++j) ci[j] += aip * bp[j];
        }
      }
    }
  }
  return 0;
}
