// qualify/metrics_scrape.cc
#include "qualify/metrics_scrape.h"

#include <fmt/format.h>

namespace bakeoff::qualify {

MetricsScrape ScrapeMetrics(const target::Candidate& candidate) {
  MetricsScrape scrape;
  Result<net::FetchedResponse> response =
      candidate.Call(target::GetRequest(candidate.spec().metrics_path), std::chrono::seconds(5));
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

std::optional<double> FamilyValue(const target::MetricsPage& page,
                                  const target::MetricFamilyName& family) {
  if (family.kind == target::SignalKind::kHistogram) {
    const auto histogram = page.HistogramOf(family.family);
    return histogram ? std::optional<double>(histogram->count) : std::nullopt;
  }
  if (auto total = page.Sum(std::string(family.family) + "_total")) return total;
  return page.Sum(family.family);
}

const target::MetricFamilyName* FindSignal(const target::MetricsPage& page,
                                           const target::SignalInfo& signal) {
  for (const target::MetricFamilyName& family : signal.families) {
    if (FamilyValue(page, family)) return &family;
  }
  return nullptr;
}

const target::MetricFamilyName* FindSignal(const target::MetricsPage& page, target::Signal signal) {
  for (const target::SignalInfo& info : target::CanonicalSignals()) {
    if (info.signal == signal) return FindSignal(page, info);
  }
  return nullptr;
}

}  // namespace bakeoff::qualify
