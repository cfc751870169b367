// cpu_relu v2: v1 split across hardware threads (joined before returning).
#include <htam/kernel_abi.h>
#include <immintrin.h>

#include <algorithm>
#include <thread>
#include <vector>

static void Relu(const float* x, float* y, long n) {
  const __m256 zero = _mm256_setzero_ps();
  long i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_max_ps(_mm256_loadu_ps(x + i), zero));
  for (; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const long n = htam_numel(&in[0]);
  long threads = std::min<long>(std::max(1u, std::thread::hardware_concurrency()), n / 65536 + 1);
  if (threads <= 1) {
    Relu(x, y, n);
    return 0;
  }
  std::vector<std::thread> pool;
  long chunk = (n + threads - 1) / threads;
  for (long t = 0; t < threads; ++t) {
    long b = t * chunk, e = std::min(n, b + chunk);
    if (b < e) pool.emplace_back(Relu, x + b, y + b, e - b);
  }
  for (auto& th : pool) th.join();
  return 0;
}
