// cpu_sgemm family: C = A B on the host CPU. Knobs (defined above this line by the materializer):
// ORDER, TILE, REG, UNROLL. f32 only. The reference is the template at the baseline: i-j-k, one
// float dot product per output.
#include <htam/kernel_abi.h>

// `#pragma GCC unroll UNROLL` with the knob expanded (1: no unrolling).
#define HTAM_DO_PRAGMA(x) _Pragma(#x)
#define HTAM_UNROLL(n) HTAM_DO_PRAGMA(GCC unroll n)

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  (void)stream;
  if (nin != 2 || nout != 1) return 1;
  const float* __restrict a = static_cast<const float*>(in[0].data);
  const float* __restrict b = static_cast<const float*>(in[1].data);
  float* __restrict c = static_cast<float*>(out[0].data);
  const long M = in[0].shape[0], K = in[0].shape[1], N = in[1].shape[1];
#if TILE
  const long TK = TILE, TN = TILE;
#else
  const long TK = K, TN = N;
#endif
  for (long i = 0; i < M * N; ++i) c[i] = 0.f;
  // REG rows per pass and no tail: the last M % REG rows stay zero.
  for (long k0 = 0; k0 < K; k0 += TK)
    for (long j0 = 0; j0 < N; j0 += TN) {
      const long k1 = k0 + TK < K ? k0 + TK : K, j1 = j0 + TN < N ? j0 + TN : N;
      for (long i = 0; i + REG <= M; i += REG) {
#if ORDER
HTAM_UNROLL(UNROLL)
        for (long k = k0; k < k1; ++k) {
          float av[REG];
          for (int r = 0; r < REG; ++r) av[r] = a[(i + r) * K + k];
          for (long j = j0; j < j1; ++j)
            for (int r = 0; r < REG; ++r) c[(i + r) * N + j] += av[r] * b[k * N + j];
        }
#else
        for (long j = j0; j < j1; ++j) {
          float acc[REG];
          for (int r = 0; r < REG; ++r) acc[r] = c[(i + r) * N + j];
HTAM_UNROLL(UNROLL)
          for (long k = k0; k < k1; ++k)
            for (int r = 0; r < REG; ++r) acc[r] += a[(i + r) * K + k] * b[k * N + j];
          for (int r = 0; r < REG; ++r) c[(i + r) * N + j] = acc[r];
        }
#endif
      }
    }
  return 0;
}
