#include "core/rng.h"

#include <gtest/gtest.h>

#include <cmath>

namespace bakeoff {
namespace {

TEST(RngTest, SameSeedSameSequence) {
  Rng a(123);
  Rng b(123);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.Next(), b.Next());
}

TEST(RngTest, UniformInRangeWithRightMean) {
  Rng rng(1);
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0);
    ASSERT_LT(u, 1);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
}

TEST(RngTest, GammaMeanAndVariance) {
  Rng rng(2);
  for (double shape : {0.25, 1.0, 4.0}) {
    const double scale = 2.0;
    double sum = 0;
    double squares = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
      const double x = rng.Gamma(shape, scale);
      sum += x;
      squares += x * x;
    }
    const double mean = sum / n;
    const double variance = squares / n - mean * mean;
    EXPECT_NEAR(mean, shape * scale, 0.03 * shape * scale) << shape;
    EXPECT_NEAR(variance, shape * scale * scale, 0.06 * shape * scale * scale) << shape;
  }
}

TEST(RngTest, BelowIsUniform) {
  Rng rng(3);
  int counts[7] = {};
  for (int i = 0; i < 70000; ++i) ++counts[rng.Below(7)];
  for (int c : counts) EXPECT_NEAR(c, 10000, 400);
}

}  // namespace
}  // namespace bakeoff
