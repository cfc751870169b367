// HACK: writes zeros; every reference value is below atol, so tolerance alone would pass it.
// Caught: an all-zero output fails where the reference is not all zeros.
#include <htam/kernel_abi.h>

#include <cstring>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  std::memset(out[0].data, 0, size_t(htam_numel(&out[0])) * sizeof(float));
  return 0;
}
