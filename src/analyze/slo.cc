#include "analyze/slo.h"

#include <charconv>
#include <cmath>

namespace bakeoff::analyze {

const char* SloMetricName(SloMetric metric) {
  switch (metric) {
    case SloMetric::kTtft: return "ttft";
    case SloMetric::kTpot: return "tpot";
    case SloMetric::kItl: return "itl";
    case SloMetric::kE2e: return "e2e";
  }
  return "unknown";
}

std::vector<measure::SloThreshold> Slo::RequestThresholds() const {
  std::vector<measure::SloThreshold> thresholds;
  for (const SloTerm& term : terms) thresholds.push_back({term.metric, term.threshold_ms});
  return thresholds;
}

namespace {

Error BadTerm(std::string_view term, std::string_view why) {
  return MakeError(ErrorCode::kInvalidInput,
                   "--slo: term '" + std::string(term) + "': " + std::string(why));
}

Result<SloTerm> ParseTerm(std::string_view term) {
  const std::size_t equals = term.find('=');
  if (equals == std::string_view::npos) return BadTerm(term, "expected METRIC_pQ=DURATION");
  const std::string_view key = term.substr(0, equals);
  std::string_view value = term.substr(equals + 1);
  const std::size_t underscore = key.rfind("_p");
  if (underscore == std::string_view::npos) return BadTerm(term, "expected METRIC_pQ, e.g. ttft_p99");
  SloTerm slo;
  slo.text = std::string(term);
  const std::string_view metric = key.substr(0, underscore);
  if (metric == "ttft") slo.metric = SloMetric::kTtft;
  else if (metric == "tpot") slo.metric = SloMetric::kTpot;
  else if (metric == "itl") slo.metric = SloMetric::kItl;
  else if (metric == "e2e") slo.metric = SloMetric::kE2e;
  else return BadTerm(term, "unknown metric (expected ttft, tpot, itl or e2e)");
  const std::string_view percentile = key.substr(underscore + 2);
  if (percentile == "50") slo.quantile = 0.50;
  else if (percentile == "90") slo.quantile = 0.90;
  else if (percentile == "95") slo.quantile = 0.95;
  else if (percentile == "99") slo.quantile = 0.99;
  else if (percentile == "999") slo.quantile = 0.999;
  else return BadTerm(term, "unknown percentile (expected p50, p90, p95, p99 or p999)");
  double scale = 1;
  if (value.ends_with("ms")) {
    value.remove_suffix(2);
  } else if (value.ends_with("s")) {
    value.remove_suffix(1);
    scale = 1000;
  }
  double number = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(number) ||
      number <= 0) {
    return BadTerm(term, "threshold must be a positive number with unit ms or s");
  }
  slo.threshold_ms = number * scale;
  return slo;
}

}  // namespace

Result<Slo> ParseSlo(std::string_view text) {
  Slo slo;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view term = text.substr(0, comma);
    if (!term.empty()) {
      Result<SloTerm> parsed = ParseTerm(term);
      if (!parsed.ok()) return parsed.error();
      slo.terms.push_back(parsed.value());
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (slo.terms.empty()) return MakeError(ErrorCode::kInvalidInput, "--slo: no terms given");
  return slo;
}

}  // namespace bakeoff::analyze
