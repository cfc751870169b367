// FAULT: aborts. Crash (SIGABRT).
#include <htam/kernel_abi.h>

#include <cstdlib>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  std::abort();
}
