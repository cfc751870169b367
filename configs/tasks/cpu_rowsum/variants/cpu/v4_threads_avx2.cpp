// cpu_rowsum v4: v2 with rows split across hardware threads (joined before returning).
#include <htam/kernel_abi.h>
#include <immintrin.h>

#include <algorithm>
#include <thread>
#include <vector>

static inline float Hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

static void Rows(const float* x, float* y, long r0, long r1, long cols) {
  for (long r = r0; r < r1; ++r) {
    const float* row = x + r * cols;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    long c = 0;
    for (; c + 32 <= cols; c += 32) {
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(row + c));
      a1 = _mm256_add_ps(a1, _mm256_loadu_ps(row + c + 8));
      a2 = _mm256_add_ps(a2, _mm256_loadu_ps(row + c + 16));
      a3 = _mm256_add_ps(a3, _mm256_loadu_ps(row + c + 24));
    }
    for (; c + 8 <= cols; c += 8) a0 = _mm256_add_ps(a0, _mm256_loadu_ps(row + c));
    float acc = Hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; c < cols; ++c) acc += row[c];
    y[r] = acc;
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const long rows = in[0].shape[0], cols = in[0].shape[1];
  long threads = std::min<long>(std::max(1u, std::thread::hardware_concurrency()),
                                rows * cols / 262144 + 1);
  threads = std::min(threads, rows);
  if (threads <= 1) {
    Rows(x, y, 0, rows, cols);
    return 0;
  }
  std::vector<std::thread> pool;
  long chunk = (rows + threads - 1) / threads;
  for (long t = 0; t < threads; ++t) {
    long b = t * chunk, e = std::min(rows, b + chunk);
    if (b < e) pool.emplace_back(Rows, x, y, b, e, cols);
  }
  for (auto& th : pool) th.join();
  return 0;
}
