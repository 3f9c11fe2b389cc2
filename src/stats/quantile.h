// stats/quantile.h
//
// Owns: exact quantiles of a sample with distribution-free confidence bounds, the rank rules
// they use (shared with stats/sketch.h, which reads the same ranks from a histogram once a sample
// is too large to keep), and the fixed set of summary figures every latency in bakeoff is
// reported with (count, mean, min, p50, p90, p95, p99, p99.9, max).
//
// Quantile rule: nearest rank on the sorted sample, rank = max(1, ceil(q * n)), so every reported
// percentile is an observed value (no interpolation). Confidence bounds: the order statistics
// x(l) and x(u) whose ranks bracket the q-quantile with at least the requested coverage under the
// binomial distribution Bin(n, q) (the classical distribution-free interval; see docs/TERMINOLOGY.md).
// When no such pair exists (too few samples for the percentile claimed), `bounded` is false and
// reports say so.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace bakeoff::stats {

struct QuantileEstimate {
  double q = 0;
  double value = 0;  // nearest-rank sample quantile
  double lower = 0;  // lower confidence bound (an order statistic)
  double upper = 0;  // upper confidence bound (an order statistic)
  bool bounded = false;  // false: the sample is too small for a two-sided bound at this coverage
};

// REQUIRES: `sorted` ascending and non-empty; 0 <= q <= 1; 0 < coverage < 1.
QuantileEstimate EstimateQuantile(std::span<const double> sorted, double q, double coverage = 0.95);

// The 1-based nearest rank of the q-quantile among n samples: max(1, ceil(q * n)).
// REQUIRES: n > 0; 0 <= q <= 1.
std::size_t NearestRankIndex(std::size_t n, double q);

// Ranks (1-based) of the order statistics x(lower) and x(upper) that bracket the q-quantile of
// n samples with at least `coverage` (see the module comment). `bounded` is false when no such
// pair exists; the ranks are then clamped to [1, n].
struct RankInterval {
  std::size_t lower = 0;
  std::size_t upper = 0;
  bool bounded = false;
};
// REQUIRES: n > 0; 0 < coverage < 1.
RankInterval ConfidenceRanks(std::size_t n, double q, double coverage);

// The nearest-rank value alone. REQUIRES: `sorted` ascending and non-empty; 0 <= q <= 1.
double NearestRank(std::span<const double> sorted, double q);

struct Summary {
  std::size_t count = 0;
  double mean = 0;
  double stddev = 0;  // sample standard deviation (n - 1); 0 when count < 2
  double min = 0;
  double max = 0;
  QuantileEstimate p50, p90, p95, p99, p999;
  // How the percentiles (values and bounds) were read. Exact: they are order statistics of the
  // sample. Otherwise (a QuantileSketch past its exact cap, stats/sketch.h) each is within
  // `max_relative_error` of the order statistic it stands for: |reported - x(r)| <= e * |x(r)|.
  // count, mean, stddev, min and max do not depend on this.
  bool percentiles_exact = true;
  double percentile_max_relative_error = 0;  // 0 when exact
};

// Summarises `values` (any order; sorted internally). An empty input gives count == 0 and zeros.
Summary Summarize(std::vector<double> values, double coverage = 0.95);

}  // namespace bakeoff::stats
