// scan reference for the CPU backend: a running int32 sum (wraps like the GPU versions).
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream) {
  if (nin != 1 || nout != 1) return 1;
  const int32_t* x = static_cast<const int32_t*>(in[0].data);
  int32_t* y = static_cast<int32_t*>(out[0].data);
  const int64_t n = htam_numel(&in[0]);
  uint32_t acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    acc += static_cast<uint32_t>(x[i]);
    y[i] = static_cast<int32_t>(acc);
  }
  return 0;
}
