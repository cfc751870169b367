// cpu_rowsum v1: eight independent partial sums per row break the add latency chain and let the
// compiler vectorize; combined pairwise at the end (more accurate, too).
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const long rows = in[0].shape[0], cols = in[0].shape[1];
  for (long r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    long c = 0;
    for (; c + 8 <= cols; c += 8)
      for (int k = 0; k < 8; ++k) a[k] += row[c + k];
    float acc = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    for (; c < cols; ++c) acc += row[c];
    y[r] = acc;
  }
  return 0;
}
