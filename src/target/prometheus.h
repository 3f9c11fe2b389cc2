// target/prometheus.h
//
// Owns: reading a metrics page an engine serves on GET /metrics (vLLM, SGLang, TGI, llama.cpp,
// Triton, ...) in the Prometheus text exposition format 0.0.4 or the OpenMetrics 1.0 text format
// into plain values: samples with unescaped labels, family metadata (TYPE, HELP, UNIT), and the
// questions a benchmark asks of a page (a sum over matching series, a histogram's buckets, a
// quantile estimate from them). Also reads the quoted metric and label names of Prometheus 3
// (`{"my.metric", "my.label"="v"} 1`).
// Does not own: fetching the page (net/), what a given engine's metric names mean, or gzip.
//
// Lenient by default, like a scraper that must not lose a whole page to one odd line: a malformed
// line is skipped and reported in MetricsPage::warnings as "line N: why"; the page fails only when
// nothing in it reads as a sample but something should have, or when it is not text at all.
//
// Thread-safety: plain values and pure functions.
// Units: whatever the page says (Prometheus convention: seconds, bytes); timestamps in
// milliseconds since the Unix epoch (OpenMetrics' float seconds are converted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace bakeoff::target {

struct MetricLabel {
  std::string name, value;

  bool operator==(const MetricLabel&) const = default;
};

struct MetricSample {
  std::string name;  // full sample name, e.g. vllm:e2e_request_latency_seconds_bucket
  std::vector<MetricLabel> labels;  // in page order, values unescaped; names unique
  double value = 0;                 // +Inf, -Inf, NaN supported
  std::optional<std::int64_t> timestamp_ms;

  // The value of label `name`; "" when absent (Prometheus treats an empty label as absent).
  std::string_view Label(std::string_view name) const;
};

enum class MetricType {
  kUnknown,  // no TYPE line, or OpenMetrics' `unknown`
  kCounter,
  kGauge,
  kHistogram,
  kSummary,
  kGaugeHistogram,
  kInfo,
  kStateSet,
  kUntyped,  // 0.0.4's `untyped`
};

// The TYPE keyword for `type` as the page writes it ("counter", ...; "unknown" for kUnknown).
const char* MetricTypeName(MetricType type);

struct MetricFamilyInfo {
  std::string name;  // as written on its TYPE/HELP/UNIT line
  MetricType type = MetricType::kUnknown;
  std::string help;  // unescaped (`\\`, `\n`, and OpenMetrics' `\"`)
  std::string unit;
};

struct MetricsPage {
  std::vector<MetricSample> samples;       // in page order
  std::vector<MetricFamilyInfo> families;  // from # TYPE / # HELP / # UNIT lines, first seen first
  bool openmetrics = false;                // saw "# EOF"
  std::vector<std::string> warnings;       // lines skipped in lenient mode: "line N: why"

  // The family `name` names: the family of that exact name, else the family a sample of that
  // name belongs to (`x_bucket`, `x_sum`, `x_count`, `x_total`, `x_created`, `x_gsum`, `x_gcount`,
  // `x_info` belong to family x), else the counter family `name`_total (prometheus_client names
  // counter families with their suffix). Null when none.
  const MetricFamilyInfo* Family(std::string_view name) const;

  // Sum of the values of every sample named `name` whose labels include all of `match` (exact
  // values; a `match` label with an empty value also matches a sample without that label, as in
  // Prometheus). nullopt when no sample matches.
  std::optional<double> Sum(std::string_view name,
                            const std::vector<MetricLabel>& match = {}) const;

  // A classic histogram read from its samples: cumulative bucket counts by upper bound `le`
  // (ascending, +Inf last when the page has it), and the _sum and _count.
  struct Histogram {
    std::vector<std::pair<double, double>> buckets;  // (le, cumulative count)
    double sum = 0, count = 0;
  };
  // The buckets (`family`_bucket), `family`_sum and `family`_count of the series matching `match`
  // (as in Sum), summed over every other label; series with the same `le` add up. A bucket whose
  // `le` is not a number is left out. `count` falls back to the +Inf bucket when the page has no
  // _count; OpenMetrics gauge histograms' _gsum/_gcount are read when _sum/_count are absent.
  // nullopt when no bucket, _sum or _count sample matches.
  std::optional<Histogram> HistogramOf(std::string_view family,
                                       const std::vector<MetricLabel>& match = {}) const;
};

struct PrometheusParseOptions {
  static constexpr std::size_t kDefaultMaxPageBytes = std::size_t{64} << 20;
  static constexpr std::size_t kDefaultMaxLineBytes = std::size_t{1} << 20;
  static constexpr std::size_t kDefaultMaxWarnings = 100;

  // Anything that would be a warning (a malformed line or exemplar, a repeated TYPE line, text
  // after "# EOF") fails the page instead, naming its line.
  bool strict = false;
  // Pages and lines (without their line end) over these are refused outright.
  std::size_t max_page_bytes = kDefaultMaxPageBytes;
  std::size_t max_line_bytes = kDefaultMaxLineBytes;
  // Warnings kept; past this, one last warning says how many more lines were skipped.
  std::size_t max_warnings = kDefaultMaxWarnings;
};

// Parses a whole exposition page (Prometheus text 0.0.4 and OpenMetrics 1.0 text; lines end in LF
// or CRLF, a leading UTF-8 BOM is skipped). A page is OpenMetrics when it has a "# EOF" line; then
// sample timestamps are read as float seconds, and text after "# EOF" is ignored with a warning.
// Exemplars (` # {trace_id="x"} 1.0 123`) are checked and dropped; a malformed one is a warning
// and its sample is kept. Lenient by default: a malformed
// line is skipped and listed in warnings ("line 12: ..."); a repeated TYPE, HELP or UNIT line for a
// family is also a warning (the first one is kept). The page fails with kInvalidInput, the message
// naming a line, when it has no valid sample line at all but has some non-comment text; or when it
// is not text (a NUL byte); or when it or one of its lines is over the size limits. An empty page,
// or one of comments only, is valid with zero samples.
// Memory: the result takes up to about 20 times the page's size (a page of tiny samples).
Result<MetricsPage> ParsePrometheusText(std::string_view text,
                                        const PrometheusParseOptions& options = {});

// Quantile estimate from cumulative buckets, as Prometheus' histogram_quantile does it: find the
// bucket holding rank q * N (N: the +Inf bucket's count) and interpolate linearly inside it, the
// first bucket starting at 0 (or at its bound when that is <= 0); a rank in the +Inf bucket
// gives the highest finite bound. Counts that decrease are raised to the running maximum. q < 0
// gives -Inf and q > 1 +Inf; q = 0 gives the lower edge of the first non-empty bucket. nullopt when
// N is 0 or not finite, when the last bucket is not +Inf or no finite bucket precedes it, when a
// count is NaN, or when q is NaN.
std::optional<double> HistogramQuantile(const MetricsPage::Histogram& histogram, double q);

}  // namespace bakeoff::target
