#include "stats/regression.h"

#include <gtest/gtest.h>

#include <cmath>

namespace bakeoff::stats {
namespace {

TEST(RegressionTest, RecoversAnExactPlaneAndItsQuality) {
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  for (double a : {1.0, 2.0, 4.0, 8.0}) {
    for (double b : {10.0, 100.0, 1000.0}) {
      rows.push_back({a, b * a});
      y.push_back(6.0 + 0.05 * a + 0.045 * b * a / 1000);
    }
  }
  const std::optional<LinearFit> fit = FitLinear(rows, y);
  ASSERT_TRUE(fit);
  EXPECT_NEAR(fit->coefficients[0], 6.0, 1e-9);
  EXPECT_NEAR(fit->coefficients[1], 0.05, 1e-9);
  EXPECT_NEAR(fit->coefficients[2], 0.045 / 1000, 1e-12);
  EXPECT_NEAR(fit->r_squared, 1.0, 1e-9);
  EXPECT_NEAR(fit->rms_residual, 0.0, 1e-9);
  EXPECT_EQ(fit->residuals.size(), y.size());
}

TEST(RegressionTest, NoiseLowersRSquaredAndShowsInTheResiduals) {
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  for (int i = 0; i < 20; ++i) {
    rows.push_back({static_cast<double>(i)});
    y.push_back(1 + 2.0 * i + (i % 2 == 0 ? 3 : -3));
  }
  const std::optional<LinearFit> fit = FitLinear(rows, y);
  ASSERT_TRUE(fit);
  EXPECT_NEAR(fit->coefficients[1], 2.0, 0.1);
  EXPECT_LT(fit->r_squared, 0.99);
  EXPECT_GT(fit->r_squared, 0.9);
  EXPECT_NEAR(fit->rms_residual, 3.0, 0.1);
}

TEST(RegressionTest, TooFewPointsOrCollinearRegressorsHaveNoFit) {
  EXPECT_FALSE(FitLinear({{1.0}}, {2.0}));                                   // two coefficients, one point
  EXPECT_FALSE(FitLinear({{1.0, 2.0}, {2.0, 4.0}, {3.0, 6.0}}, {1, 2, 3}));  // x2 = 2 x1
  EXPECT_FALSE(FitLinear({{1.0}, {1.0}, {1.0}}, {1, 2, 3}));                 // x never varies
  EXPECT_FALSE(FitLinear({{1.0}, {2.0, 3.0}}, {1, 2}));                      // ragged rows
  EXPECT_FALSE(FitLinear({}, {}));
}

}  // namespace
}  // namespace bakeoff::stats
