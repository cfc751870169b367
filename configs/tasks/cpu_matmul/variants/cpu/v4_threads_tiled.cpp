// cpu_matmul v4: v2 with row blocks of C split across hardware threads (joined before return).
#include <htam/kernel_abi.h>

#include <algorithm>
#include <thread>
#include <vector>

static void Block(const float* a, const float* b, float* c, long i0, long i1, long n, long k) {
  constexpr long KB = 64, NB = 256;
  for (long i = i0; i < i1; ++i)
    for (long j = 0; j < n; ++j) c[i * n + j] = 0.0f;
  for (long p0 = 0; p0 < k; p0 += KB) {
    const long p1 = std::min(k, p0 + KB);
    for (long j0 = 0; j0 < n; j0 += NB) {
      const long j1 = std::min(n, j0 + NB);
      for (long i = i0; i < i1; ++i) {
        float* ci = c + i * n;
        for (long p = p0; p < p1; ++p) {
          const float aip = a[i * k + p];
          const float* bp = b + p * n;
          for (long j = j0; j < j1; ++j) ci[j] += aip * bp[j];
        }
      }
    }
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* a = static_cast<const float*>(in[0].data);
  const float* b = static_cast<const float*>(in[1].data);
  float* c = static_cast<float*>(out[0].data);
  const long m = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[1];
  long threads = std::min<long>(std::max(1u, std::thread::hardware_concurrency()), m);
  if (m * n * k < (1L << 20)) threads = 1;
  if (threads <= 1) {
    Block(a, b, c, 0, m, n, k);
    return 0;
  }
  std::vector<std::thread> pool;
  long chunk = (m + threads - 1) / threads;
  for (long t = 0; t < threads; ++t) {
    long i0 = t * chunk, i1 = std::min(m, i0 + chunk);
    if (i0 < i1) pool.emplace_back(Block, a, b, c, i0, i1, n, k);
  }
  for (auto& th : pool) th.join();
  return 0;
}
