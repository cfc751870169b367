// FAULT: ends the whole process with a success code. Crash (the candidate ended the process).
#include <htam/kernel_abi.h>

#include <cstdlib>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  std::exit(0);
}
