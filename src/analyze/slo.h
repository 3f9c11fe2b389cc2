// analyze/slo.h
//
// Owns: service-level objectives as given on the command line (`--slo ttft_p99=200ms,...`) and
// checking one request or one aggregate against them.
// Grammar: comma-separated `METRIC_pQ=DURATION` terms; METRIC is ttft, tpot, itl or e2e; Q is
// 50, 90, 95, 99 or 999; DURATION is a number with unit ms or s (a bare number means ms).
//
// Thread-safety: plain values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace bakeoff::analyze {

enum class SloMetric { kTtft, kTpot, kItl, kE2e };
const char* SloMetricName(SloMetric metric);

struct SloTerm {
  SloMetric metric = SloMetric::kTtft;
  double quantile = 0.99;  // which percentile of the metric must stay under the threshold
  double threshold_ms = 0;
  std::string text;  // as the user wrote it, for reports
};

struct Slo {
  std::vector<SloTerm> terms;
  bool empty() const { return terms.empty(); }
};

// Errors name the offending term.
Result<Slo> ParseSlo(std::string_view text);

}  // namespace bakeoff::analyze
