// HONEST: four threads, each a strided share of the elements, all joined before returning.
#include <htam/kernel_abi.h>

#include <thread>
#include <vector>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const long n = htam_numel(&in[0]);
  std::vector<std::thread> t;
  for (int k = 0; k < 4; ++k)
    t.emplace_back([=] {
      for (long i = k; i < n; i += 4) y[i] = x[i] > 0 ? x[i] : 0.0f;
    });
  for (auto& th : t) th.join();
  return 0;
}
