// emulate/metrics.cc: Prometheus histograms and the /metrics rendering (contract in metrics.h).
//
// Wire format: Prometheus text exposition format 0.0.4 ("Exposition formats", prometheus.io):
// `# HELP name text`, `# TYPE name kind`, then `name{label="value",...} value` lines; a histogram
// is `name_bucket{...,le="B"}` (cumulative, ending with le="+Inf"), `name_sum` and `name_count`.
// Numbers are written as Python's prometheus_client writes them (1 -> "1.0"), so a scrape of the
// emulator reads like a scrape of vLLM.
#include "emulate/metrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "core/check.h"

namespace bakeoff::emulate {

namespace {

constexpr std::array<double, 22> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                                 0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                                 20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
constexpr std::array<double, 19> kInterTokenBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                                       0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0,
                                                       7.5,  10.0,  20.0, 40.0,  80.0};
constexpr std::array<double, 21> kRequestLatencyBuckets = {
    0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

// bakeoff's own: how late a step ends against its planned instant (timer and loop latency).
constexpr std::array<double, 14> kStepLagBuckets = {0.00005, 0.0001, 0.00025, 0.0005, 0.001,
                                                    0.0025,  0.005,  0.01,    0.025,  0.05,
                                                    0.1,     0.25,   0.5,     1.0};

// prometheus_client's floatToGoString: integral values keep one decimal ("3.0"), others the
// shortest representation that reads back exactly; infinities are "+Inf"/"-Inf".
std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) return fmt::format("{:.1f}", value);
  return fmt::format("{}", value);
}

std::string FormatValue(std::uint64_t value) { return fmt::format("{}.0", value); }
std::string FormatValue(std::int64_t value) { return fmt::format("{}.0", value); }

class Writer {
 public:
  explicit Writer(std::string_view model_name)
      : model_label_(fmt::format("model_name=\"{}\"", EscapeLabelValue(model_name))) {}

  void Family(std::string_view name, std::string_view type, std::string_view help) {
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }

  // A sample labelled with the model name and, when non-empty, `extra_labels` (already
  // formatted: `a="b"`).
  void Sample(std::string_view name, std::string_view extra_labels, const std::string& value) {
    fmt::format_to(std::back_inserter(out_), "{}{{{}{}{}}} {}\n", name, model_label_,
                   extra_labels.empty() ? "" : ",", extra_labels, value);
  }

  void Gauge(std::string_view name, std::string_view help, const std::string& value) {
    Family(name, "gauge", help);
    Sample(name, "", value);
  }

  void Counter(std::string_view name, std::string_view help, const std::string& value) {
    Family(name, "counter", help);
    Sample(name, "", value);
  }

  void Histogram(std::string_view name, std::string_view help, const PrometheusHistogram& h) {
    Family(name, "histogram", help);
    const std::string bucket = fmt::format("{}_bucket", name);
    for (std::size_t i = 0; i < h.upper_bounds().size(); ++i) {
      Sample(bucket, fmt::format("le=\"{}\"", FormatValue(h.upper_bounds()[i])),
             FormatValue(h.CumulativeCount(i)));
    }
    Sample(bucket, "le=\"+Inf\"", FormatValue(h.count()));
    Sample(fmt::format("{}_count", name), "", FormatValue(h.count()));
    Sample(fmt::format("{}_sum", name), "", FormatValue(h.sum()));
  }

  // A sample without the model label (bakeoff_emulated).
  void Bare(std::string_view name, std::string_view value) {
    fmt::format_to(std::back_inserter(out_), "{} {}\n", name, value);
  }

  std::string Take() { return std::move(out_); }

 private:
  std::string model_label_;
  std::string out_;
};

}  // namespace

PrometheusHistogram::PrometheusHistogram(std::span<const double> upper_bounds)
    : upper_bounds_(upper_bounds.begin(), upper_bounds.end()),
      bucket_counts_(upper_bounds.size(), 0) {
  BAKEOFF_CHECK(!upper_bounds_.empty()) << "a histogram needs at least one bucket";
  for (std::size_t i = 0; i < upper_bounds_.size(); ++i) {
    BAKEOFF_CHECK(std::isfinite(upper_bounds_[i])) << "bucket bounds must be finite";
    BAKEOFF_CHECK(i == 0 || upper_bounds_[i - 1] < upper_bounds_[i])
        << "bucket bounds must increase";
  }
}

void PrometheusHistogram::Observe(double value) {
  if (std::isnan(value)) return;
  auto it = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value);
  if (it != upper_bounds_.end()) ++bucket_counts_[static_cast<std::size_t>(it - upper_bounds_.begin())];
  ++count_;
  sum_ += value;
}

std::uint64_t PrometheusHistogram::CumulativeCount(std::size_t i) const {
  BAKEOFF_CHECK(i < bucket_counts_.size()) << "bucket " << i << " out of range";
  std::uint64_t total = 0;
  for (std::size_t k = 0; k <= i; ++k) total += bucket_counts_[k];
  return total;
}

std::span<const double> TtftBucketsSeconds() { return kTtftBuckets; }
std::span<const double> InterTokenBucketsSeconds() { return kInterTokenBuckets; }
std::span<const double> RequestLatencyBucketsSeconds() { return kRequestLatencyBuckets; }
std::span<const double> StepLagBucketsSeconds() { return kStepLagBuckets; }

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string RenderPrometheusMetrics(std::string_view model_name, const EngineCounters& engine,
                                    const RequestMetrics& requests) {
  Writer w(model_name);
  // Gauges.
  w.Gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
          FormatValue(engine.running));
  w.Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
          FormatValue(engine.waiting));
  const std::string usage = FormatValue(engine.kv.usage());
  w.Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", usage);
  w.Gauge("vllm:gpu_cache_usage_perc",
          "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use "
          "vllm:kv_cache_usage_perc instead.",
          usage);
  // Counters.
  w.Counter("vllm:prefix_cache_queries_total",
            "Prefix cache queries, in terms of number of queried tokens.",
            FormatValue(engine.prefix_queries_tokens));
  w.Counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
            FormatValue(engine.prefix_hit_tokens));
  w.Counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.",
            FormatValue(engine.preemptions));
  w.Counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.",
            FormatValue(engine.prompt_tokens));
  w.Counter("vllm:generation_tokens_total", "Number of generation tokens processed.",
            FormatValue(engine.generation_tokens));
  w.Family("vllm:request_success_total", "counter", "Count of successfully processed requests.");
  w.Sample("vllm:request_success_total", "finished_reason=\"stop\"",
           FormatValue(requests.finished_stop));
  w.Sample("vllm:request_success_total", "finished_reason=\"length\"",
           FormatValue(requests.finished_length));
  w.Sample("vllm:request_success_total", "finished_reason=\"abort\"",
           FormatValue(requests.finished_abort));
  // Histograms.
  w.Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              requests.ttft);
  w.Histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
              requests.inter_token);
  w.Histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
              requests.e2e);
  w.Histogram("vllm:request_queue_time_seconds",
              "Histogram of time spent in WAITING phase for request.", requests.queue_time);
  // bakeoff's own families.
  w.Family("bakeoff_emulated", "gauge",
           "1: this server is bakeoff's emulated engine; its figures are not an engine measurement.");
  w.Bare("bakeoff_emulated", "1");
  w.Histogram("bakeoff_emulate_step_lag_seconds",
              "How late each engine step ended against its planned instant (modelled mode).",
              requests.step_lag);
  w.Histogram("bakeoff_emulate_step_wake_lag_seconds",
              "How late the step timer woke the server against its instant (modelled mode): the step's "
              "planned end less the lead its tokens are rendered by.",
              requests.step_wake_lag);
  w.Family("bakeoff_emulate_rejected_requests_total", "counter",
           "Generation requests answered 503, by reason.");
  w.Sample("bakeoff_emulate_rejected_requests_total", "reason=\"queue_full\"",
           FormatValue(requests.rejected_queue_full));
  w.Sample("bakeoff_emulate_rejected_requests_total", "reason=\"not_ready\"",
           FormatValue(requests.rejected_not_ready));
  w.Sample("bakeoff_emulate_rejected_requests_total", "reason=\"shutting_down\"",
           FormatValue(requests.rejected_shutting_down));
  w.Family("bakeoff_emulate_lora_loads_total", "counter",
           "LoRA adapters loaded into one of the engine's adapter slots (max_loras).");
  w.Bare("bakeoff_emulate_lora_loads_total", FormatValue(engine.lora_loads));
  w.Family("bakeoff_emulate_injected_faults_total", "counter",
           "Faults injected by the --fault-* flags, by kind.");
  w.Sample("bakeoff_emulate_injected_faults_total", "kind=\"error\"",
           FormatValue(requests.fault_errors));
  w.Sample("bakeoff_emulate_injected_faults_total", "kind=\"stall\"",
           FormatValue(requests.fault_stalls));
  w.Sample("bakeoff_emulate_injected_faults_total", "kind=\"stream_error\"",
           FormatValue(requests.fault_stream_errors));
  return w.Take();
}

}  // namespace bakeoff::emulate
