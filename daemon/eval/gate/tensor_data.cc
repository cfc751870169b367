// Input generation and dtype conversions; see tensor_data.h.
#include "daemon/eval/gate/tensor_data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>

#include "backends/common/data_ops_host.h"

namespace htam {

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool HostTensor::IsFloat() const {
  return dtype == HTAM_F32 || dtype == HTAM_F64 || dtype == HTAM_F16 || dtype == HTAM_BF16;
}

uint64_t MixSeed(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  return x;
}

std::string FormatNumber(double v) {
  std::ostringstream o;
  o.precision(7);
  o << v;
  return o.str();
}

std::string FormatGiB(double bytes) {
  return FormatNumber(std::round(bytes / double(uint64_t(1) << 30) * 100) / 100);
}

float HalfToFloat(uint16_t h) {
  return data::HalfToFloat(h);
}
uint16_t FloatToHalf(float f) {
  return data::FloatToHalf(f);
}
float Bf16ToFloat(uint16_t b) {
  return data::Bf16ToFloat(b);
}
uint16_t FloatToBf16(float f) {
  return data::FloatToBf16(f);
}

double HostTensor::At(int64_t i) const {
  return data::Get(bytes.data(), uint64_t(i), dtype);
}

void HostTensor::Set(int64_t i, double v) {
  data::Put(bytes.data(), uint64_t(i), dtype, v);
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

namespace {

// xoshiro256+ seeded through splitmix64: fast, and every chunk of a tensor has its own stream, so
// the values depend on (seed, chunk) only, never on how many threads filled them.
struct Rng {
  uint64_t s[4];
  explicit Rng(uint64_t seed) {
    for (auto& x : s) {
      seed += 0x9E3779B97F4A7C15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      x = z ^ (z >> 31);
    }
  }
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t Next() {
    uint64_t r = s[0] + s[3], t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = Rotl(s[3], 45);
    return r;
  }
  double Uniform01() { return double(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

template <htam_dtype D>
struct Elem;
template <>
struct Elem<HTAM_F32> {
  static void Put(uint8_t* p, int64_t i, double v) {
    float f = float(v);
    std::memcpy(p + 4 * i, &f, 4);
  }
  static double Get(const uint8_t* p, int64_t i) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
};
template <>
struct Elem<HTAM_F64> {
  static void Put(uint8_t* p, int64_t i, double v) { std::memcpy(p + 8 * i, &v, 8); }
  static double Get(const uint8_t* p, int64_t i) {
    double d;
    std::memcpy(&d, p + 8 * i, 8);
    return d;
  }
};
template <>
struct Elem<HTAM_F16> {
  static void Put(uint8_t* p, int64_t i, double v) {
    uint16_t h = FloatToHalf(float(v));
    std::memcpy(p + 2 * i, &h, 2);
  }
  static double Get(const uint8_t* p, int64_t i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return HalfToFloat(h);
  }
};
template <>
struct Elem<HTAM_BF16> {
  static void Put(uint8_t* p, int64_t i, double v) {
    uint16_t h = FloatToBf16(float(v));
    std::memcpy(p + 2 * i, &h, 2);
  }
  static double Get(const uint8_t* p, int64_t i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return Bf16ToFloat(h);
  }
};
template <htam_dtype D, typename T>
struct IntElem {
  static void Put(uint8_t* p, int64_t i, double v) {
    T x = T(v);
    std::memcpy(p + sizeof(T) * i, &x, sizeof(T));
  }
  static double Get(const uint8_t* p, int64_t i) {
    T x;
    std::memcpy(&x, p + sizeof(T) * i, sizeof(T));
    return double(x);
  }
};
template <>
struct Elem<HTAM_I32> : IntElem<HTAM_I32, int32_t> {};
template <>
struct Elem<HTAM_I64> : IntElem<HTAM_I64, int64_t> {};
template <>
struct Elem<HTAM_I8> : IntElem<HTAM_I8, int8_t> {};
template <>
struct Elem<HTAM_U8> : IntElem<HTAM_U8, uint8_t> {};
template <>
struct Elem<HTAM_BOOL> {
  static void Put(uint8_t* p, int64_t i, double v) { p[i] = v != 0 ? 1 : 0; }
  static double Get(const uint8_t* p, int64_t i) { return p[i] ? 1.0 : 0.0; }
};

constexpr int64_t kChunk = 1 << 16;  // elements per independent generator stream

// Fills elements [lo, hi) (a whole number of chunks, the last one may be short); true when one of
// them is non-zero after conversion.
template <htam_dtype D>
bool FillRange(uint8_t* p, int64_t lo, int64_t hi, const InitSpec& init, bool integral,
               uint64_t seed) {
  bool any = false;
  const double lo_i = std::ceil(init.a), hi_i = std::floor(init.b);
  const double span_i = hi_i >= lo_i ? hi_i - lo_i + 1 : 1;
  for (int64_t c0 = lo; c0 < hi; c0 += kChunk) {
    Rng rng(seed ^ (0xD1B54A32D192ED03ull * uint64_t(c0 / kChunk + 1)));
    const int64_t c1 = std::min(hi, c0 + kChunk);
    double spare = 0;
    bool have_spare = false;
    for (int64_t i = c0; i < c1; ++i) {
      double v;
      if (init.dist == InitSpec::Dist::kNormal) {
        double z;
        if (have_spare) {
          z = spare;
          have_spare = false;
        } else {  // Box-Muller: two normals per pair of uniforms
          double u1 = 1.0 - rng.Uniform01(), u2 = rng.Uniform01();  // u1 in (0, 1]
          double r = std::sqrt(-2.0 * std::log(u1)), th = 6.283185307179586 * u2;
          z = r * std::cos(th);
          spare = r * std::sin(th);
          have_spare = true;
        }
        v = init.a + init.b * z;
      } else if (init.dist == InitSpec::Dist::kUniform) {
        v = init.a + (init.b - init.a) * rng.Uniform01();
      } else {
        v = lo_i + std::floor(rng.Uniform01() * span_i);
        if (v > hi_i && hi_i >= lo_i) v = hi_i;
      }
      if (integral && init.dist != InitSpec::Dist::kRandint) v = std::round(v);
      Elem<D>::Put(p, i, v);
      any |= Elem<D>::Get(p, i) != 0;
    }
  }
  return any;
}

template <htam_dtype D>
bool FillParallel(uint8_t* p, int64_t n, const InitSpec& init, bool integral, uint64_t seed) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  int threads = int(std::min<int64_t>(
      {chunks / 4, int64_t(std::max(1u, std::thread::hardware_concurrency())), int64_t(16)}));
  if (threads <= 1) return FillRange<D>(p, 0, n, init, integral, seed);
  std::vector<std::thread> pool;
  std::vector<char> any(size_t(threads), 0);
  const int64_t per = (chunks + threads - 1) / threads * kChunk;
  int started = 0;
  for (int t = 1; t < threads; ++t) {
    int64_t lo = std::min(n, per * t), hi = std::min(n, per * (t + 1));
    try {
      pool.emplace_back(
          [&, t, lo, hi] { any[size_t(t)] = FillRange<D>(p, lo, hi, init, integral, seed); });
      ++started;
    } catch (const std::system_error&) {  // thread limit of a sandbox: fill it here instead
      any[size_t(t)] = FillRange<D>(p, lo, hi, init, integral, seed);
    }
  }
  any[0] = FillRange<D>(p, 0, std::min(n, per), init, integral, seed);
  for (auto& th : pool) th.join();
  (void)started;
  for (char a : any)
    if (a) return true;
  return false;
}

bool Fill(HostTensor* t, const InitSpec& init, bool integral, uint64_t seed) {
  uint8_t* p = t->bytes.data();
  const int64_t n = t->numel();
  switch (t->dtype) {
    case HTAM_F32: return FillParallel<HTAM_F32>(p, n, init, integral, seed);
    case HTAM_F64: return FillParallel<HTAM_F64>(p, n, init, integral, seed);
    case HTAM_F16: return FillParallel<HTAM_F16>(p, n, init, integral, seed);
    case HTAM_BF16: return FillParallel<HTAM_BF16>(p, n, init, integral, seed);
    case HTAM_I32: return FillParallel<HTAM_I32>(p, n, init, integral, seed);
    case HTAM_I64: return FillParallel<HTAM_I64>(p, n, init, integral, seed);
    case HTAM_U8: return FillParallel<HTAM_U8>(p, n, init, integral, seed);
    case HTAM_I8: return FillParallel<HTAM_I8>(p, n, init, integral, seed);
    case HTAM_BOOL: return FillParallel<HTAM_BOOL>(p, n, init, integral, seed);
  }
  return false;
}

// Generated inputs of this process, by everything that determines them: a batch of candidates of
// one task (htam-eval, a worker that evaluates several) draws the same (shape, seed) inputs
// again and again. Bounded; the oldest entries go first.
class InputCache {
 public:
  std::shared_ptr<const HostTensor> Find(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& e : entries_)
      if (e.first == key) return e.second;
    return nullptr;
  }
  void Put(const std::string& key, std::shared_ptr<const HostTensor> t) {
    std::lock_guard<std::mutex> l(mu_);
    uint64_t add = t->nbytes();
    if (add > kBudget / 4) return;  // a huge tensor would push out everything else
    while (!entries_.empty() && bytes_ + add > kBudget) {
      bytes_ -= entries_.front().second->nbytes();
      entries_.erase(entries_.begin());
    }
    entries_.emplace_back(key, std::move(t));
    bytes_ += add;
  }

 private:
  static constexpr uint64_t kBudget = 1ull << 30;  // workers may run under a 4 GiB limit
  std::mutex mu_;
  std::vector<std::pair<std::string, std::shared_ptr<const HostTensor>>> entries_;  // guarded
  uint64_t bytes_ = 0;                                                              // guarded
};

InputCache& Cache() {
  static InputCache* c = new InputCache();  // never destroyed: used until exit
  return *c;
}

std::string CacheKey(const TensorSpec& spec, const std::vector<int64_t>& shape, uint64_t seed) {
  std::string k = spec.name + "|" + std::to_string(int(spec.dtype)) + "|" +
                  std::to_string(int(spec.init.dist)) + "|";
  char buf[64];
  for (double d : {spec.init.a, spec.init.b, spec.init.special_fraction}) {
    std::snprintf(buf, sizeof buf, "%a,", d);
    k += buf;
  }
  for (double d : spec.init.special) {
    std::snprintf(buf, sizeof buf, "%a;", d);
    k += buf;
  }
  k += "|";
  for (int64_t d : shape) k += std::to_string(d) + "x";
  return k + "|" + std::to_string(seed);
}

}  // namespace

void ReadAsDouble(const HostTensor& t, int64_t lo, int64_t hi, double* out) {
  const uint8_t* p = t.bytes.data();
  auto run = [&](auto elem) {
    for (int64_t i = lo; i < hi; ++i) out[i - lo] = decltype(elem)::Get(p, i);
  };
  switch (t.dtype) {
    case HTAM_F32: run(Elem<HTAM_F32>{}); return;
    case HTAM_F64: run(Elem<HTAM_F64>{}); return;
    case HTAM_F16: run(Elem<HTAM_F16>{}); return;
    case HTAM_BF16: run(Elem<HTAM_BF16>{}); return;
    case HTAM_I32: run(Elem<HTAM_I32>{}); return;
    case HTAM_I64: run(Elem<HTAM_I64>{}); return;
    case HTAM_U8: run(Elem<HTAM_U8>{}); return;
    case HTAM_I8: run(Elem<HTAM_I8>{}); return;
    case HTAM_BOOL: run(Elem<HTAM_BOOL>{}); return;
  }
  for (int64_t i = lo; i < hi; ++i) out[i - lo] = 0;
}

HostTensor GenerateInput(const TensorSpec& spec, const std::vector<int64_t>& shape, uint64_t seed) {
  const std::string key = CacheKey(spec, shape, seed);
  if (auto hit = Cache().Find(key)) return *hit;
  HostTensor t = MakeTensor(spec.name, spec.dtype, shape);
  const uint64_t mixed = seed * 0x9E3779B97F4A7C15ull + 0x5bd1e995;
  const InitSpec& init = spec.init;
  const int64_t n = t.numel();
  const bool integral = !t.IsFloat() || init.dist == InitSpec::Dist::kRandint;
  bool any_nonzero = n > 0 && Fill(&t, init, integral, mixed);
  if (!init.special.empty() && init.special_fraction > 0 && n > 0) {
    std::mt19937_64 rng(mixed ^ 0x5851F42D4C957F2Dull);
    int64_t count = std::max<int64_t>(1, static_cast<int64_t>(init.special_fraction * n));
    std::uniform_int_distribution<int64_t> pos(0, n - 1);
    for (int64_t k = 0; k < count; ++k)
      t.Set(pos(rng), init.special[static_cast<size_t>(k) % init.special.size()]);
  }
  if (!any_nonzero) {  // never hand out only zeros: a zero-output candidate would pass
    for (int64_t i = 0; i < n; i += 7) t.Set(i, t.dtype == HTAM_BOOL ? 1 : 1 + double(i % 3));
  }
  Cache().Put(key, std::make_shared<const HostTensor>(t));
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
