// Bug: a kernel that never ends. Expected: Timeout (the plugin's per-call limit), device marked
// unusable; the worker is restarted (the tests run it in a child process).
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void spin(volatile int* flag) {
  while (*flag == 0) { }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  cudaMemsetAsync(out[0].data, 0, 4, (cudaStream_t)stream);
  spin<<<1, 1, 0, (cudaStream_t)stream>>>((volatile int*)out[0].data);
  return 0;
}
