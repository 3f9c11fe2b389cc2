// emulate/metrics.h
//
// Owns: what the emulated engine's GET /metrics says and how: fixed-bucket histograms in
// Prometheus's cumulative form, the per-request figures the server observes (TTFT, inter-token
// latency, end-to-end latency, queue time, finish reasons, rejections, injected faults), and the
// rendering of those plus the engine's counters (emulate/scheduler.h EngineCounters) in the
// Prometheus text exposition format (version 0.0.4) under vLLM's metric names
// (../shared/reference/engine-interfaces.md 1.4), so dashboards built for vLLM read it unchanged.
// Every rendering also carries the gauge `bakeoff_emulated 1`, so a scraper can label the source.
// Does not own: when figures are observed (emulate/server.h), or the engine model.
//
// Thread-safety: none; the server's I/O thread owns one RequestMetrics and renders it.
// Units: seconds for every latency (as Prometheus and vLLM); token counts.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "emulate/scheduler.h"

namespace bakeoff::emulate {

// A histogram with fixed, increasing, finite upper bounds plus the implicit +Inf bucket
// (Prometheus "classic" histogram).
class PrometheusHistogram {
 public:
  // REQUIRES: upper_bounds is non-empty, strictly increasing and finite.
  explicit PrometheusHistogram(std::span<const double> upper_bounds);

  // Counts `value` in the first bucket whose upper bound is >= value (Prometheus's `le`, less
  // than or equal), or in +Inf; adds it to sum(). NaN is ignored.
  void Observe(double value);

  std::span<const double> upper_bounds() const { return upper_bounds_; }
  // Observations <= upper_bounds()[i] (cumulative, as rendered in `_bucket{le=...}`).
  // REQUIRES: i < upper_bounds().size().
  std::uint64_t CumulativeCount(std::size_t i) const;
  std::uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> upper_bounds_;
  std::vector<std::uint64_t> bucket_counts_;  // per bucket, not cumulative; excludes +Inf
  std::uint64_t count_ = 0;
  double sum_ = 0.0;
};

// vLLM's bucket boundaries (vllm/v1/metrics/loggers.py), in seconds.
std::span<const double> TtftBucketsSeconds();            // 0.001 .. 2560, 22 bounds
std::span<const double> InterTokenBucketsSeconds();      // 0.01 .. 80, 19 bounds
std::span<const double> RequestLatencyBucketsSeconds();  // 0.3 .. 7680, 21 bounds (e2e, queue)
// bakeoff's, for the step lag and the step wake lag: 50 us .. 1 s, 14 bounds.
std::span<const double> StepLagBucketsSeconds();

// Figures the server observes per request. Latencies are measured on the server's monotonic
// clock from the instant the request was parsed (vLLM measures from frontend arrival).
struct RequestMetrics {
  PrometheusHistogram ttft{TtftBucketsSeconds()};                  // arrival -> first token
  PrometheusHistogram inter_token{InterTokenBucketsSeconds()};     // token k-1 -> token k
  PrometheusHistogram e2e{RequestLatencyBucketsSeconds()};         // arrival -> last token
  PrometheusHistogram queue_time{RequestLatencyBucketsSeconds()};  // arrival -> scheduled
  PrometheusHistogram step_lag{StepLagBucketsSeconds()};  // planned step end -> tokens handed out
  PrometheusHistogram step_wake_lag{StepLagBucketsSeconds()};  // step timer's instant -> it ran
  std::uint64_t finished_stop = 0;
  std::uint64_t finished_length = 0;
  std::uint64_t finished_abort = 0;  // client disconnects, shutdown aborts, stream-error faults
  // 503 answers to generation requests: waiting queue full, not ready yet, shutting down.
  std::uint64_t rejected_queue_full = 0;
  std::uint64_t rejected_not_ready = 0;
  std::uint64_t rejected_shutting_down = 0;
  // Faults injected (docs/emulator.md, "Faults and quirks").
  std::uint64_t fault_errors = 0;         // 500 before streaming
  std::uint64_t fault_stalls = 0;         // streams paused mid-way
  std::uint64_t fault_stream_errors = 0;  // error events inside a 200 stream
};

// The whole /metrics body: vLLM's gauges, counters and histograms, each with `# HELP` and
// `# TYPE` lines and the label model_name="<model_name>" (escaped per the format), then
// bakeoff's own families (`bakeoff_emulated`, rejections, faults). Counter families are named
// with their `_total` suffix in HELP/TYPE as prometheus_client writes them.
std::string RenderPrometheusMetrics(std::string_view model_name, const EngineCounters& engine,
                                    const RequestMetrics& requests);

// A label value escaped for the text format: backslash, double quote and newline.
std::string EscapeLabelValue(std::string_view value);

}  // namespace bakeoff::emulate
