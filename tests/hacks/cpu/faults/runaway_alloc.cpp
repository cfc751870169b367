// FAULT: allocates (and touches) 64 MiB blocks forever. ResourceLimit (address-space limit).
#include <htam/kernel_abi.h>

#include <cstring>
#include <vector>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  std::vector<char*> keep;
  for (;;) {
    char* p = new char[64u << 20];
    std::memset(p, 1, 64u << 20);
    keep.push_back(p);
  }
}
