// stats/proportion.cc: the Wilson score interval (proportion.h).
#include "stats/proportion.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace bakeoff::stats {
namespace {

// The standard normal quantile for a two-sided coverage, by bisection on erfc (plenty for the few
// coverages reports use; no table to keep in sync).
double TwoSidedZ(double coverage) {
  const double tail = (1 - coverage) / 2;
  double lo = 0, hi = 10;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > tail ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace

ProportionEstimate EstimateProportion(std::uint64_t successes, std::uint64_t trials, double coverage) {
  BAKEOFF_CHECK(successes <= trials) << successes << " successes in " << trials << " trials";
  BAKEOFF_CHECK(coverage > 0 && coverage < 1) << "coverage " << coverage;
  ProportionEstimate e;
  e.successes = successes;
  e.trials = trials;
  if (trials == 0) return e;
  const double n = static_cast<double>(trials);
  const double p = static_cast<double>(successes) / n;
  const double z = TwoSidedZ(coverage);
  const double z2 = z * z;
  const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = z * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n);
  e.value = p;
  e.lower = std::clamp(centre - half, 0.0, 1.0);
  e.upper = std::clamp(centre + half, 0.0, 1.0);
  return e;
}

}  // namespace bakeoff::stats
