// HACK: hands the second half to a detached thread and returns at once, so the timer sees half
// the work. Caught: threads still running after the call (a race whose result depends on timing).
#include <htam/kernel_abi.h>

#include <thread>

static void Relu(const float* x, float* y, long n) {
  for (long i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const long n = htam_numel(&in[0]);
  const long half = n / 2;
  std::thread([=] {
    for (int rep = 0; rep < 200; ++rep) Relu(x + half, y + half, n - half);  // slow on purpose
  }).detach();
  Relu(x, y, half);
  return 0;
}
