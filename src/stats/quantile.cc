#include "stats/quantile.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"

namespace bakeoff::stats {
namespace {

// Standard normal quantile for probability p, by bisection on erfc (accurate to ~1e-12).
double NormalQuantile(double p) {
  double lo = -10;
  double hi = 10;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    const double cdf = 0.5 * std::erfc(-mid / std::sqrt(2.0));
    (cdf < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace

std::size_t NearestRankIndex(std::size_t n, double q) {
  BAKEOFF_CHECK(n > 0);
  const double exact = std::ceil(q * static_cast<double>(n) - 1e-9);
  return std::clamp<std::size_t>(static_cast<std::size_t>(std::max(1.0, exact)), 1, n);
}

RankInterval ConfidenceRanks(std::size_t n, double q, double coverage) {
  BAKEOFF_CHECK(n > 0);
  const double alpha = 1 - coverage;
  RankInterval interval{1, n, false};
  if (q <= 0 || q >= 1) return interval;  // the extremes have no two-sided bound
  // Exact search is O(n); above this size the normal approximation to Bin(n, q) is
  // accurate to well under one rank.
  constexpr std::size_t kExactLimit = 5000;
  if (n <= kExactLimit) {
    // B = number of samples below the true quantile, B ~ Bin(n, q). [x(l), x(u)] covers the
    // quantile with probability P(l <= B < u) = F(u - 1) - F(l - 1). Take the largest l with
    // F(l - 1) <= alpha / 2 and the smallest u with F(u - 1) >= 1 - alpha / 2, in one pass over
    // the pmf (computed in log space so large n does not underflow the first terms).
    const double log_q = std::log(q);
    const double log_not_q = std::log1p(-q);
    const double log_n_factorial = std::lgamma(static_cast<double>(n) + 1);
    std::size_t lower = 0;
    std::size_t upper = 0;
    double cdf = 0;  // F(k) after adding pmf(k)
    for (std::size_t k = 0; k < n; ++k) {
      const double dk = static_cast<double>(k);
      cdf += std::exp(log_n_factorial - std::lgamma(dk + 1) -
                      std::lgamma(static_cast<double>(n - k) + 1) + dk * log_q +
                      static_cast<double>(n - k) * log_not_q);
      // cdf is F(k): rank k + 1 is a valid lower bound while F(k) <= alpha / 2.
      if (cdf <= alpha / 2) lower = k + 1;
      if (cdf >= 1 - alpha / 2) {
        upper = k + 1;
        break;
      }
    }
    interval.bounded = lower >= 1 && upper >= 1;
    interval.lower = std::max<std::size_t>(lower, 1);
    interval.upper = upper == 0 ? n : upper;
    return interval;
  }
  const double z = NormalQuantile(1 - alpha / 2);
  const double nd = static_cast<double>(n);
  const double spread = z * std::sqrt(nd * q * (1 - q));
  const double lower = std::floor(nd * q - spread);
  const double upper = std::ceil(nd * q + spread) + 1;
  interval.bounded = lower >= 1 && upper <= nd;
  interval.lower = static_cast<std::size_t>(std::clamp(lower, 1.0, nd));
  interval.upper = static_cast<std::size_t>(std::clamp(upper, 1.0, nd));
  return interval;
}

double NearestRank(std::span<const double> sorted, double q) {
  BAKEOFF_CHECK(!sorted.empty());
  BAKEOFF_CHECK(q >= 0 && q <= 1) << "q=" << q;
  return sorted[NearestRankIndex(sorted.size(), q) - 1];
}

QuantileEstimate EstimateQuantile(std::span<const double> sorted, double q, double coverage) {
  BAKEOFF_CHECK(coverage > 0 && coverage < 1);
  QuantileEstimate estimate;
  estimate.q = q;
  estimate.value = NearestRank(sorted, q);
  const RankInterval ranks = ConfidenceRanks(sorted.size(), q, coverage);
  estimate.bounded = ranks.bounded;
  estimate.lower = sorted[ranks.lower - 1];
  estimate.upper = sorted[ranks.upper - 1];
  return estimate;
}

Summary Summarize(std::vector<double> values, double coverage) {
  Summary summary;
  summary.count = values.size();
  if (values.empty()) return summary;
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  summary.mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
  if (values.size() > 1) {
    double squares = 0;
    for (double v : values) squares += (v - summary.mean) * (v - summary.mean);
    summary.stddev = std::sqrt(squares / (n - 1));
  }
  summary.min = values.front();
  summary.max = values.back();
  summary.p50 = EstimateQuantile(values, 0.50, coverage);
  summary.p90 = EstimateQuantile(values, 0.90, coverage);
  summary.p95 = EstimateQuantile(values, 0.95, coverage);
  summary.p99 = EstimateQuantile(values, 0.99, coverage);
  summary.p999 = EstimateQuantile(values, 0.999, coverage);
  return summary;
}

}  // namespace bakeoff::stats
