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

// Prefill times that grow faster than their prompts (attention): least squares makes the fixed
// cost negative; the non-negative fit holds it at 0 and refits the slope through the origin.
TEST(RegressionTest, NonNegativeFitHoldsANegativeInterceptAtZero) {
  const std::vector<std::vector<double>> rows = {{31}, {126}, {261}, {516}};
  const std::vector<double> y = {17.6, 56.9, 112.5, 289.3};
  ASSERT_LT(FitLinear(rows, y)->coefficients[0], 0);
  const std::optional<NonNegativeFit> fit = FitNonNegative(rows, y);
  ASSERT_TRUE(fit);
  EXPECT_EQ(fit->held_at_zero, (std::vector<bool>{true, false}));
  double xy = 0, xx = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    xy += rows[i][0] * y[i];
    xx += rows[i][0] * rows[i][0];
  }
  EXPECT_EQ(fit->fit.coefficients[0], 0);
  EXPECT_NEAR(fit->fit.coefficients[1], xy / xx, 1e-12);
  EXPECT_GT(fit->fit.r_squared, 0.9);
  EXPECT_LT(fit->fit.r_squared, FitLinear(rows, y)->r_squared);  // the constraint costs fit
}

TEST(RegressionTest, NonNegativeFitIsTheOrdinaryOneWhereThatIsNonNegative) {
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  for (double a : {1.0, 2.0, 4.0, 8.0}) {
    for (double b : {10.0, 100.0, 1000.0}) {
      rows.push_back({a, b * a});
      y.push_back(6.0 + 0.05 * a + 0.045 * b * a / 1000 + (static_cast<int>(a + b) % 3 - 1) * 0.01);
    }
  }
  const std::optional<LinearFit> ordinary = FitLinear(rows, y);
  const std::optional<NonNegativeFit> constrained = FitNonNegative(rows, y);
  ASSERT_TRUE(ordinary && constrained);
  EXPECT_EQ(constrained->held_at_zero, (std::vector<bool>(3, false)));
  for (std::size_t j = 0; j < 3; ++j) EXPECT_NEAR(constrained->fit.coefficients[j], ordinary->coefficients[j], 1e-9);
  // A regressor whose least-squares cost is negative (y falls with it) is held at 0 instead.
  const std::optional<NonNegativeFit> falling = FitNonNegative({{1}, {2}, {3}, {4}}, {4, 3, 2, 1});
  ASSERT_TRUE(falling);
  EXPECT_EQ(falling->held_at_zero, (std::vector<bool>{false, true}));
  EXPECT_NEAR(falling->fit.coefficients[0], 2.5, 1e-12);  // the mean
  EXPECT_FALSE(FitNonNegative({{1.0}}, {2.0}));
}

}  // namespace
}  // namespace bakeoff::stats
