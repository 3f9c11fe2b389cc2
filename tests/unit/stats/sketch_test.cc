#include "stats/sketch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "core/rng.h"

namespace bakeoff::stats {
namespace {

constexpr double kBound = QuantileSketch::kMaxRelativeError;

double U(Rng& r, double lo, double hi) { return lo + (hi - lo) * r.Uniform(); }
double N(Rng& r, double mean, double sd) { return mean + sd * r.Normal(); }

void ExpectSameEstimate(const QuantileEstimate& a, const QuantileEstimate& b, const char* what) {
  EXPECT_EQ(a.q, b.q) << what;
  EXPECT_EQ(a.value, b.value) << what;
  EXPECT_EQ(a.lower, b.lower) << what;
  EXPECT_EQ(a.upper, b.upper) << what;
  EXPECT_EQ(a.bounded, b.bounded) << what;
}

// Every field bit for bit (EXPECT_EQ on doubles is exact).
void ExpectIdentical(const Summary& a, const Summary& b) {
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.stddev, b.stddev);
  EXPECT_EQ(a.min, b.min);
  EXPECT_EQ(a.max, b.max);
  ExpectSameEstimate(a.p50, b.p50, "p50");
  ExpectSameEstimate(a.p90, b.p90, "p90");
  ExpectSameEstimate(a.p95, b.p95, "p95");
  ExpectSameEstimate(a.p99, b.p99, "p99");
  ExpectSameEstimate(a.p999, b.p999, "p99.9");
  EXPECT_EQ(a.percentiles_exact, b.percentiles_exact);
  EXPECT_EQ(a.percentile_max_relative_error, b.percentile_max_relative_error);
}

void ExpectWithinBound(double approx, double exact, const char* what) {
  EXPECT_LE(std::abs(approx - exact), kBound * std::abs(exact) + 1e-300)
      << what << ": sketch " << approx << " exact " << exact;
}

// An approximate summary against the exact one of the same samples: count, min and max equal,
// mean and stddev to rounding, every percentile value and bound within the stated error.
void ExpectApproximates(const Summary& approx, const Summary& exact) {
  EXPECT_FALSE(approx.percentiles_exact);
  EXPECT_EQ(approx.percentile_max_relative_error, kBound);
  EXPECT_EQ(approx.count, exact.count);
  EXPECT_EQ(approx.min, exact.min);
  EXPECT_EQ(approx.max, exact.max);
  EXPECT_NEAR(approx.mean, exact.mean, 1e-9 * std::max(1.0, std::abs(exact.mean)));
  EXPECT_NEAR(approx.stddev, exact.stddev, 1e-7 * std::max(1.0, exact.stddev));
  const std::pair<const QuantileEstimate*, const QuantileEstimate*> pairs[] = {
      {&approx.p50, &exact.p50}, {&approx.p90, &exact.p90}, {&approx.p95, &exact.p95},
      {&approx.p99, &exact.p99}, {&approx.p999, &exact.p999}};
  for (const auto& [a, e] : pairs) {
    EXPECT_EQ(a->q, e->q);
    EXPECT_EQ(a->bounded, e->bounded) << "q=" << e->q;  // the same ranks
    ExpectWithinBound(a->value, e->value, "value");
    ExpectWithinBound(a->lower, e->lower, "lower");
    ExpectWithinBound(a->upper, e->upper, "upper");
  }
}

std::vector<double> Draw(std::size_t n, const std::function<double(Rng&)>& draw, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<double> values(n);
  for (double& v : values) v = draw(rng);
  return values;
}

QuantileSketch SketchOf(const std::vector<double>& values, std::size_t cap) {
  QuantileSketch sketch(cap);
  for (double v : values) sketch.Add(v);
  return sketch;
}

TEST(QuantileSketchTest, EmptyIsLikeSummarize) {
  ExpectIdentical(QuantileSketch().Summarize(), Summarize({}));
}

TEST(QuantileSketchTest, UnderTheCapBitIdenticalToSummarize) {
  for (std::size_t n : {1u, 2u, 3u, 99u, 1000u, 4999u, 5001u, 65'536u}) {
    const std::vector<double> values = Draw(n, [](Rng& r) { return r.Exponential(10.0); }, n);
    const QuantileSketch sketch = SketchOf(values, QuantileSketch::kDefaultExactCap);
    EXPECT_TRUE(sketch.exact()) << n;
    const Summary s = sketch.Summarize();
    EXPECT_TRUE(s.percentiles_exact);
    EXPECT_EQ(s.percentile_max_relative_error, 0);
    SCOPED_TRACE(n);
    ExpectIdentical(s, Summarize(values));
  }
}

TEST(QuantileSketchTest, OneSamplePastTheCapFolds) {
  std::vector<double> values = Draw(1001, [](Rng& r) { return U(r, 1.0, 2.0); }, 3);
  QuantileSketch sketch(1000);
  for (std::size_t i = 0; i < 1000; ++i) sketch.Add(values[i]);
  EXPECT_TRUE(sketch.exact());
  sketch.Add(values[1000]);
  EXPECT_FALSE(sketch.exact());
  ExpectApproximates(sketch.Summarize(), Summarize(values));
}

struct Distribution {
  const char* name;
  std::function<double(Rng&)> draw;
};

TEST(QuantileSketchTest, PastTheCapWithinTheStatedErrorOnSeveralDistributions) {
  const std::vector<Distribution> distributions = {
      {"uniform", [](Rng& r) { return U(r, 0.0, 1000.0); }},
      {"log-normal", [](Rng& r) { return std::exp(N(r, 3.0, 1.5)); }},
      {"bimodal", [](Rng& r) { return U(r, 0.0, 1.0) < 0.8 ? N(r, 20.0, 2.0) : N(r, 900.0, 50.0); }},
      {"constant", [](Rng&) { return 42.125; }},
      {"tiny and huge", [](Rng& r) { return std::exp(U(r, -300.0, 300.0)); }},
      {"with zeros", [](Rng& r) { return U(r, 0.0, 1.0) < 0.3 ? 0.0 : r.Exponential(5.0); }},
  };
  for (const Distribution& d : distributions) {
    SCOPED_TRACE(d.name);
    const std::vector<double> values = Draw(200'000, d.draw, 7);
    const QuantileSketch sketch = SketchOf(values, 10'000);
    EXPECT_FALSE(sketch.exact());
    ExpectApproximates(sketch.Summarize(), Summarize(values));
  }
}

TEST(QuantileSketchTest, ZeroCapSmallSampleUsesTheExactBinomialRanks) {
  // With a zero cap every sample goes to the histogram; below 5,000 samples the confidence
  // ranks come from the exact binomial search, so those ranks are read from the histogram too.
  const std::vector<double> values = Draw(3000, [](Rng& r) { return std::exp(N(r, 0.0, 3.0)); }, 11);
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  const Summary approx = SketchOf(values, 0).Summarize();
  ExpectApproximates(approx, Summarize(values));
  EXPECT_EQ(approx.min, sorted.front());
  EXPECT_EQ(approx.max, sorted.back());
}

TEST(QuantileSketchTest, ConstantValueIsReadBackWithinTheBound) {
  QuantileSketch sketch(0);
  sketch.Add(7.0, 1'000'000);
  const Summary s = sketch.Summarize();
  // Clamped to [min, max] = [7, 7]: exact after all.
  EXPECT_EQ(s.p50.value, 7.0);
  EXPECT_EQ(s.p999.value, 7.0);
  EXPECT_EQ(s.mean, 7.0);
  EXPECT_EQ(s.stddev, 0.0);
}

TEST(QuantileSketchTest, MergeEqualsAddingEverythingIntoOne) {
  const std::vector<double> a = Draw(30'000, [](Rng& r) { return r.Exponential(10.0); }, 1);
  const std::vector<double> b = Draw(50'000, [](Rng& r) { return std::exp(N(r, 2.0, 1.0)); }, 2);
  std::vector<double> all = a;
  all.insert(all.end(), b.begin(), b.end());
  for (std::size_t cap : {std::size_t{100'000}, std::size_t{40'000}, std::size_t{10'000}}) {
    SCOPED_TRACE(cap);
    QuantileSketch merged = SketchOf(a, cap);
    merged.Merge(SketchOf(b, cap));
    const QuantileSketch one = SketchOf(all, cap);
    EXPECT_EQ(merged.exact(), one.exact());
    const Summary m = merged.Summarize();
    const Summary o = one.Summarize();
    if (one.exact()) {
      ExpectIdentical(m, o);
    } else {
      // Percentiles read from the same histogram; mean and stddev to rounding.
      ExpectSameEstimate(m.p50, o.p50, "p50");
      ExpectSameEstimate(m.p90, o.p90, "p90");
      ExpectSameEstimate(m.p99, o.p99, "p99");
      ExpectSameEstimate(m.p999, o.p999, "p99.9");
      EXPECT_EQ(m.count, o.count);
      EXPECT_EQ(m.min, o.min);
      EXPECT_EQ(m.max, o.max);
      EXPECT_NEAR(m.mean, o.mean, 1e-9 * o.mean);
      EXPECT_NEAR(m.stddev, o.stddev, 1e-9 * o.stddev);
      ExpectApproximates(m, Summarize(all));
    }
  }
}

TEST(QuantileSketchTest, MergeOfManyFoldedSketches) {
  // Four workers past their caps into one, also past its cap.
  std::vector<double> all;
  QuantileSketch merged(5000);
  for (std::uint64_t w = 0; w < 4; ++w) {
    const std::vector<double> part = Draw(20'000, [](Rng& r) { return r.Exponential(3.0); }, 100 + w);
    all.insert(all.end(), part.begin(), part.end());
    merged.Merge(SketchOf(part, 5000));
  }
  ExpectApproximates(merged.Summarize(), Summarize(all));
}

TEST(QuantileSketchTest, MergeIntoEmptyAndOfEmpty) {
  const std::vector<double> values = Draw(500, [](Rng& r) { return r.Exponential(1.0); }, 5);
  QuantileSketch empty;
  empty.Merge(SketchOf(values, 1000));
  ExpectIdentical(empty.Summarize(), Summarize(values));
  QuantileSketch full = SketchOf(values, 1000);
  full.Merge(QuantileSketch());
  ExpectIdentical(full.Summarize(), Summarize(values));
}

TEST(QuantileSketchTest, AddWithCountEqualsRepeatedAdds) {
  // Per-token gaps: an event of n tokens gives n gaps of gap / n.
  for (std::size_t cap : {std::size_t{1'000'000}, std::size_t{500}}) {
    SCOPED_TRACE(cap);
    Rng rng(9);
    QuantileSketch counted(cap);
    QuantileSketch repeated(cap);
    for (int i = 0; i < 400; ++i) {
      const double gap = rng.Exponential(30.0);
      const std::uint32_t n = 1 + static_cast<std::uint32_t>(U(rng, 0.0, 4.0));
      counted.Add(gap / n, n);
      for (std::uint32_t t = 0; t < n; ++t) repeated.Add(gap / n);
    }
    EXPECT_EQ(counted.exact(), repeated.exact());
    const Summary c = counted.Summarize();
    const Summary r = repeated.Summarize();
    if (counted.exact()) {
      ExpectIdentical(c, r);
    } else {
      ExpectSameEstimate(c.p50, r.p50, "p50");
      ExpectSameEstimate(c.p99, r.p99, "p99");
      ExpectSameEstimate(c.p999, r.p999, "p99.9");
      EXPECT_EQ(c.count, r.count);
      EXPECT_NEAR(c.mean, r.mean, 1e-9 * r.mean);
      EXPECT_NEAR(c.stddev, r.stddev, 1e-9 * r.stddev);
    }
  }
}

TEST(QuantileSketchTest, AddWithCountCrossingTheCap) {
  QuantileSketch sketch(10);
  sketch.Add(1.0, 8);
  sketch.Add(2.0, 5);  // 13 > 10: folds
  EXPECT_FALSE(sketch.exact());
  const Summary s = sketch.Summarize();
  EXPECT_EQ(s.count, 13u);
  ExpectWithinBound(s.p50.value, 1.0, "p50");
  ExpectWithinBound(s.p90.value, 2.0, "p90");
  sketch.Add(3.0, 0);  // nothing
  EXPECT_EQ(sketch.count(), 13u);
}

TEST(QuantileSketchTest, NegativeValuesDoNotCrashAndKeepTheirOrder) {
  // Latencies are never negative, but a clock step must not crash the run.
  std::vector<double> values = Draw(20'000, [](Rng& r) { return N(r, 0.0, 10.0); }, 13);
  values.push_back(0.0);
  values.push_back(-0.0);
  const QuantileSketch sketch = SketchOf(values, 1000);
  EXPECT_LT(sketch.Summarize().min, 0);
  ExpectApproximates(sketch.Summarize(), Summarize(values));
}

TEST(QuantileSketchTest, ZeroIsReadBackExactly) {
  QuantileSketch sketch(0);
  sketch.Add(0.0, 900);
  sketch.Add(5.0, 100);
  const Summary s = sketch.Summarize();
  EXPECT_EQ(s.p50.value, 0.0);
  EXPECT_EQ(s.p90.value, 0.0);
  ExpectWithinBound(s.p95.value, 5.0, "p95");
}

TEST(QuantileSketchTest, ExtremeMagnitudes) {
  QuantileSketch sketch(0);
  const double values[] = {std::numeric_limits<double>::max(), std::numeric_limits<double>::min(),
                           std::numeric_limits<double>::denorm_min(), -std::numeric_limits<double>::max(),
                           1e-300, 1e300};
  for (double v : values) sketch.Add(v);
  // Mean and stddev overflow at these magnitudes (no latency has them); the order statistics
  // must still come back finite and within the bound, the top bucket's midpoint included.
  const Summary s = sketch.Summarize();
  EXPECT_EQ(s.count, 6u);
  EXPECT_EQ(s.max, std::numeric_limits<double>::max());
  EXPECT_EQ(s.min, -std::numeric_limits<double>::max());
  EXPECT_TRUE(std::isfinite(s.p50.value));
  ExpectWithinBound(s.p50.value, std::numeric_limits<double>::min(), "p50");
  ExpectWithinBound(s.p999.value, std::numeric_limits<double>::max(), "p99.9");
}

TEST(QuantileSketchTest, NonFiniteValuesAreProgrammerErrors) {
  QuantileSketch sketch;
  EXPECT_DEATH(sketch.Add(std::nan("")), "QuantileSketch::Add");
  EXPECT_DEATH(sketch.Add(std::numeric_limits<double>::infinity()), "QuantileSketch::Add");
}

TEST(QuantileSketchTest, MemoryStopsGrowingPastTheCap) {
  Rng rng(17);
  QuantileSketch sketch;  // default cap
  for (int i = 0; i < 65'536; ++i) sketch.Add(std::exp(N(rng, 1.0, 1.0)));
  EXPECT_TRUE(sketch.exact());
  EXPECT_LE(sketch.HeapBytes(), 65'536 * sizeof(double));
  for (int i = 0; i < 2'000'000; ++i) sketch.Add(std::exp(N(rng, 1.0, 1.0)));
  EXPECT_FALSE(sketch.exact());
  const std::size_t folded = sketch.HeapBytes();
  EXPECT_LT(folded, 64u * 1024) << "log-normal latencies span a few dozen powers of two";
  for (int i = 0; i < 2'000'000; ++i) sketch.Add(std::exp(N(rng, 1.0, 1.0)));
  EXPECT_LE(sketch.HeapBytes(), folded + 2 * 1024) << "at most a new power of two at the edges";
}

}  // namespace
}  // namespace bakeoff::stats

namespace bakeoff::stats {
namespace {

TEST(SketchQuantilesTest, ExactUnderTheCapAndWithinTheBoundPastIt) {
  const std::vector<double> qs = {0, 0.5, 0.9, 0.99, 1};
  QuantileSketch exact;
  for (int i = 1000; i >= 1; --i) exact.Add(i);
  EXPECT_EQ(exact.Quantiles(qs), (std::vector<double>{1, 500, 900, 990, 1000}));
  QuantileSketch folded(/*exact_cap=*/100);
  for (int i = 1; i <= 1000; ++i) folded.Add(i);
  ASSERT_FALSE(folded.exact());
  const std::vector<double> values = folded.Quantiles(qs);
  const std::vector<double> truth = {1, 500, 900, 990, 1000};
  for (std::size_t i = 0; i < qs.size(); ++i) {
    EXPECT_NEAR(values[i], truth[i], truth[i] * QuantileSketch::kMaxRelativeError) << "q=" << qs[i];
  }
  EXPECT_TRUE(QuantileSketch().Quantiles(qs).empty());
}

}  // namespace
}  // namespace bakeoff::stats
