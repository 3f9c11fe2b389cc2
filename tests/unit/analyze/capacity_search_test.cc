// Capacity search on synthetic targets whose true capacity is known exactly.
#include "analyze/capacity_search.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

namespace bakeoff::analyze {
namespace {

RateTrial Trial(double rate, std::uint32_t repeat, std::uint64_t measured, std::uint64_t ok,
                std::uint64_t good) {
  RateTrial t;
  t.rate_per_s = rate;
  t.repeat = repeat;
  t.measured = measured;
  t.ok = ok;
  t.good = good;
  return t;
}

// A target that meets its SLO for every request up to `capacity` and for none above it; each
// trial measures `requests` requests.
MeasureRate Threshold(double capacity, std::uint64_t requests = 1000, int* calls = nullptr) {
  return [=](double rate, std::uint32_t repeat) -> Result<RateTrial> {
    if (calls) ++*calls;
    RateTrial t;
    t.rate_per_s = rate;
    t.repeat = repeat;
    t.measured = requests;
    t.ok = requests;
    t.good = rate <= capacity ? requests : requests / 2;
    return t;
  };
}

TEST(CapacitySearchTest, BracketsTheTrueCapacityWithinThePrecision) {
  const std::atomic<bool> stop{false};
  for (double truth : {0.37, 1.0, 7.3, 42.0, 950.0}) {
    CapacitySearchOptions o;
    o.start_rate_per_s = 4;
    o.precision = 0.05;
    o.max_points = 40;
    const CapacityResult r = SearchCapacity(o, Threshold(truth), stop);
    ASSERT_EQ(r.bracket, Bracket::kBracketed) << truth << ": " << r.stopped_reason;
    ASSERT_TRUE(r.capacity_per_s && r.first_failing_per_s);
    EXPECT_LE(*r.capacity_per_s, truth);
    EXPECT_GT(*r.first_failing_per_s, truth);
    EXPECT_LE(*r.first_failing_per_s / *r.capacity_per_s, 1.05 + 1e-9) << truth;
    EXPECT_TRUE(r.notes.empty());
    ASSERT_NE(r.AtCapacity(), nullptr);
    EXPECT_TRUE(r.AtCapacity()->passed);
  }
}

TEST(CapacitySearchTest, MeasuresEachRateOncePerRepeat) {
  const std::atomic<bool> stop{false};
  CapacitySearchOptions o;
  o.start_rate_per_s = 4;
  o.repeats = 3;
  int calls = 0;
  const CapacityResult r = SearchCapacity(o, Threshold(10, 1000, &calls), stop);
  EXPECT_EQ(calls, static_cast<int>(3 * r.points.size()));
  for (const RatePoint& p : r.points) EXPECT_EQ(p.trials.size(), 3u);
}

TEST(CapacitySearchTest, SaysWhenEveryRateInRangePassesOrFails) {
  const std::atomic<bool> stop{false};
  CapacitySearchOptions o;
  o.start_rate_per_s = 1;
  o.min_rate_per_s = 0.5;
  o.max_rate_per_s = 64;
  CapacityResult high = SearchCapacity(o, Threshold(1e9), stop);
  EXPECT_EQ(high.bracket, Bracket::kAboveRange);
  EXPECT_EQ(high.capacity_per_s, 64.0);
  CapacityResult low = SearchCapacity(o, Threshold(0.01), stop);
  EXPECT_EQ(low.bracket, Bracket::kBelowRange);
  EXPECT_FALSE(low.capacity_per_s);
  EXPECT_EQ(low.first_failing_per_s, 0.5);
}

TEST(CapacitySearchTest, CountsFailuresAsMissesAndChecksAvailability) {
  const std::atomic<bool> stop{false};
  CapacitySearchOptions o;
  o.start_rate_per_s = 1;
  o.min_rate_per_s = 1;
  o.max_rate_per_s = 1;
  o.target_attainment = 0.9;
  o.min_availability = 0.99;
  // 95% good among the completed, but 5% of requests failed outright: attainment 0.9025.
  auto failing = [](double rate, std::uint32_t repeat) -> Result<RateTrial> {
    RateTrial t = Trial(rate, repeat, 400, 380, 361);
    return t;
  };
  const CapacityResult r = SearchCapacity(o, failing, stop);
  ASSERT_EQ(r.points.size(), 1u);
  EXPECT_NEAR(r.points[0].attainment.value, 361.0 / 400, 1e-12);
  EXPECT_FALSE(r.points[0].passed);
  EXPECT_NE(r.points[0].why_not.find("availability"), std::string::npos) << r.points[0].why_not;
}

TEST(CapacitySearchTest, AGeneratorLimitedOrFailedTermRepeatDoesNotPass) {
  const std::atomic<bool> stop{false};
  CapacitySearchOptions o;
  o.start_rate_per_s = 2;
  o.min_rate_per_s = 2;
  o.max_rate_per_s = 2;
  o.repeats = 2;
  for (int which : {0, 1}) {
    auto measure = [which](double rate, std::uint32_t repeat) -> Result<RateTrial> {
      RateTrial t = Trial(rate, repeat, 100, 100, 100);
      if (repeat == 1) (which == 0 ? t.generator_limited : t.terms_met) = which == 0;
      return t;
    };
    const CapacityResult r = SearchCapacity(o, measure, stop);
    ASSERT_EQ(r.points.size(), 1u);
    EXPECT_FALSE(r.points[0].passed) << which;
    EXPECT_EQ(r.bracket, Bracket::kBelowRange);
  }
}

TEST(CapacitySearchTest, WilsonIntervalMarksMarginalRates) {
  const std::atomic<bool> stop{false};
  CapacitySearchOptions o;
  o.start_rate_per_s = 1;
  o.max_rate_per_s = 1;
  o.target_attainment = 0.99;
  o.repeats = 1;
  auto few = [](double rate, std::uint32_t repeat) -> Result<RateTrial> {
    return Trial(rate, repeat, 100, 100, 100);
  };
  const CapacityResult r = SearchCapacity(o, few, stop);
  ASSERT_EQ(r.points.size(), 1u);
  EXPECT_TRUE(r.points[0].passed);
  EXPECT_TRUE(r.points[0].marginal);  // 100/100 has a 95% lower bound near 0.963
  EXPECT_NEAR(r.points[0].attainment.lower, 0.963, 0.001);
}

TEST(CapacitySearchTest, StopsOnAMeasurementErrorOrStopFlag) {
  std::atomic<bool> stop{false};
  CapacitySearchOptions o;
  o.start_rate_per_s = 4;
  int calls = 0;
  auto broken = [&](double, std::uint32_t) -> Result<RateTrial> {
    if (++calls == 3) return MakeError(ErrorCode::kIo, "server went away");
    return Trial(1, 0, 10, 10, 10);
  };
  CapacityResult r = SearchCapacity(o, broken, stop);
  EXPECT_EQ(r.bracket, Bracket::kUnfinished);
  EXPECT_NE(r.stopped_reason.find("server went away"), std::string::npos);
  stop = true;
  r = SearchCapacity(o, Threshold(3), stop);
  EXPECT_TRUE(r.interrupted);
  EXPECT_TRUE(r.points.empty());
}

TEST(CapacitySearchTest, RefusesBadOptions) {
  CapacitySearchOptions o;
  o.start_rate_per_s = 0;
  EXPECT_FALSE(ValidateCapacitySearchOptions(o).ok());
  o = {};
  o.precision = 0;
  EXPECT_FALSE(ValidateCapacitySearchOptions(o).ok());
  o = {};
  o.repeats = 0;
  EXPECT_FALSE(ValidateCapacitySearchOptions(o).ok());
  EXPECT_TRUE(ValidateCapacitySearchOptions(CapacitySearchOptions{}).ok());
}

TEST(ProportionTest, WilsonIntervalMatchesKnownValues) {
  const stats::ProportionEstimate e = stats::EstimateProportion(81, 263);
  EXPECT_NEAR(e.value, 0.30798, 1e-4);
  EXPECT_NEAR(e.lower, 0.2553, 1e-3);  // textbook example (Wilson, 95%)
  EXPECT_NEAR(e.upper, 0.3662, 1e-3);
  const stats::ProportionEstimate none = stats::EstimateProportion(0, 0);
  EXPECT_EQ(none.value, 0);
  EXPECT_EQ(none.upper, 1);
}

}  // namespace
}  // namespace bakeoff::analyze
