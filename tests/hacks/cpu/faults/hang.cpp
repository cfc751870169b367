// FAULT: never returns. Timeout; the worker is killed and replaced.
#include <htam/kernel_abi.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  volatile unsigned long spin = 0;
  for (;;) ++spin;
}
