// FAULT: forks children that sleep forever (bounded here so that parallel test runs sharing the
// sandbox user's RLIMIT_NPROC are not starved). ResourceLimit; the PID namespace / process group
// ends them with the worker.
#include <htam/kernel_abi.h>
#include <unistd.h>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  for (int i = 0; i < 32; ++i) {
    pid_t p = fork();
    if (p == 0) {
      for (;;) pause();
    }
    if (p < 0) break;
  }
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  for (long i = 0; i < htam_numel(&in[0]); ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
  return 0;
}
