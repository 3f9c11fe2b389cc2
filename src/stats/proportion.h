// stats/proportion.h
//
// Owns: a share of successes among trials (SLO attainment, availability) with its Wilson score
// confidence interval, which stays inside [0, 1] and is honest for shares near 0 or 1 and for
// small samples, unlike the normal approximation.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>

namespace bakeoff::stats {

struct ProportionEstimate {
  std::uint64_t successes = 0;
  std::uint64_t trials = 0;
  double value = 0;  // successes / trials; 0 when there are no trials
  double lower = 0;  // Wilson score interval at the requested coverage
  double upper = 1;
};

// REQUIRES: successes <= trials; 0 < coverage < 1 (0.95 by default).
ProportionEstimate EstimateProportion(std::uint64_t successes, std::uint64_t trials,
                                      double coverage = 0.95);

}  // namespace bakeoff::stats
