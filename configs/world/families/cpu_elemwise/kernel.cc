// cpu_elemwise family: y = x * sigmoid(x) + 0.5 * z on the host CPU. Knobs (defined above this
// line by the materializer): F32MATH, FASTEXP, VEC, UNROLL, CHUNK. f32 only. The reference is
// the template at the baseline: double-precision libm exp, one element per step.
#include <htam/kernel_abi.h>

// `#pragma GCC unroll UNROLL` with the knob expanded (1: no unrolling).
#define HTAM_DO_PRAGMA(x) _Pragma(#x)
#define HTAM_UNROLL(n) HTAM_DO_PRAGMA(GCC unroll n)

#include <cmath>
#include <cstdint>
#include <cstring>

// exp(v): 2^k * p(r), v = k ln2 + r, |r| <= ln2/2, k rounded to nearest by the 1.5 * 2^23 trick;
// relative error near 2.3e-7 over [-87, 87], 2^k clamped to the float range outside it.
// Branch-free, with no libm call (floorf is one without -ffast-math), so loops over it vectorize.
static inline float fast_exp(float v) {
  const float k = (v * 1.44269504f + 12582912.f) - 12582912.f;
  const float r = v - k * 0.693145752f - k * 1.42860677e-6f;
  float p = 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  int32_t ki = static_cast<int32_t>(k);
  ki = ki < -126 ? -126 : (ki > 127 ? 127 : ki);  // integer compares: no control flow left
  return p * __builtin_bit_cast(float, (ki + 127) << 23);
}

static inline float silu(float x) {
#if FASTEXP
  return x / (1.f + fast_exp(-x));
#elif F32MATH
  return x / (1.f + expf(-x));
#else
  return static_cast<float>(static_cast<double>(x) / (1.0 + std::exp(-static_cast<double>(x))));
#endif
}

// [lo, hi) in steps of VEC elements (a fixed-width inner loop); hi - lo is a multiple of VEC.
static inline void block(const float* __restrict x, const float* __restrict z,
                         float* __restrict y, long i) {
  float a[VEC], b[VEC], c[VEC];
  std::memcpy(a, x + i, sizeof a);
  std::memcpy(b, z + i, sizeof b);
  for (int k = 0; k < VEC; ++k) c[k] = silu(a[k]) + 0.5f * b[k];
  std::memcpy(y + i, c, sizeof c);
}

static void range(const float* __restrict x, const float* __restrict z, float* __restrict y,
                  long lo, long hi) {
#if CHUNK
  // The sigmoid of a chunk into a stack buffer, then the residual pass over it.
  float s[CHUNK];
  for (long c = lo; c < hi; c += CHUNK) {
    const long n = hi - c < CHUNK ? hi - c : CHUNK;
    for (long i = 0; i < n; i += VEC)
      for (int k = 0; k < VEC; ++k) s[i + k] = silu(x[c + i + k]);
    for (long i = 0; i < n; ++i) y[c + i] = s[i] + 0.5f * z[c + i];
  }
#else
HTAM_UNROLL(UNROLL)
  for (long i = lo; i < hi; i += VEC) block(x, z, y, i);
#endif
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  (void)stream;
  if (nin != 2 || nout != 1) return 1;
  const long n = htam_numel(&in[0]);
  // VEC elements per step with no tail: with VEC > 1 the last n % VEC elements are never written.
  range(static_cast<const float*>(in[0].data), static_cast<const float*>(in[1].data),
        static_cast<float*>(out[0].data), 0, n / VEC * VEC);
  return 0;
}
