// FAULT: mallocs and touches 2 GiB in 64 MiB steps, with no address-space limit on its worker
// (as on a GPU backend). ResourceLimit (the worker's memory cgroup, eval.host_memory_limit_mb).
#include <htam/kernel_abi.h>

#include <cstdlib>
#include <cstring>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  for (int i = 0; i < 32; ++i) {
    char* p = static_cast<char*>(std::malloc(64u << 20));
    if (!p) return 1;
    std::memset(p, 1, 64u << 20);
  }
  return 0;  // 2 GiB held: the host memory limit did not hold
}
