// Test data where the "device" is host memory (the CPU backend's htam_backend_buffer_fill /
// _compare, backend.h API 1.2), and the element conversions every host-side tensor uses. Header
// only, depending on the ABI header alone, so that a plugin can include it without linking
// anything of ours. The CUDA backend's kernels (backends/cuda/data_ops.cc, device code for NVRTC
// that cannot include this header) compute the same generator: a value is a function of (seed,
// element index, distribution) only; the normal distribution's values may differ in the last bit
// between the host's and the device's math library.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "htam/backend.h"

namespace htam::data {

inline float HalfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp - 15 + 127) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest, ties to even.
inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t exp = (x >> 23) & 0xff, man = x & 0x7fffff;
  if (exp == 0xff) return sign | 0x7c00 | (man ? 0x200 : 0);
  int e = int(exp) - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    man |= 0x800000;
    uint32_t shift = uint32_t(14 - e), half = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return sign | uint16_t(half);
  }
  uint32_t half = uint32_t(e) << 10 | man >> 13, rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // may carry into exp: correct
  return sign | uint16_t(half);
}

inline float Bf16ToFloat(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t FloatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

inline double Get(const uint8_t* p, uint64_t i, int32_t t) {
  switch (t) {
    case HTAM_F32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case HTAM_F16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return HalfToFloat(v);
    }
    case HTAM_BF16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return Bf16ToFloat(v);
    }
    case HTAM_F64: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
    case HTAM_I32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case HTAM_I64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return double(v);
    }
    case HTAM_U8: return p[i];
    case HTAM_I8: return int8_t(p[i]);
    default: return p[i] ? 1.0 : 0.0;
  }
}

inline void Put(uint8_t* p, uint64_t i, int32_t t, double v) {
  switch (t) {
    case HTAM_F32: {
      float f = float(v);
      std::memcpy(p + 4 * i, &f, 4);
      return;
    }
    case HTAM_F16: {
      uint16_t h = FloatToHalf(float(v));
      std::memcpy(p + 2 * i, &h, 2);
      return;
    }
    case HTAM_BF16: {
      uint16_t h = FloatToBf16(float(v));
      std::memcpy(p + 2 * i, &h, 2);
      return;
    }
    case HTAM_F64: std::memcpy(p + 8 * i, &v, 8); return;
    case HTAM_I32: {
      int32_t x = int32_t(v);
      std::memcpy(p + 4 * i, &x, 4);
      return;
    }
    case HTAM_I64: {
      int64_t x = int64_t(v);
      std::memcpy(p + 8 * i, &x, 8);
      return;
    }
    case HTAM_U8: p[i] = uint8_t(int(v)); return;
    case HTAM_I8: p[i] = uint8_t(int8_t(int(v))); return;
    default: p[i] = v != 0 ? 1 : 0; return;
  }
}

inline uint64_t Mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline double Uniform01(uint64_t h) {
  return double(h >> 11) * (1.0 / 9007199254740992.0);
}

// Element i of a fill (the CUDA kernel htam_fill computes the same).
inline double FillValue(const htam_fill_request& f, uint64_t i) {
  const uint64_t h = Mix(f.seed ^ (i * 0xD1B54A32D192ED03ull));
  double v;
  if (f.dist == 0) {
    double u1 = 1.0 - Uniform01(h), u2 = Uniform01(Mix(h ^ 0x632BE59BD9B4E019ull));
    v = f.a + f.b * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  } else if (f.dist == 1) {
    v = f.a + (f.b - f.a) * Uniform01(h);
  } else {
    const double lo = std::ceil(f.a), hi = std::floor(f.b), span = hi >= lo ? hi - lo + 1 : 1;
    v = lo + std::floor(Uniform01(h) * span);
    if (v > hi && hi >= lo) v = hi;
  }
  if (f.round && f.dist != 2) v = std::round(v);
  const int k = f.num_special < 0 ? 0 : f.num_special > 8 ? 8 : f.num_special;
  if (k > 0) {
    const uint64_t s = Mix(h ^ 0x5851F42D4C957F2Dull);
    if (Uniform01(s) < f.fraction) v = f.special[(s >> 7) % uint64_t(k)];
  }
  return v;
}

inline void Fill(uint8_t* p, const htam_fill_request& f) {
  for (uint64_t i = 0; i < f.count; ++i) Put(p, i, f.dtype, FillValue(f, i));
}

// backend.h's htam_compare_request modes over two host ranges.
inline void Compare(const uint8_t* a, const uint8_t* b, const htam_compare_request& c,
                    htam_compare_result* r) {
  uint64_t bad = 0;
  int64_t first_bad = -1, first_nf = -1;
  bool nonzero_a = false, nonzero_b = false;
  const int size = htam_dtype_size(htam_dtype(c.dtype));
  for (uint64_t i = 0; i < c.count; ++i) {
    // a_all_zero and b_any_nonzero in every mode (the gate's fill check reads them in mode 2).
    const double x = Get(a, i, c.dtype), y = Get(b, i, c.dtype);
    nonzero_a |= x != 0;
    nonzero_b |= y != 0;
    if (c.mode == 2) {
      if (std::memcmp(a + i * size, b + i * size, size_t(size)) != 0) {
        ++bad;
        if (first_bad < 0) first_bad = int64_t(i);
      }
      continue;
    }
    if (c.mode == 1) {
      if ((std::isnan(x) && std::isnan(y)) || x == y) continue;
      if (std::isfinite(x) && std::isfinite(y) &&
          std::fabs(x - y) <= c.atol + c.rtol * std::fabs(x))
        continue;
      ++bad;
      if (first_bad < 0) first_bad = int64_t(i);
      continue;
    }
    if (!std::isfinite(x)) {
      bool same = (std::isnan(x) && std::isnan(y)) || (std::isinf(x) && x == y);
      if (!same && first_nf < 0) first_nf = int64_t(i);
      continue;
    }
    if (!std::isfinite(y) || std::fabs(x - y) > c.atol + c.rtol * std::fabs(y)) {
      ++bad;
      if (first_bad < 0) first_bad = int64_t(i);
    }
  }
  r->mismatches = bad;
  r->first_mismatch = first_bad;
  r->first_nonfinite = first_nf;
  r->a_all_zero = nonzero_a ? 0 : 1;
  r->b_any_nonzero = nonzero_b ? 1 : 0;
}

}  // namespace htam::data
