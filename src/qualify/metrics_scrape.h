// qualify/metrics_scrape.h
//
// Owns: reading the candidate's own metrics during a probe: one scrape of its Prometheus page,
// and the value of a canonical signal on it whatever engine wrote it (target/metric_names.h).
#pragma once

#include <optional>
#include <string>

#include "target/candidate.h"
#include "target/metric_names.h"
#include "target/prometheus.h"

namespace bakeoff::qualify {

struct MetricsScrape {
  int status = 0;
  std::string error;  // why there is no page
  std::string body;
  std::optional<target::MetricsPage> page;
};

// GET the candidate's metrics path (5 s bound) and parse it.
MetricsScrape ScrapeMetrics(const target::Candidate& candidate);

// The engine family `page` has for `signal`, or nullptr.
const target::MetricFamilyName* FindSignal(const target::MetricsPage& page,
                                           const target::SignalInfo& signal);
const target::MetricFamilyName* FindSignal(const target::MetricsPage& page, target::Signal signal);

// What `family` shows on `page`: a histogram's count, a counter's or gauge's sum over its series.
std::optional<double> FamilyValue(const target::MetricsPage& page,
                                  const target::MetricFamilyName& family);

}  // namespace bakeoff::qualify
