// Hack: computes nothing and hopes the output buffer still holds the reference's answer (memory
// the reference just used). Defence: candidate runs before the reference; outputs poisoned.
// Expected: Incorrect.
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  return 0;
}
