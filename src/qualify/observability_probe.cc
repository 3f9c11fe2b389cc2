// qualify/observability_probe.cc
//
// Owns: the observability probe: scrapes the candidate's Prometheus page, reports which canonical
// signals an operator needs are present and under which metric (target/metric_names.h), and when
// the counters move: scraped before a stream, in the middle of it and after it ended, a counter
// that rose mid-stream moves "during the request", one that rose only afterwards "at request
// end", one that never rose "never"; the running gauge must show the stream while it runs.
#include <limits>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dialect/openai.h"
#include "qualify/probes.h"
#include "qualify/stream_batch.h"
#include "target/metric_names.h"
#include "target/prometheus.h"

namespace bakeoff::qualify {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct Scrape {
  int status = 0;
  std::string error;
  std::optional<target::MetricsPage> page;
  std::string body;
};

Scrape ScrapeMetrics(const target::Candidate& candidate) {
  net::HttpRequest request;
  request.method = "GET";
  request.path = candidate.spec().metrics_path;
  request.content_type.clear();
  Scrape scrape;
  Result<net::FetchedResponse> response = candidate.Call(std::move(request), seconds(5));
  if (!response.ok()) {
    scrape.error = response.error().message;
    return scrape;
  }
  scrape.status = response->head.status;
  scrape.body = std::move(response->body);
  if (scrape.status != 200) {
    scrape.error = fmt::format("HTTP {}", scrape.status);
    return scrape;
  }
  Result<target::MetricsPage> page = target::ParsePrometheusText(scrape.body);
  if (!page.ok()) {
    scrape.error = page.error().message;
    return scrape;
  }
  scrape.page = std::move(page.value());
  return scrape;
}

// The family a page has for `signal`, or nullptr.
const target::MetricFamilyName* Present(const target::MetricsPage& page,
                                        const target::SignalInfo& signal) {
  for (const target::MetricFamilyName& family : signal.families) {
    const bool found = family.kind == target::SignalKind::kHistogram
                           ? page.HistogramOf(family.family).has_value()
                           : (page.Sum(family.family).has_value() ||
                              page.Sum(std::string(family.family) + "_total").has_value());
    if (found) return &family;
  }
  return nullptr;
}

// The value a signal's family shows: a histogram's count, a counter's or gauge's sum.
std::optional<double> Value(const target::MetricsPage& page,
                            const target::MetricFamilyName& family) {
  if (family.kind == target::SignalKind::kHistogram) {
    const auto histogram = page.HistogramOf(family.family);
    return histogram ? std::optional<double>(histogram->count) : std::nullopt;
  }
  if (auto total = page.Sum(std::string(family.family) + "_total")) return total;
  return page.Sum(family.family);
}

}  // namespace

void ProbeObservability(ProbeContext& context, ProbeResult& result) {
  target::Candidate& candidate = context.candidate;
  const Scrape before = ScrapeMetrics(candidate);
  const std::string page_evidence = context.evidence.Write("metrics_before.txt", before.body);
  if (!before.page) {
    result.Find(
        Severity::kDisqualifying, "no_metrics",
        fmt::format("GET {} gave no Prometheus page ({}): operators would run this engine blind",
                    candidate.spec().metrics_path, before.error),
        {page_evidence});
    return;
  }
  if (!before.page->warnings.empty()) {
    result.Find(Severity::kInfo, "unparsable_lines",
                fmt::format("{} lines of the metrics page could not be read (first: {})",
                            before.page->warnings.size(), before.page->warnings.front()),
                {page_evidence});
  }
  // One stream, scraped in the middle and after.
  StreamBatch batch(candidate.endpoint(), candidate.OptionsWithin(seconds(120)),
                    dialect::ApiPath(candidate.spec().api),
                    StreamingBodies(candidate, 1, context.options.long_output_tokens * 2));
  batch.WaitStarted(1, seconds(30));
  std::this_thread::sleep_for(milliseconds(150));
  const Scrape during = ScrapeMetrics(candidate);
  const bool still_running = batch.Ended() == 0;
  const std::vector<measure::RequestRecord> records =
      batch.Finish(std::min<Nanos>(context.Remaining(), seconds(120)));
  std::this_thread::sleep_for(milliseconds(300));  // engines may update counters just after the end
  const Scrape after = ScrapeMetrics(candidate);
  context.evidence.Write("metrics_during.txt", during.body);
  context.evidence.Write("metrics_after.txt", after.body);

  nlohmann::ordered_json j;
  std::vector<std::string> missing_essential;
  for (const target::SignalInfo& signal : target::CanonicalSignals()) {
    const target::MetricFamilyName* family = Present(*before.page, signal);
    if (family == nullptr && after.page) family = Present(*after.page, signal);
    if (family == nullptr) {
      result.AddCheck(std::string(signal.name), CheckStatus::kFail,
                      fmt::format("no metric for {}", signal.meaning));
      if (signal.essential) missing_essential.emplace_back(signal.name);
      j[std::string(signal.name)] = {{"present", false}};
      continue;
    }
    // NaN when a scrape could not read it.
    constexpr double kUnread = std::numeric_limits<double>::quiet_NaN();
    const double v0 = Value(*before.page, *family).value_or(kUnread);
    const double v1 = during.page ? Value(*during.page, *family).value_or(kUnread) : kUnread;
    const double v2 = after.page ? Value(*after.page, *family).value_or(kUnread) : kUnread;
    std::string movement;
    if (family->kind == target::SignalKind::kGauge) {
      movement = fmt::format("{} during the stream, {} after", v1, v2);
    } else if (still_running && v1 > v0) {
      movement = "during the request (moved before it ended)";
    } else if (v2 > v0) {
      movement = "at request end";
    } else {
      movement = "never (did not move for a whole request)";
    }
    result.AddCheck(std::string(signal.name), CheckStatus::kPass,
                    fmt::format("{} ({} name); {}", family->family, family->engine, movement));
    j[std::string(signal.name)] = {{"present", true},
                                   {"metric", family->family},
                                   {"engine", family->engine},
                                   {"movement", movement}};
    if (signal.signal == target::Signal::kRunning && still_running && !(v1 >= 1)) {
      result.Find(Severity::kWarning, "running_gauge_blind",
                  fmt::format("{} read {} while a request was running", family->family, v1));
    }
    // Every completed request must move these; prefix hits and preemptions need more than one.
    const bool moves_per_request = signal.signal == target::Signal::kTtft ||
                                   signal.signal == target::Signal::kE2eLatency ||
                                   signal.signal == target::Signal::kPromptTokens ||
                                   signal.signal == target::Signal::kGenerationTokens;
    if (moves_per_request && movement.starts_with("never") &&
        records.front().outcome == measure::Outcome::kOk) {
      result.Find(Severity::kWarning, std::string(signal.name) + "_never_moves",
                  fmt::format("{} did not move for a completed request", family->family));
    }
  }
  const std::string evidence = context.evidence.Write("signals.json", j.dump(2) + "\n");
  if (!missing_essential.empty()) {
    result.Find(Severity::kWarning, "missing_signals",
                fmt::format("no metric for: {} (an operator needs these to run it)",
                            fmt::join(missing_essential, ", ")),
                {evidence, page_evidence});
  }
}

}  // namespace bakeoff::qualify
