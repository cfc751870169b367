// cpu_matmul reference: the textbook i-j-k loop with a float dot product per output (B walked
// down its columns).
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 2 || nout != 1) return 1;
  const float* a = static_cast<const float*>(in[0].data);
  const float* b = static_cast<const float*>(in[1].data);
  float* c = static_cast<float*>(out[0].data);
  const long m = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[1];
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (long p = 0; p < k; ++p) acc += a[i * k + p] * b[p * n + j];
      c[i * n + j] = acc;
    }
  return 0;
}
