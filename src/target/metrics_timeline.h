// target/metrics_timeline.h
//
// Owns: the engine's own view during a load: its Prometheus page scraped on a thread of its own
// every `interval` (so a slow or hanging scrape never delays a request), each scrape read as
// bakeoff's canonical signals (target/metric_names.h: running, waiting, KV usage, prefix-cache
// hits, prompt and generated tokens, preemptions, and the TTFT/E2E/queue histograms' count and
// sum), one line per scrape appended to metrics.jsonl as it happens, a sample of the raw pages
// kept, and per load step the figures an operator reads off a dashboard: peak and mean of the
// gauges, the counters' increase, and the server's mean TTFT and E2E over the step, for the
// cross-check against the client's figures (CrossCheck).
// A page that does not parse, or a scrape that fails, is recorded on its line and reported once;
// the load goes on. Units: the adapter's, converted to milliseconds for latencies.
// Does not own: the page parser (target/prometheus.h), the metric names (target/adapters.h).
//
// Thread-safety: Start takes the first scrape (the baseline) and spawns the scraping thread;
// SetStep may be called from any thread; Stop joins it (waiting for the scrape in flight and a
// last one, each bounded by 2 s).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "net/http_client.h"
#include "target/adapters.h"
#include "target/metric_names.h"
#include "target/prometheus.h"

namespace bakeoff::target {

// What one canonical signal shows on one page.
struct SignalReading {
  double value = 0;  // a gauge's or counter's value (summed over its series); a histogram's count
  double sum = 0;    // a histogram's sum, in `unit`
  std::string family;
  std::string unit;  // "s", "ms", "us", "fraction", ... ("" when unknown: taken as the engine's default)
  bool histogram = false;  // a histogram (count and sum); false: a gauge or counter, even for a
                           // latency an engine exposes as a cumulative counter (Triton)
};

// Scrapes closer together than this would compete with the load for the client's cores.
inline constexpr Nanos kMinScrapeInterval = std::chrono::milliseconds(100);

// Every canonical signal `page` shows: with an adapter, its own families (units and label
// selectors included); without one, the first family any adapter names that the page has.
std::map<Signal, SignalReading> ReadSignals(const MetricsPage& page, const EngineAdapter* adapter);

struct TimelineOptions {
  net::Endpoint endpoint;  // the engine's metrics port when the adapter names one (Triton: 8002)
  net::ClientOptions client;
  std::string path = "/metrics";
  Nanos interval = std::chrono::seconds(1);
  const EngineAdapter* adapter = nullptr;  // null: any engine's names
  std::filesystem::path jsonl;             // metrics.jsonl
  std::filesystem::path raw_dir;           // every `raw_every`-th page as NNNNNN.prom; empty: none
  std::uint32_t raw_every = 30;
};

// The server's figures over one load step (from the last scrape before it to its last scrape).
struct StepServerFigures {
  std::size_t step = 0;
  std::uint64_t scrapes = 0, failed_scrapes = 0;
  std::optional<double> running_peak, running_mean, waiting_peak, waiting_mean, kv_usage_peak, kv_usage_mean;
  std::optional<double> prompt_tokens, generation_tokens, preemptions, prefix_cache_hits;  // increases
  std::optional<double> ttft_mean_ms, e2e_mean_ms, queue_mean_ms;  // histogram sum/count increases
  std::optional<double> ttft_count, e2e_count;                     // requests those means cover
};

class MetricsTimeline {
 public:
  // Starts scraping now. A first scrape that fails is logged once; scraping goes on.
  static std::unique_ptr<MetricsTimeline> Start(TimelineOptions options,
                                                std::function<void(const std::string&)> log);
  ~MetricsTimeline();
  MetricsTimeline(const MetricsTimeline&) = delete;
  MetricsTimeline& operator=(const MetricsTimeline&) = delete;

  // The load step now running (scrapes are tagged with it).
  void SetStep(std::size_t step) { step_.store(step, std::memory_order_relaxed); }
  // Stops scraping (one last scrape first) and returns each step's figures, by step.
  std::vector<StepServerFigures> Stop();
  // Problems seen, once each: "metrics page did not parse: ...", "GET /metrics: ...".
  std::vector<std::string> Problems() const;

 private:
  struct Impl;
  explicit MetricsTimeline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::atomic<std::size_t> step_{0};
};

nlohmann::json ToJson(const StepServerFigures& figures);

// The client's and the server's mean of the same latency over the same step; a gap above
// max(25%, 20 ms) is named, with both numbers. nullopt when either side is missing.
std::optional<std::string> CrossCheck(const std::string& what, std::optional<double> server_ms, double client_ms,
                                      std::uint64_t client_count);

}  // namespace bakeoff::target
