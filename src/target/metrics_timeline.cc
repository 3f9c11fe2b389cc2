// target/metrics_timeline.cc: scraping the engine's metrics beside a load (metrics_timeline.h).
#include "target/metrics_timeline.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "core/file.h"
#include "core/json_dump.h"
#include "core/json_text.h"
#include "target/discovery.h"

namespace bakeoff::target {
namespace {

// A latency in `unit` as milliseconds (Prometheus convention: seconds when the unit is unknown).
double ToMs(double value, std::string_view unit) {
  if (unit == "ms") return value;
  if (unit == "us") return value / 1000;
  return value * 1000;
}

bool IsGauge(Signal s) { return s == Signal::kRunning || s == Signal::kWaiting || s == Signal::kKvUsage; }

// What a step keeps of its scrapes (bounded however long the step).
struct StepAccumulator {
  std::uint64_t scrapes = 0, failed = 0;
  std::map<Signal, std::pair<double, double>> gauge_sum_peak;  // (sum, peak)
  std::map<Signal, std::uint64_t> gauge_n;
  std::map<Signal, SignalReading> first, last;  // counters and histograms: baseline and end
};

}  // namespace

std::map<Signal, SignalReading> ReadSignals(const MetricsPage& page, const EngineAdapter* adapter) {
  std::map<Signal, SignalReading> out;
  // An adapter without metric names (generic-openai, KServe fronting another engine) reads the
  // page with every engine's names.
  if (adapter != nullptr && adapter->metrics.empty()) adapter = nullptr;
  for (const SignalInfo& info : CanonicalSignals()) {
    std::vector<const SignalMetric*> metrics;
    if (adapter != nullptr) {
      metrics = adapter->MetricsFor(info.signal);
    } else {
      for (const EngineAdapter& a : AllAdapters()) {
        for (const SignalMetric* m : a.MetricsFor(info.signal)) metrics.push_back(m);
      }
    }
    for (const SignalMetric* metric : metrics) {
      std::optional<double> value = SignalValue(page, *metric);
      if (!value) continue;
      if (!std::isfinite(*value)) continue;  // NaN or Inf: not a reading (null means "not shown")
      SignalReading reading{*value, 0, std::string(metric->family), std::string(metric->unit),
                            metric->kind == SignalKind::kHistogram};
      if (std::optional<MetricsPage::Histogram> h = SignalHistogram(page, *metric)) {
        if (!std::isfinite(h->sum)) continue;
        reading.sum = h->sum;
      }
      out.emplace(info.signal, std::move(reading));
      break;
    }
  }
  return out;
}

struct MetricsTimeline::Impl {
  TimelineOptions options;
  std::function<void(const std::string&)> log;
  std::unique_ptr<LineWriter> writer;
  MonoTime start = std::chrono::steady_clock::now();
  std::thread thread;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::map<std::size_t, StepAccumulator> steps;  // guarded by mutex
  std::optional<std::map<Signal, SignalReading>> previous;  // the last good scrape
  std::vector<std::string> problems;                         // guarded by mutex
  std::set<std::string> problem_kinds;
  std::uint64_t pages = 0;

  void Problem(const std::string& kind, const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!problem_kinds.insert(kind).second) return;
    problems.push_back(text);
    if (log) log(text + " (said once; the load goes on)");
  }

  void ScrapeOnce(std::size_t step) {
    const double t_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    Result<net::FetchedResponse> response = net::Fetch(options.endpoint, GetRequest(options.path), options.client);
    std::string error;
    std::optional<std::map<Signal, SignalReading>> signals;
    if (!response.ok()) {
      error = response.error().message;
      Problem("fetch", fmt::format("GET {}: {}", options.path, error));
    } else if (response->head.status != 200) {
      error = fmt::format("HTTP {}", response->head.status);
      Problem("status", fmt::format("GET {} answered HTTP {}", options.path, response->head.status));
    } else {
      Result<MetricsPage> page = ParsePrometheusText(response->body);
      if (!page.ok()) {
        error = page.error().message;
        Problem("parse", fmt::format("the metrics page did not parse: {}", error));
      } else {
        signals = ReadSignals(page.value(), options.adapter);
        if (signals->empty()) Problem("empty", fmt::format("GET {}: no canonical signal on the page", options.path));
      }
      if (!options.raw_dir.empty() && pages++ % options.raw_every == 0) {
        std::error_code ec;
        std::filesystem::create_directories(options.raw_dir, ec);
        (void)WriteFileAtomically(options.raw_dir / fmt::format("{:06}.prom", pages - 1), response->body);
      }
    }
    nlohmann::json line = {{"t_ms", std::round(t_ms * 1000) / 1000}, {"step", step}, {"ok", signals.has_value()}};
    if (signals) {
      nlohmann::json values = nlohmann::json::object();
      for (const SignalInfo& info : CanonicalSignals()) {
        auto it = signals->find(info.signal);
        if (it == signals->end()) continue;
        if (!it->second.histogram) {
          values[std::string(info.name)] = it->second.value;
        } else {
          values[std::string(info.name)] = {{"count", it->second.value}, {"sum", it->second.sum}, {"unit", it->second.unit}};
        }
      }
      line["signals"] = std::move(values);
    } else {
      line["error"] = error;
    }
    // The page's own text can be any bytes: never let it break the line (or the thread).
    if (writer) (void)writer->Append(DumpJson(line, -1));

    std::lock_guard<std::mutex> lock(mutex);
    StepAccumulator& acc = steps[step];
    ++acc.scrapes;
    if (!signals) {
      ++acc.failed;
      return;
    }
    for (const auto& [signal, reading] : *signals) {
      if (IsGauge(signal)) {
        auto& [sum, peak] = acc.gauge_sum_peak[signal];
        sum += reading.value;
        peak = acc.gauge_n[signal]++ == 0 ? reading.value : std::max(peak, reading.value);
        continue;
      }
      if (!acc.first.count(signal)) {
        // The baseline is the last scrape before this step, so the step's first second counts.
        const bool before = previous && previous->count(signal);
        acc.first[signal] = before ? previous->at(signal) : reading;
      }
      acc.last[signal] = reading;
    }
    previous = signals;
  }

  // The first scrape (the baseline) is taken by Start itself, before the load begins.
  void Loop(const std::atomic<std::size_t>& step) {
    MonoTime next = std::chrono::steady_clock::now();
    for (;;) {
      // After a slow scrape the next one waits its interval: no burst to catch up.
      next = std::max(next + options.interval, std::chrono::steady_clock::now());
      {
        std::unique_lock<std::mutex> lock(mutex);
        if (wake.wait_until(lock, next, [this] { return stopping; })) break;
      }
      ScrapeOnce(step.load(std::memory_order_relaxed));
    }
    ScrapeOnce(step.load(std::memory_order_relaxed));  // the end of the last step
  }

  void Guarded(const std::function<void()>& body) {
    try {
      body();
    } catch (const std::exception& e) {
      Problem("exception", fmt::format("metrics scraping stopped: {}", e.what()));
    }
  }
};

MetricsTimeline::MetricsTimeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsTimeline::~MetricsTimeline() {
  if (impl_ && impl_->thread.joinable()) Stop();
}

std::unique_ptr<MetricsTimeline> MetricsTimeline::Start(TimelineOptions options,
                                                        std::function<void(const std::string&)> log) {
  auto impl = std::make_unique<Impl>();
  // One scrape takes at most max(0.5 s, the interval) and never more than 2 s: the timeline
  // keeps its pace and a hung server costs one line, never the load's time.
  options.interval = std::max<Nanos>(options.interval, kMinScrapeInterval);
  const Nanos bound = std::clamp<Nanos>(options.interval, std::chrono::milliseconds(500), std::chrono::seconds(2));
  options.client.deadlines.connect = bound;
  options.client.deadlines.first_byte = bound;
  options.client.deadlines.idle = bound;
  options.client.deadlines.total = bound;
  impl->options = std::move(options);
  impl->log = std::move(log);
  if (!impl->options.jsonl.empty()) {
    Result<std::unique_ptr<LineWriter>> writer = LineWriter::Open(impl->options.jsonl);
    if (writer.ok()) {
      impl->writer = std::move(writer.value());
    } else if (impl->log) {
      impl->log(writer.error().message);
    }
  }
  std::unique_ptr<MetricsTimeline> timeline(new MetricsTimeline(std::move(impl)));
  Impl* raw = timeline->impl_.get();
  const std::atomic<std::size_t>* step = &timeline->step_;
  raw->Guarded([raw] { raw->ScrapeOnce(0); });  // the baseline, before any request is sent
  raw->thread = std::thread([raw, step] { raw->Guarded([raw, step] { raw->Loop(*step); }); });
  return timeline;
}

std::vector<StepServerFigures> MetricsTimeline::Stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  std::vector<StepServerFigures> out;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (const auto& entry : impl_->steps) {
    const StepAccumulator& acc = entry.second;  // not a structured binding: lambdas below use it
    StepServerFigures f;
    f.step = entry.first;
    f.scrapes = acc.scrapes;
    f.failed_scrapes = acc.failed;
    auto gauge = [&](Signal s, std::optional<double>& peak, std::optional<double>& mean) {
      auto it = acc.gauge_sum_peak.find(s);
      if (it == acc.gauge_sum_peak.end()) return;
      peak = it->second.second;  // finite: ReadSignals drops NaN and Inf
      mean = it->second.first / static_cast<double>(acc.gauge_n.at(s));
    };
    gauge(Signal::kRunning, f.running_peak, f.running_mean);
    gauge(Signal::kWaiting, f.waiting_peak, f.waiting_mean);
    gauge(Signal::kKvUsage, f.kv_usage_peak, f.kv_usage_mean);
    auto increase = [&](Signal s) -> std::optional<double> {
      auto a = acc.first.find(s), b = acc.last.find(s);
      if (a == acc.first.end() || b == acc.last.end()) return std::nullopt;
      return b->second.value - a->second.value;
    };
    auto mean_ms = [&](Signal s, std::optional<double>& mean, std::optional<double>* count) {
      auto a = acc.first.find(s), b = acc.last.find(s);
      if (a == acc.first.end() || b == acc.last.end() || !b->second.histogram) return;  // a counter has no mean
      const double n = b->second.value - a->second.value;
      if (count) *count = n;
      if (n > 0) mean = ToMs((b->second.sum - a->second.sum) / n, b->second.unit);
    };
    f.prompt_tokens = increase(Signal::kPromptTokens);
    f.generation_tokens = increase(Signal::kGenerationTokens);
    f.preemptions = increase(Signal::kPreemptions);
    f.prefix_cache_hits = increase(Signal::kPrefixCacheHits);
    mean_ms(Signal::kTtft, f.ttft_mean_ms, &f.ttft_count);
    mean_ms(Signal::kE2eLatency, f.e2e_mean_ms, &f.e2e_count);
    mean_ms(Signal::kQueueTime, f.queue_mean_ms, nullptr);
    out.push_back(f);
  }
  return out;
}

std::vector<std::string> MetricsTimeline::Problems() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->problems;
}

nlohmann::json ToJson(const StepServerFigures& f) {
  auto opt = [](const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(); };
  return {{"scrapes", f.scrapes},
          {"failed_scrapes", f.failed_scrapes},
          {"running", {{"peak", opt(f.running_peak)}, {"mean", opt(f.running_mean)}}},
          {"waiting", {{"peak", opt(f.waiting_peak)}, {"mean", opt(f.waiting_mean)}}},
          {"kv_usage", {{"peak", opt(f.kv_usage_peak)}, {"mean", opt(f.kv_usage_mean)}}},
          {"prompt_tokens", opt(f.prompt_tokens)},
          {"generation_tokens", opt(f.generation_tokens)},
          {"preemptions", opt(f.preemptions)},
          {"prefix_cache_hits", opt(f.prefix_cache_hits)},
          {"prefix_hit_share", f.prefix_cache_hits && f.prompt_tokens && *f.prompt_tokens > 0
                                   ? nlohmann::json(*f.prefix_cache_hits / *f.prompt_tokens)
                                   : nlohmann::json()},
          {"ttft_mean_ms", opt(f.ttft_mean_ms)},
          {"ttft_count", opt(f.ttft_count)},
          {"e2e_mean_ms", opt(f.e2e_mean_ms)},
          {"e2e_count", opt(f.e2e_count)},
          {"queue_mean_ms", opt(f.queue_mean_ms)}};
}

std::optional<std::string> CrossCheck(const std::string& what, std::optional<double> server_ms, double client_ms,
                                      std::uint64_t client_count) {
  if (!server_ms || client_count == 0 || !(client_ms > 0)) return std::nullopt;
  const double gap = *server_ms - client_ms;
  if (std::abs(gap) <= std::max(0.25 * client_ms, 20.0)) return std::nullopt;
  return fmt::format("{}: the server's mean is {:.1f} ms, the client measured {:.1f} ms ({:+.0f}%) over the same "
                     "step: one of the two is not timing what it says (or the server counts other requests)",
                     what, *server_ms, client_ms, 100 * gap / client_ms);
}

}  // namespace bakeoff::target
