// Input generation and dtype conversions.
#include "backends/common/tensor_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

}  // namespace
}  // namespace htam
