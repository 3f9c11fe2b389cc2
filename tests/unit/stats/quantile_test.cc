#include "stats/quantile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rng.h"

namespace bakeoff::stats {
namespace {

// Reference: the nearest-rank definition written out literally.
double ReferenceNearestRank(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  std::size_t rank = 1;
  while (static_cast<double>(rank) < q * static_cast<double>(values.size()) - 1e-9) ++rank;
  return values[rank - 1];
}

TEST(QuantileTest, NearestRankMatchesSortedVectorReference) {
  Rng rng(42);
  for (std::size_t n : {1u, 2u, 3u, 10u, 99u, 100u, 101u, 1000u, 4321u}) {
    std::vector<double> values(n);
    for (double& v : values) v = rng.Exponential(10.0);
    std::vector<double> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    for (double q : {0.0, 0.001, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0}) {
      EXPECT_EQ(NearestRank(sorted, q), ReferenceNearestRank(values, q)) << "n=" << n << " q=" << q;
    }
  }
}

TEST(QuantileTest, OneHundredIntegers) {
  std::vector<double> sorted;
  for (int i = 1; i <= 100; ++i) sorted.push_back(i);
  EXPECT_EQ(NearestRank(sorted, 0.5), 50);
  EXPECT_EQ(NearestRank(sorted, 0.9), 90);
  EXPECT_EQ(NearestRank(sorted, 0.99), 99);
  EXPECT_EQ(NearestRank(sorted, 0.999), 100);
  EXPECT_EQ(NearestRank(sorted, 0.0), 1);
}

TEST(QuantileTest, BoundsBracketTheEstimate) {
  std::vector<double> sorted;
  for (int i = 1; i <= 1000; ++i) sorted.push_back(i);
  const QuantileEstimate p50 = EstimateQuantile(sorted, 0.5);
  EXPECT_TRUE(p50.bounded);
  EXPECT_LE(p50.lower, p50.value);
  EXPECT_GE(p50.upper, p50.value);
  // For n = 1000 the 95% ranks of the median are about 500 -+ 31.
  EXPECT_NEAR(p50.lower, 469, 3);
  EXPECT_NEAR(p50.upper, 532, 3);
}

TEST(QuantileTest, TooFewSamplesForP99IsUnbounded) {
  std::vector<double> sorted;
  for (int i = 1; i <= 50; ++i) sorted.push_back(i);
  EXPECT_FALSE(EstimateQuantile(sorted, 0.99).bounded);
  EXPECT_TRUE(EstimateQuantile(sorted, 0.5).bounded);
}

TEST(QuantileTest, ExactAndApproximateBoundsAgreeAtTheSwitch) {
  // Just below and above the exact-computation limit the bounds are close.
  for (std::size_t n : {4999u, 5001u}) {
    std::vector<double> sorted;
    for (std::size_t i = 1; i <= n; ++i) sorted.push_back(static_cast<double>(i));
    const QuantileEstimate p99 = EstimateQuantile(sorted, 0.99);
    EXPECT_TRUE(p99.bounded);
    EXPECT_NEAR(p99.lower, 0.99 * n - 1.96 * std::sqrt(n * 0.99 * 0.01), 3) << n;
    EXPECT_NEAR(p99.upper, 0.99 * n + 1.96 * std::sqrt(n * 0.99 * 0.01), 3) << n;
  }
}

TEST(QuantileTest, CoverageIsAtLeastNominal) {
  // Draw many samples of an exponential(1) whose true median is ln 2; the 95% interval must
  // contain it in at least ~93% of trials (finite trials: allow some slack, never far below).
  Rng rng(7);
  const double true_median = std::log(2.0);
  int covered = 0;
  const int trials = 400;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> values(200);
    for (double& v : values) v = rng.Exponential(1.0);
    std::sort(values.begin(), values.end());
    const QuantileEstimate e = EstimateQuantile(values, 0.5);
    if (e.lower <= true_median && true_median <= e.upper) ++covered;
  }
  EXPECT_GE(covered, trials * 0.92);
}

TEST(SummaryTest, EmptyAndSingle) {
  EXPECT_EQ(Summarize({}).count, 0u);
  const Summary one = Summarize({3.5});
  EXPECT_EQ(one.count, 1u);
  EXPECT_EQ(one.p99.value, 3.5);
  EXPECT_EQ(one.mean, 3.5);
  EXPECT_EQ(one.stddev, 0);
  EXPECT_FALSE(one.p50.bounded);
}

TEST(SummaryTest, MeanStddevMinMax) {
  const Summary s = Summarize({4, 2, 6, 8});
  EXPECT_DOUBLE_EQ(s.mean, 5);
  EXPECT_NEAR(s.stddev, std::sqrt(20.0 / 3.0), 1e-12);
  EXPECT_EQ(s.min, 2);
  EXPECT_EQ(s.max, 8);
  EXPECT_EQ(s.p50.value, 4);
}

}  // namespace
}  // namespace bakeoff::stats
