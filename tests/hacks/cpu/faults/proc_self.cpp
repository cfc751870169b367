// PROBE: computes relu correctly, but only when /proc describes this process: /proc/self must
// name getpid(). GPU runtimes read /proc for their own PID (the CUDA runtime fails with
// cudaErrorOperatingSystem otherwise); a worker in a PID namespace of its own needs a /proc of
// that namespace. Returns 7 when /proc/self names another process.
#include <htam/kernel_abi.h>
#include <unistd.h>

#include <cstdlib>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  char link[64] = {0};
  ssize_t n = readlink("/proc/self", link, sizeof link - 1);
  if (n <= 0 || std::atol(link) != static_cast<long>(getpid())) return 7;
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  for (long i = 0; i < htam_numel(&in[0]); ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
  return 0;
}
