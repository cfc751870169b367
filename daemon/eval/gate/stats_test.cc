#include "daemon/eval/gate/stats.h"

#include <gtest/gtest.h>

namespace htam {
namespace {

TEST(Stats, MedianAndIqr) {
  auto s = Summarize({5, 1, 4, 2, 3});
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.q1, 2);
  EXPECT_DOUBLE_EQ(s.q3, 4);
  EXPECT_DOUBLE_EQ(s.iqr, 2);
  auto e = Summarize({2, 1});
  EXPECT_DOUBLE_EQ(e.median, 1.5);
  EXPECT_EQ(Summarize({}).count, 0u);
}

TEST(Stats, RobustToOutliers) {
  std::vector<double> v(99, 10.0);
  v.push_back(1e6);
  auto s = Summarize(v);
  EXPECT_DOUBLE_EQ(s.median, 10);
  EXPECT_DOUBLE_EQ(s.iqr, 0);
  EXPECT_DOUBLE_EQ(s.max, 1e6);
}

}  // namespace
}  // namespace htam
