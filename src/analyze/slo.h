// analyze/slo.h
//
// Owns: service-level objectives as given on the command line (`--slo ttft_p99=200ms,...`), parsed.
// Does not own: checking one request against them (measure/step_recorder.h, fed the thresholds
// by RequestThresholds) or checking a step's aggregate (analyze/step_analysis.h).
// Grammar: comma-separated `METRIC_pQ=DURATION` terms; METRIC is ttft, tpot, itl or e2e; Q is
// 50, 90, 95, 99 or 999; DURATION is a number with unit ms or s (a bare number means ms).
//
// Thread-safety: plain values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "measure/step_recorder.h"

namespace bakeoff::analyze {

// The metrics are measure's, which checks each request against its threshold as it finishes.
using SloMetric = measure::SloMetric;
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
  // The per-request thresholds, one per term in order, for measure::StepRecorder (which counts
  // the requests that meet every one while the run goes on).
  std::vector<measure::SloThreshold> RequestThresholds() const;
};

// Errors name the offending term.
Result<Slo> ParseSlo(std::string_view text);

}  // namespace bakeoff::analyze
