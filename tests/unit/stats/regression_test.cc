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

// Weighted least squares: the closed-form weighted line, unchanged by scaling every weight, and
// with weights 1 / y² a line whose noise grows with y is recovered where it is precise.
TEST(RegressionTest, WeightedFitIsTheWeightedLine) {
  const std::vector<std::vector<double>> rows = {{32}, {128}, {256}, {512}, {1024}, {2048}};
  // 10 + x with noise of ±10% of the time: tiny at the short points, tens of ms at the long ones.
  std::vector<double> y;
  std::vector<double> weights;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    y.push_back((10 + rows[i][0]) * (i % 2 == 0 ? 1.1 : 0.9));
    weights.push_back(1 / (y.back() * y.back()));
  }
  double sw = 0, mx = 0, my = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    sw += weights[i];
    mx += weights[i] * rows[i][0];
    my += weights[i] * y[i];
  }
  mx /= sw;
  my /= sw;
  double sxy = 0, sxx = 0, wss = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    sxy += weights[i] * (rows[i][0] - mx) * (y[i] - my);
    sxx += weights[i] * (rows[i][0] - mx) * (rows[i][0] - mx);
  }
  const double slope = sxy / sxx;
  const double intercept = my - slope * mx;
  for (std::size_t i = 0; i < y.size(); ++i) {
    wss += weights[i] * std::pow(y[i] - intercept - slope * rows[i][0], 2);
  }
  const std::optional<LinearFit> fit = FitLinear(rows, y, weights);
  ASSERT_TRUE(fit);
  EXPECT_NEAR(fit->coefficients[0], intercept, 1e-9);
  EXPECT_NEAR(fit->coefficients[1], slope, 1e-12);
  EXPECT_NEAR(fit->weighted_ss_residual, wss, 1e-12);
  // The relative fit keeps the fixed cost near its 10 ms; the plain one is led by the long points.
  const std::optional<LinearFit> plain = FitLinear(rows, y);
  ASSERT_TRUE(plain);
  EXPECT_LT(std::abs(fit->coefficients[0] - 10), 5);
  EXPECT_GT(std::abs(plain->coefficients[0] - 10), 20);
  // Scaling every weight changes nothing but the weighted sum.
  std::vector<double> tripled = weights;
  for (double& w : tripled) w *= 3;
  const std::optional<NonNegativeFit> scaled = FitNonNegative(rows, y, tripled);
  ASSERT_TRUE(scaled);
  EXPECT_NEAR(scaled->fit.coefficients[0], intercept, 1e-9);
  EXPECT_NEAR(scaled->fit.weighted_ss_residual, 3 * wss, 1e-12);
  // Without weights, the weighted sum is the plain one.
  EXPECT_NEAR(plain->weighted_ss_residual, plain->rms_residual * plain->rms_residual * y.size(), 1e-6);
  // Weights must be one per point and each above 0.
  EXPECT_FALSE(FitLinear(rows, y, {1, 2}));
  EXPECT_FALSE(FitLinear(rows, y, {1, 1, 1, 0, 1, 1}));
  EXPECT_FALSE(FitNonNegative(rows, y, {1, 1, 1, NAN, 1, 1}));
}

}  // namespace
}  // namespace bakeoff::stats
