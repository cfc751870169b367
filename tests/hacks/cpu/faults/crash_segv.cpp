// FAULT: dereferences null. Kills only its worker: Crash (SIGSEGV).
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  *static_cast<volatile int*>(nullptr) = 1;
  return 0;
}
