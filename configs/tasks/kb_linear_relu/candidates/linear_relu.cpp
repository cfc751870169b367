// kb_linear_relu on the CPU backend: out = relu(x @ W^T + b). The model's parameters arrive as
// further inputs, in task.json's order: in[0] = x [B, IN], in[1] = linear.weight [OUT, IN],
// in[2] = linear.bias [OUT].
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  (void)stream;
  if (nin != 3 || nout != 1) return 1;
  const float* x = static_cast<const float*>(in[0].data);
  const float* w = static_cast<const float*>(in[1].data);
  const float* b = static_cast<const float*>(in[2].data);
  float* y = static_cast<float*>(out[0].data);
  const long batch = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[0];
  for (long i = 0; i < batch; ++i) {
    for (long j = 0; j < n; ++j) {
      float acc = b[j];
      for (long p = 0; p < k; ++p) acc += x[i * k + p] * w[j * k + p];
      y[i * n + j] = acc > 0.0f ? acc : 0.0f;
    }
  }
  return 0;
}
