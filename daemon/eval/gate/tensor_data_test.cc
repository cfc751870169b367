// Input generation and dtype conversions.
#include "daemon/eval/gate/tensor_data.h"

#include "backends/common/data_ops_host.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace htam {
namespace {

TensorSpec Spec(htam_dtype d, InitSpec::Dist dist, double a, double b) {
  TensorSpec s;
  s.name = "x";
  s.dtype = d;
  s.init.dist = dist;
  s.init.a = a;
  s.init.b = b;
  return s;
}

TEST(GenerateInput, SeededAndDifferentPerSeed) {
  auto s = Spec(HTAM_F32, InitSpec::Dist::kNormal, 0, 1);
  auto a = GenerateInput(s, {1000}, 1), b = GenerateInput(s, {1000}, 1),
       c = GenerateInput(s, {1000}, 2);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_NE(a.bytes, c.bytes);
  double sum = 0, sq = 0;
  for (int i = 0; i < 1000; ++i) {
    sum += a.At(i);
    sq += a.At(i) * a.At(i);
  }
  EXPECT_NEAR(sum / 1000, 0, 0.15);
  EXPECT_NEAR(sq / 1000, 1, 0.2);
}

TEST(GenerateInput, SpecialValuesAppear) {
  auto s = Spec(HTAM_F32, InitSpec::Dist::kUniform, 1, 2);
  s.init.special = {65504.0, -0.0};
  s.init.special_fraction = 0.01;
  auto t = GenerateInput(s, {10000}, 3);
  int big = 0;
  for (int i = 0; i < 10000; ++i) big += t.At(i) == 65504.0;
  EXPECT_GT(big, 10);
}

TEST(GenerateInput, NeverOnlyZeros) {
  auto s = Spec(HTAM_I32, InitSpec::Dist::kRandint, 0, 0.5);  // would give only zeros
  s.init.b = 0.5;
  auto t = GenerateInput(s, {64}, 1);
  bool nonzero = false;
  for (int i = 0; i < 64; ++i) nonzero |= t.At(i) != 0;
  EXPECT_TRUE(nonzero);
}

TEST(GenerateInput, RandintWithinBounds) {
  auto s = Spec(HTAM_I8, InitSpec::Dist::kRandint, -3, 3);
  auto t = GenerateInput(s, {4, 50}, 9);
  EXPECT_EQ(t.nbytes(), 200u);
  for (int i = 0; i < 200; ++i) {
    EXPECT_GE(t.At(i), -3);
    EXPECT_LE(t.At(i), 3);
  }
}

// A tensor large enough to be filled by several threads in chunks: the values do not depend on
// the cache or on how the chunks were shared out (an independent generation gives the same
// bytes), every chunk is distinct, and the distribution holds over the whole tensor.
TEST(GenerateInput, LargeTensorsAreDeterministicAcrossChunks) {
  auto s = Spec(HTAM_F32, InitSpec::Dist::kNormal, 2.0, 3.0);
  const int64_t n = 5 * 65536 + 17;
  HostTensor a = GenerateInput(s, {n}, 11);
  s.name = "y";  // another cache key: generated again from scratch
  HostTensor b = GenerateInput(s, {n}, 11);
  ASSERT_EQ(a.bytes, b.bytes);
  EXPECT_NE(std::vector<uint8_t>(a.bytes.begin(), a.bytes.begin() + 4096),
            std::vector<uint8_t>(a.bytes.begin() + 4 * 65536, a.bytes.begin() + 4 * 65536 + 4096))
      << "two chunks drew the same stream";
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += a.At(i);
    sq += a.At(i) * a.At(i);
  }
  double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 2.0, 0.03);
  EXPECT_NEAR(std::sqrt(var), 3.0, 0.03);
}

TEST(GenerateInput, UniformStaysInRange) {
  auto s = Spec(HTAM_BF16, InitSpec::Dist::kUniform, -1.0, 1.0);
  HostTensor t = GenerateInput(s, {200000}, 5);
  double lo = 1e9, hi = -1e9;
  for (int64_t i = 0; i < t.numel(); ++i) {
    lo = std::min(lo, t.At(i));
    hi = std::max(hi, t.At(i));
  }
  EXPECT_GE(lo, -1.0);
  EXPECT_LE(hi, 1.0);
  EXPECT_LT(lo, -0.95);
  EXPECT_GT(hi, 0.95);
}

TEST(ReadAsDouble, AgreesWithAtForEveryDtype) {
  for (htam_dtype d :
       {HTAM_F32, HTAM_F64, HTAM_F16, HTAM_BF16, HTAM_I32, HTAM_I64, HTAM_U8, HTAM_I8, HTAM_BOOL}) {
    auto s = Spec(d, InitSpec::Dist::kRandint, 0, 100);
    HostTensor t = GenerateInput(s, {3000}, 3);
    std::vector<double> v(1000);
    ReadAsDouble(t, 1500, 2500, v.data());
    for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(v[i], t.At(1500 + i)) << "dtype " << int(d);
  }
}

TEST(Half, ConversionsRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f})
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f) << f;
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(1e6f))));
  EXPECT_TRUE(std::isnan(HalfToFloat(0xFFFF)));
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.5f)), 1.5f);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(0xFFFF)));
}

TEST(Describe, RowMajorStrides) {
  auto t = MakeTensor("m", HTAM_F32, {2, 3, 4});
  htam_tensor d = Describe(t, t.bytes.data());
  EXPECT_EQ(d.ndim, 3);
  EXPECT_EQ(d.strides[0], 12);
  EXPECT_EQ(d.strides[2], 1);
  EXPECT_EQ(htam_numel(&d), 24);
}


// Test data "on the device" (backend.h 1.2), as the CPU backend computes it.
TEST(DeviceData, FillIsAFunctionOfSeedAndIndexAndRespectsItsDistribution) {
  htam_fill_request f{};
  f.struct_size = sizeof f;
  f.dtype = HTAM_F32;
  f.count = 4096;
  f.dist = 1;  // uniform [-2, 3)
  f.a = -2;
  f.b = 3;
  f.seed = 42;
  std::vector<uint8_t> a(4 * f.count), b(4 * f.count), c(4 * f.count);
  data::Fill(a.data(), f);
  data::Fill(b.data(), f);
  f.seed = 43;
  data::Fill(c.data(), f);
  EXPECT_EQ(a, b) << "same seed, same values";
  EXPECT_NE(a, c) << "another seed, other values";
  double lo = 1e9, hi = -1e9;
  for (uint64_t i = 0; i < f.count; ++i) {
    double v = data::Get(a.data(), i, HTAM_F32);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GE(lo, -2.0);
  EXPECT_LT(hi, 3.0);
  EXPECT_LT(lo, -1.9);  // the whole range is drawn
  EXPECT_GT(hi, 2.9);
  // Integers in [1, 6] with 25 % special values (here -7).
  f.dtype = HTAM_I32;
  f.dist = 2;
  f.a = 1;
  f.b = 6;
  f.num_special = 1;
  f.special[0] = -7;
  f.fraction = 0.25;
  data::Fill(a.data(), f);
  int specials = 0, others = 0;
  for (uint64_t i = 0; i < f.count; ++i) {
    double v = data::Get(a.data(), i, HTAM_I32);
    if (v == -7) ++specials;
    else if (v >= 1 && v <= 6 && v == std::floor(v)) ++others;
  }
  EXPECT_EQ(specials + others, int(f.count));
  EXPECT_NEAR(double(specials) / double(f.count), 0.25, 0.04);
}

TEST(DeviceData, CompareFindsPoisonMismatchesAndZeros) {
  const uint64_t n = 1000;
  std::vector<float> ref(n), cand(n);
  for (uint64_t i = 0; i < n; ++i) ref[i] = cand[i] = float(i % 7) + 0.5f;
  cand[10] = 1e6f;                          // outside tolerance
  cand[20] = 2e6f;
  std::memset(&cand[500], 0xFF, 4);         // poison: NaN where the reference is finite
  htam_compare_request q{};
  q.struct_size = sizeof q;
  q.dtype = HTAM_F32;
  q.count = n;
  q.mode = 0;
  q.atol = 1e-6;
  q.rtol = 1e-5;
  htam_compare_result r{};
  auto* c = reinterpret_cast<const uint8_t*>(cand.data());
  auto* e = reinterpret_cast<const uint8_t*>(ref.data());
  data::Compare(c, e, q, &r);
  EXPECT_EQ(r.mismatches, 2u);
  EXPECT_EQ(r.first_mismatch, 10);
  EXPECT_EQ(r.first_nonfinite, 500);
  EXPECT_EQ(r.a_all_zero, 0);
  EXPECT_EQ(r.b_any_nonzero, 1);
  q.mode = 2;  // bitwise
  data::Compare(c, c, q, &r);
  EXPECT_EQ(r.mismatches, 0u);
  data::Compare(c, e, q, &r);
  EXPECT_EQ(r.mismatches, 3u);
  EXPECT_EQ(r.first_mismatch, 10);
  std::vector<float> zeros(n, 0.f);
  q.mode = 0;
  data::Compare(reinterpret_cast<const uint8_t*>(zeros.data()), e, q, &r);
  EXPECT_EQ(r.a_all_zero, 1);
}

}  // namespace
}  // namespace htam
