// Input generation and dtype conversions; see tensor_data.h.
#include "backends/common/tensor_data.h"

#include <cmath>
#include <cstring>
#include <random>

namespace htam {

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool HostTensor::IsFloat() const {
  return dtype == HTAM_F32 || dtype == HTAM_F64 || dtype == HTAM_F16 || dtype == HTAM_BF16;
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  uint32_t bits;
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

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t exp = (x >> 23) & 0xff;
  uint32_t man = x & 0x7fffff;
  if (exp == 0xff) return sign | 0x7c00 | (man ? 0x200 : 0);
  int e = int(exp) - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    man |= 0x800000;
    uint32_t shift = uint32_t(14 - e);
    uint32_t half = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return sign | uint16_t(half);
  }
  uint32_t half = uint32_t(e) << 10 | man >> 13;
  uint32_t rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // may carry into exp: correct
  return sign | uint16_t(half);
}

float Bf16ToFloat(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

double HostTensor::At(int64_t i) const {
  const uint8_t* p = bytes.data();
  switch (dtype) {
    case HTAM_F32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case HTAM_F64: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
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
    case HTAM_BOOL: return p[i] ? 1.0 : 0.0;
  }
  return 0;
}

void HostTensor::Set(int64_t i, double v) {
  uint8_t* p = bytes.data();
  switch (dtype) {
    case HTAM_F32: {
      float f = float(v);
      std::memcpy(p + 4 * i, &f, 4);
      return;
    }
    case HTAM_F64: {
      std::memcpy(p + 8 * i, &v, 8);
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
    case HTAM_U8: p[i] = uint8_t(v); return;
    case HTAM_I8: p[i] = uint8_t(int8_t(v)); return;
    case HTAM_BOOL: p[i] = v != 0 ? 1 : 0; return;
  }
}

HostTensor MakeTensor(const std::string& name, htam_dtype dtype,
                      const std::vector<int64_t>& shape) {
  HostTensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = shape;
  t.bytes.assign(static_cast<size_t>(t.numel()) * htam_dtype_size(dtype), 0);
  return t;
}

HostTensor GenerateInput(const TensorSpec& spec, const std::vector<int64_t>& shape, uint64_t seed) {
  HostTensor t = MakeTensor(spec.name, spec.dtype, shape);
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 0x5bd1e995);
  const InitSpec& init = spec.init;
  const int64_t n = t.numel();
  const bool integral = !t.IsFloat() || init.dist == InitSpec::Dist::kRandint;
  bool any_nonzero = false;
  std::normal_distribution<double> normal(init.a, init.b);
  std::uniform_real_distribution<double> uniform(init.a, init.b);
  std::uniform_int_distribution<int64_t> randint(static_cast<int64_t>(std::ceil(init.a)),
                                                 static_cast<int64_t>(std::floor(init.b)));
  for (int64_t i = 0; i < n; ++i) {
    double v;
    if (integral && init.dist != InitSpec::Dist::kRandint) {
      v = std::round(init.dist == InitSpec::Dist::kNormal ? normal(rng) : uniform(rng));
    } else if (init.dist == InitSpec::Dist::kNormal) {
      v = normal(rng);
    } else if (init.dist == InitSpec::Dist::kUniform) {
      v = uniform(rng);
    } else {
      v = double(randint(rng));
    }
    t.Set(i, v);
    any_nonzero |= t.At(i) != 0;
  }
  if (!init.special.empty() && init.special_fraction > 0 && n > 0) {
    int64_t count = std::max<int64_t>(1, static_cast<int64_t>(init.special_fraction * n));
    std::uniform_int_distribution<int64_t> pos(0, n - 1);
    for (int64_t k = 0; k < count; ++k)
      t.Set(pos(rng), init.special[static_cast<size_t>(k) % init.special.size()]);
  }
  if (!any_nonzero) {  // never hand out only zeros: a zero-output candidate would pass
    for (int64_t i = 0; i < n; i += 7) t.Set(i, t.dtype == HTAM_BOOL ? 1 : 1 + double(i % 3));
  }
  return t;
}

htam_tensor Describe(const HostTensor& t, void* data) {
  htam_tensor d{};
  d.data = data;
  d.dtype = t.dtype;
  d.ndim = static_cast<int32_t>(t.shape.size());
  int64_t stride = 1;
  for (int i = d.ndim - 1; i >= 0; --i) {
    d.shape[i] = t.shape[i];
    d.strides[i] = stride;
    stride *= t.shape[i];
  }
  return d;
}

}  // namespace htam
